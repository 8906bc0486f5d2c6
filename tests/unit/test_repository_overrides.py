"""Load parameters of the repository API: names, config and file overrides, with Triton's
error texts, checked before anything is written."""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath

import pytest

from tritium.core.errors import InvalidArgument, NotFound, Unavailable
from tritium.repository.fingerprint import model_fingerprint
from tritium.repository.overrides import (
    LoadOverride,
    override_file_path,
    validate_model_name,
    write_private_folder,
)
from tritium.service.lifecycle.dependencies import model_dependencies
from tritium.service.lifecycle.repository_api import (
    NOT_EXPLICIT,
    RepositoryControl,
    failed_load,
    parse_load_parameters,
)
from tritium.service.lifecycle.settings import lifecycle_options
from tritium.workers import CrashPolicy

CONFIG = json.dumps({"name": "m", "backend": "python"})


@pytest.mark.parametrize("name", ["add_sub", "a.b", "model-1", "x y"])
def test_valid_model_names(name):
    validate_model_name(name)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("", "model name must not be empty"),
        ("  \t", "model name must not contain only whitespace characters"),
        ("../etc", "invalid model name '../etc', model name must not contain path traversal"),
        ("a/b", "model name must not contain path traversal characters"),
        ("..", "model name must not contain path traversal characters"),
        ("a\0b", "invalid model name 'a\\0b'"),
        ("a\\b", "model name must not contain path traversal characters"),
    ],
)
def test_invalid_model_names_are_refused_with_tritons_text(name, text):
    with pytest.raises(InvalidArgument) as info:
        validate_model_name(name)
    assert text in info.value.message


@pytest.mark.parametrize("key", ["file:1/model.py", "file:1/sub/data.bin", "file:config.pbtxt"])
def test_file_paths_inside_the_model_folder(key):
    assert str(override_file_path(key)) == key[5:]


@pytest.mark.parametrize(
    "key",
    [
        "file:",
        "file:../model.py",
        "file:1/../../x",
        "file:/etc/passwd",
        "file:1//model.py",
        "file:./1/model.py",
        "file:1/model.py\0.txt",
        "file:..\\x",
    ],
)
def test_file_paths_that_leave_the_folder_are_refused(key):
    with pytest.raises(InvalidArgument) as info:
        override_file_path(key)
    assert "must stay within model directory" in info.value.message


def test_parameters_without_override():
    assert parse_load_parameters({}) is None


def test_config_only_override():
    override = parse_load_parameters({"config": CONFIG})
    assert override is not None and override.config.name == "m" and override.files == {}


def test_files_need_a_config():
    with pytest.raises(InvalidArgument, match="Load parameter 'config' must be specified"):
        parse_load_parameters({"file:1/model.py": b"x"})


@pytest.mark.parametrize(
    ("params", "text"),
    [
        ({"config": b"{}"}, "Config parameter 'config' must have string type for its value"),
        ({"config": CONFIG, "file:1/model.py": "text"}, "must have bytes type"),
        ({"other": "x"}, "Unrecognized load parameter 'other' with type 'STRING'"),
        ({"config": "{not json"}, "Invalid config override:"),
        ({"config": "[1]"}, "Invalid config override:"),
        ({"config": json.dumps({"bogus_field": 1})}, "Invalid config override:"),
        (
            {"config": CONFIG, "file:1": b"a", "file:1/model.py": b"b"},
            "directory has been created as a file",
        ),
    ],
)
def test_bad_parameters(params, text):
    with pytest.raises(InvalidArgument) as info:
        parse_load_parameters(params)
    assert text in info.value.message


def test_private_folder_holds_config_and_files_and_is_removed(tmp_path):
    override = parse_load_parameters(
        {"config": CONFIG, "file:1/model.py": b"print(1)", "file:1/sub/w.bin": b"\x00\x01"}
    )
    assert override is not None
    folder = write_private_folder("m", override)
    try:
        assert (folder.path / "config.pbtxt").read_text().startswith('name: "m"')
        assert (folder.path / "1" / "model.py").read_bytes() == b"print(1)"
        assert (folder.path / "1" / "sub" / "w.bin").read_bytes() == b"\x00\x01"
        assert oct(os.stat(folder.path).st_mode & 0o777) == "0o700"
    finally:
        folder.acquire()
        folder.acquire()
        folder.release()
        assert folder.path.exists()  # one user left
        folder.release()
    assert not folder.path.exists()


def test_private_folder_is_removed_when_writing_fails(monkeypatch):
    made: list[Path] = []
    import tempfile

    real = tempfile.mkdtemp

    def mkdtemp(**kwargs):
        path = real(**kwargs)
        made.append(Path(path))
        return path

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    bad = LoadOverride(None, {PurePosixPath("a"): b"1", PurePosixPath("a/b"): b"2"})
    with pytest.raises(OSError):
        write_private_folder("m", bad)
    assert made and not made[0].exists()


