"""The server the OpenAI e2e tests share: ``--openai-port=0`` over the example text
generator (``tiny_lm``: vLLM-style sampling JSON, token counts, a chat template), the
README's ``word_stream`` (sampling fields as request parameters, no counts, no template),
the test models ``text_echo`` (typed sampling inputs, answers once, a template) and
``text_flood`` (floods a stream), and ``add_sub`` (not a text generator)."""

from __future__ import annotations

import time
from pathlib import Path

from tritium.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
REPOSITORIES = [
    ROOT / "examples" / "text_generation" / "model_repository",
    ROOT / "examples" / "model_repository",
    ROOT / "tests" / "models",
]
MODELS = ("tiny_lm", "word_stream", "text_echo", "text_flood", "add_sub")


def openai_server() -> ServerProcess:
    args = ["--model-control-mode=explicit", *(f"--load-model={m}" for m in MODELS)]
    return ServerProcess(REPOSITORIES, args, openai=True)


def wait_for_note(server: ServerProcess, prefix: str, before: int, timeout: float = 30) -> int:
    """The number after the next ``<prefix> <n>`` line of the server log."""
    deadline = time.monotonic() + timeout
    while server.log.count(prefix) <= before:
        assert time.monotonic() < deadline, server.log[-3000:]
        time.sleep(0.05)
    return int(server.log.rsplit(prefix, 1)[1].split()[0])
