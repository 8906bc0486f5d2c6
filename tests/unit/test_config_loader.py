"""Reading config.pbtxt files: which file, parse errors, missing files."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritium.config import ConfigError, config_path, load_config_file, parse_config_text
from tritium.core.errors import InvalidArgument

ADD_SUB = """
name: "add_sub"
backend: "python"
max_batch_size: 0
input [
  { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }
]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
# comments are allowed
instance_group [ { kind: KIND_CPU count: 2 } ]
"""


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_valid_file_parses_into_model_config(tmp_path: Path) -> None:
    write(tmp_path / "add_sub" / "config.pbtxt", ADD_SUB)
    config = load_config_file(tmp_path / "add_sub", "add_sub")
    assert config is not None
    assert config.name == "add_sub"
    assert config.backend == "python"
    assert [t.name for t in config.input] == ["INPUT0", "INPUT1"]
    assert list(config.input[1].dims) == [4]
    assert config.instance_group[0].count == 2


def test_missing_file_returns_none(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    assert load_config_file(tmp_path / "m", "m") is None


def test_model_config_name_picks_configs_folder(tmp_path: Path) -> None:
    # Triton's --model-config-name=<n>: <model>/configs/<n>.pbtxt when it exists.
    model = tmp_path / "m"
    write(model / "config.pbtxt", 'name: "m" max_batch_size: 1')
    write(model / "configs" / "alt.pbtxt", 'name: "m" max_batch_size: 7')
    assert load_config_file(model, "m", "alt").max_batch_size == 7
    assert config_path(model, "alt") == model / "configs" / "alt.pbtxt"


def test_model_config_name_falls_back_to_config_pbtxt(tmp_path: Path) -> None:
    model = tmp_path / "m"
    write(model / "config.pbtxt", 'name: "m" max_batch_size: 1')
    assert load_config_file(model, "m", "absent").max_batch_size == 1
    assert load_config_file(model, "m", "").max_batch_size == 1
    assert config_path(model, "absent") == model / "config.pbtxt"


def test_model_config_name_without_any_file_returns_none(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    assert load_config_file(tmp_path / "m", "m", "alt") is None


def test_syntax_error_names_model_file_and_position(tmp_path: Path) -> None:
    text = 'name: "broken"\ninput [ { name: "X" data_type: TYPE_FP32 dims: [ 4 } ]\n'
    write(tmp_path / "broken" / "config.pbtxt", text)
    with pytest.raises(ConfigError) as info:
        load_config_file(tmp_path / "broken", "broken")
    message = str(info.value)
    assert message.startswith("failed to read text proto from config.pbtxt for model 'broken': ")
    assert "2:" in message  # line of the error, then its column
    assert str(tmp_path) not in message  # clients never see server paths
    assert isinstance(info.value, InvalidArgument)
    assert info.value.phase == "repository"


def test_error_in_custom_config_names_that_file(tmp_path: Path) -> None:
    write(tmp_path / "m" / "configs" / "alt.pbtxt", "max_batch_size: nope")
    with pytest.raises(ConfigError, match=r"from configs/alt\.pbtxt for model 'm': 1:"):
        load_config_file(tmp_path / "m", "m", "alt")


@pytest.mark.parametrize(
    "text, fragment",
    [
        ('name: "m" no_such_field: 1', "no_such_field"),
        ('input [ { name: "X" data_type: TYPE_FLOAT32 } ]', "TYPE_FLOAT32"),
        ('name: "a" name: "b"', "name"),  # a singular field given twice
        ("max_batch_size: 99999999999", "max_batch_size"),  # out of int32 range
    ],
)
def test_invalid_content_is_a_config_error(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config_text(text, "m")
    assert fragment in str(info.value)


def test_non_utf8_file_is_a_config_error(tmp_path: Path) -> None:
    write(tmp_path / "m" / "config.pbtxt", b'name: "\xff"')
    with pytest.raises(ConfigError, match="config.pbtxt for model 'm': not valid UTF-8"):
        load_config_file(tmp_path / "m", "m")


def test_unreadable_config_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "m" / "config.pbtxt").mkdir(parents=True)  # a folder where the file should be
    with pytest.raises(ConfigError, match="config.pbtxt for model 'm'"):
        load_config_file(tmp_path / "m", "m")


def test_empty_file_is_an_empty_config(tmp_path: Path) -> None:
    write(tmp_path / "m" / "config.pbtxt", "")
    config = load_config_file(tmp_path / "m", "m")
    assert config is not None
    assert config.ByteSize() == 0