def test_fingerprint_changes_with_files_not_with_bytecode(tmp_path):
    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "model.py").write_text("a = 1\n")
    first = model_fingerprint(tmp_path)
    (tmp_path / "1" / "__pycache__").mkdir()
    (tmp_path / "1" / "__pycache__" / "model.pyc").write_bytes(b"x")
    (tmp_path / ".swp").write_text("x")
    assert model_fingerprint(tmp_path) == first
    (tmp_path / "1" / "model.py").write_text("a = 22\n")
    second = model_fingerprint(tmp_path)
    assert second != first
    (tmp_path / "2").mkdir()
    assert model_fingerprint(tmp_path) != second


def test_dependencies_of_an_ensemble_and_of_a_plain_model():
    config = {
        "ensemble_scheduling": {
            "step": [{"model_name": "pre"}, {"model_name": "net"}, {"model_name": "pre"}]
        }
    }
    assert model_dependencies(config) == ["pre", "net"]
    assert model_dependencies({"backend": "python"}) == []
    from tritium.config import config_from_dict

    assert model_dependencies(config_from_dict(config)) == ["pre", "net"]


def test_lifecycle_backend_settings():
    assert lifecycle_options([]) == {}
    opts = lifecycle_options(
        [
            ("python", "initialize-timeout-seconds", "2.5"),
            ("python", "restart-limit", "3"),
            ("onnx", "restart-window-seconds", "9"),
        ]
    )
    assert opts == {"load_timeout_s": 2.5, "crash_policy": CrashPolicy(3, 60.0)}
    with pytest.raises(ValueError, match="initialize-timeout-seconds must be > 0"):
        lifecycle_options([("python", "initialize-timeout-seconds", "0")])


@pytest.mark.parametrize("mode", ["none", "poll"])
def test_load_and_unload_outside_explicit_mode_answer_tritons_error(mode):
    import asyncio

    control = RepositoryControl(None, mode)  # type: ignore[arg-type]

    async def main() -> None:
        for call in (control.load("m"), control.unload("m")):
            with pytest.raises(Unavailable) as info:
                await call
            assert info.value.message == NOT_EXPLICIT

    asyncio.run(main())


@pytest.mark.parametrize("key", ["file:1/" + "m" * 256, "file:" + "é" * 128 + "/model.py"])
def test_path_components_longer_than_the_file_system_takes_are_refused(key):
    with pytest.raises(InvalidArgument) as info:
        override_file_path(key)
    assert "path component is longer than 255 bytes" in info.value.message


def test_a_name_of_255_bytes_is_accepted():
    assert override_file_path("file:1/" + "m" * 255).name == "m" * 255


def test_a_whole_path_too_long_to_write_is_the_clients_fault():
    deep = PurePosixPath(*(["d" * 250] * 20), "model.py")  # ~5000 bytes > PATH_MAX
    with pytest.raises(InvalidArgument) as info:
        write_private_folder("m", LoadOverride(None, {deep: b"x"}))
    assert "too long" in info.value.message


def test_every_failed_load_says_failed_to_load_the_model_then_why():
    versions = InvalidArgument(
        "load failed for model 'm': version 1 is at UNAVAILABLE state: boom;"
    )
    answer = failed_load("m", versions)
    assert isinstance(answer, InvalidArgument)
    # Triton's own text is kept whole after the words its example clients look for.
    assert answer.message == (
        "failed to load 'm': load failed for model 'm': version 1 is at UNAVAILABLE state: boom;"
    )
    # Already saying it: unchanged (Triton's "failed to poll" text keeps its comma).
    missing = NotFound("failed to load 'm', failed to poll from model repository")
    assert failed_load("m", missing) is missing
    # The builder's own prefix is not said twice; the code is kept.
    unavailable = failed_load("m", Unavailable("failed to load model 'm': no config.pbtxt"))
    assert isinstance(unavailable, Unavailable)
    assert unavailable.message == "failed to load 'm': no config.pbtxt"
    assert failed_load("a\0b", InvalidArgument("bad")).message == "failed to load 'a\\0b': bad"


def test_a_load_refused_before_the_manager_is_asked_says_failed_to_load():
    import asyncio

    control = RepositoryControl(None, "explicit")  # type: ignore[arg-type]

    async def main() -> None:
        for name, parameters, why in [
            ("../etc", None, "model name must not contain path traversal characters"),
            ("m", {"config": "{nope"}, "Invalid config override: "),
            ("m", {"bogus": 1}, "Unrecognized load parameter 'bogus' with type 'INT'"),
        ]:
            with pytest.raises(InvalidArgument) as info:
                await control.load(name, parameters)
            assert info.value.message.startswith(f"failed to load '{name}': ")
            assert why in info.value.message

    asyncio.run(main())
