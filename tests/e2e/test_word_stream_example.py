"""The streaming page's snippets (docs/streaming.md) work as printed against the example ``word_stream``
model: the gRPC stream client, and the ``curl`` body on ``generate_stream``."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import orjson
import pytest

from tritium.testing import ServerProcess

from .conftest import EXAMPLE_MODELS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "streaming.md"
SECTION = PAGE.read_text().split("## Over gRPC", 1)[1]


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    args = ["--model-control-mode=explicit", "--load-model=word_stream"]
    with ServerProcess([EXAMPLE_MODELS], args, grpc=True) as process:
        yield process


def test_grpc_stream_snippet(server: ServerProcess) -> None:
    snippet = re.findall(r"```python\n(.*?)```", SECTION, re.S)[0]
    assert "localhost:8001" in snippet
    code = snippet.replace("localhost:8001", server.grpc_url)
    # A hang shows where it is: every thread's stack on stderr, well within the timeout.
    code = "import faulthandler; faulthandler.dump_traceback_later(45, exit=True)\n" + code
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    # max_tokens=8: the echo of the prompt, then seven words.
    assert out.stdout == "You said: hello. Thank you for asking. Here is an\n"


def test_curl_generate_stream_body(server: ServerProcess) -> None:
    command = re.findall(r"```bash\n(.*?)```", SECTION, re.S)[0]
    body = re.search(r"-d '(.*?)'", command).group(1)  # type: ignore[union-attr]

    async def read() -> list[dict]:
        url = f"http://{server.http_url}/v2/models/word_stream/generate_stream"
        async with aiohttp.ClientSession() as session:
            async with session.post(url, data=body) as reply:
                assert reply.status == 200
                return [
                    orjson.loads(line[6:])
                    async for line in reply.content
                    if line.startswith(b"data: ")
                ]

    events = asyncio.run(asyncio.wait_for(read(), 60))
    assert len(events) == 8
    assert events[0] == {
        "model_name": "word_stream",
        "model_version": "1",
        "text_output": "You said: hello.",
    }
    assert events[1]["text_output"] == " Thank"
