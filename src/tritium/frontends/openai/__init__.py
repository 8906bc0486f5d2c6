"""The OpenAI-compatible frontend (``--openai-port``): ``/v1/models``, ``/v1/completions``
and ``/v1/chat/completions``, streamed and not, over models that follow Triton's
text-generation conventions.

Modules: ``server`` (starting the endpoint on the HTTP frontend's protocol), ``routes``
(the handlers), ``request_codec`` (request bodies), ``text_model`` (OpenAI fields to a
model's tensors and back), ``chat_template`` (messages to a prompt), ``calls`` (responses
to an answer), ``documents`` (OpenAI's JSON and SSE bytes), ``errors`` (OpenAI's error
shape). See docs/openai.md.
"""

from __future__ import annotations

from tritium.frontends.openai.server import (
    DEFAULT_OPENAI_PORT,
    start_from_settings,
    start_openai_server,
)

__all__ = ["DEFAULT_OPENAI_PORT", "start_from_settings", "start_openai_server"]
