"""The README's commands work as printed, against real servers the test starts.

The README marks each block this test runs with an HTML comment on the line before it:

- ``<!-- readme-test: files -->``: a shell block that writes files; run in a fresh folder,
  which becomes the folder later relative paths are read from (as for a reader who ran it);
- ``<!-- readme-test: serve -->``: a ``tritium serve …`` command; the test starts it (the
  server before it is stopped) with ports chosen by the kernel;
- ``<!-- readme-test: request -->``: a shell or Python block sent to the current server, with
  ``localhost:8000`` / ``8001`` / ``8002`` replaced by the server's ports; a Python block's
  ``print(...)  # text`` comments are the output it must print;
- ``<!-- readme-test: output -->``: what the request before it prints, exactly;
- ``<!-- readme-test: make -->``: a ``make`` command, checked with ``make -n`` (what it would
  run) so the test does not build a virtual environment.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tritium.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MARKED = re.compile(r"<!-- readme-test: (\w+) -->\n```(\w+)\n(.*?)```", re.S)
PRINTED = re.compile(r"^print\(.*\)\s+# (.*)$", re.M)


@dataclass(frozen=True)
class Block:
    kind: str
    lang: str
    text: str


def readme_blocks() -> list[Block]:
    return [Block(*m.groups()) for m in MARKED.finditer(README.read_text())]


def test_readme_fits_a_guide() -> None:
    """A guide, not a notebook: short, with the runnable parts marked for this test."""
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    kinds = [b.kind for b in readme_blocks()]
    assert kinds.count("serve") == 2 and kinds.count("files") == 1
    assert kinds.count("request") >= 4 and kinds.count("output") >= 2
    # Every link to a page of docs/ leads to a file that exists.
    for target in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / target).is_file(), target


def _with_ports(text: str, server: ServerProcess) -> str:
    return (
        text.replace("localhost:8000", server.http_url)
        .replace("localhost:8001", server.grpc_url)
        .replace("localhost:8002", f"127.0.0.1:{server.metrics_port}")
    )


def _serve(command: str, folder: Path) -> ServerProcess:
    words = shlex.split(command.strip())
    assert words[:2] == ["tritium", "serve"], command
    args = []
    for word in words[2:]:
        assert not re.match(r"--(http|grpc|metrics)-port", word), "ports are the test's to choose"
        name, sep, value = word.partition("=")
        if name == "--model-repository" and not Path(value).is_absolute():
            word = f"{name}{sep}{folder / value}"
        args.append(word)
    return ServerProcess([], args, grpc=True, metrics=True).start()


def test_readme_walkthrough(tmp_path: Path) -> None:
    """Serve, request, write the first model, serve it, request it: all as printed."""
    folder = ROOT  # a fresh clone, until the reader writes files elsewhere
    server: ServerProcess | None = None
    last_output: str | None = None
    ran = 0
    try:
        for block in readme_blocks():
            if block.kind == "files":
                subprocess.run(["bash", "-ec", block.text], cwd=tmp_path, check=True, timeout=30)
                folder = tmp_path
            elif block.kind == "serve":
                if server is not None:
                    server.stop()
                server = _serve(block.text, folder)
            elif block.kind == "request":
                assert server is not None, "a request before any server"
                code = _with_ports(block.text, server)
                command = [sys.executable, "-c", code] if block.lang == "python" else ["bash", "-ec", code]
                out = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=60)
                assert out.returncode == 0, f"{block.text}\n{out.stderr}"
                last_output = out.stdout
                if block.lang == "python":
                    assert out.stdout.splitlines() == PRINTED.findall(block.text)
                ran += 1
            elif block.kind == "output":
                assert last_output is not None, "an output block with no request before it"
                assert last_output.strip() == block.text.strip()
                last_output = None
            elif block.kind != "make":
                raise AssertionError(f"unknown readme-test block kind {block.kind!r}")
        assert server is not None
        # The first model's initialize() logged through pb_utils.Logger, as the README has it.
        assert server.wait_for_log(r"double: loaded version 1")
    finally:
        if server is not None:
            server.stop()
    assert ran >= 4


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_readme_make_commands() -> None:
    """``make serve HTTP_PORT=…`` passes the ports to ``tritium serve`` (checked dry)."""
    blocks = [b for b in readme_blocks() if b.kind == "make"]
    assert blocks
    for block in blocks:
        words = shlex.split(block.text.strip())
        assert words[0] == "make"
        out = subprocess.run(
            ["make", "-n", *words[1:]], cwd=ROOT, capture_output=True, text=True, timeout=30
        )
        assert out.returncode == 0, out.stderr
        for port in re.finditer(r"\b(HTTP|GRPC|METRICS)_PORT=(\d+)", block.text):
            flag = f"--{port[1].lower()}-port={port[2]}"
            assert flag in out.stdout, (flag, out.stdout)
