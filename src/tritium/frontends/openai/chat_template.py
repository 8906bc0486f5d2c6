"""Chat messages to a prompt: the model's own chat template when it has one, else a plain one.

A model provides a template the way Hugging Face models do, in a file next to it: the
``chat_template`` of ``tokenizer_config.json`` (a string, or a list of named templates of
which ``default`` is used), or a ``chat_template.jinja`` file; looked for in the model's
folder, then in its version folders (highest first). No tokenizer library is needed: the
template is rendered with jinja2 in a sandboxed, immutable environment (a template cannot
reach Python internals or change its inputs), given ``messages``,
``add_generation_prompt=True``, the file's ``bos_token`` and ``eos_token``, and the
``raise_exception`` function templates call to refuse a conversation (a 400 with its text).

Without a template the prompt is :func:`plain_prompt`: one ``role: content`` line per
message, then ``assistant:`` for the model to continue.

Loading reads files: :func:`load_chat_template` runs off the event loop; rendering runs on
it (a compiled template renders in microseconds).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tritium.frontends.openai.errors import OpenAIError

log = logging.getLogger("tritium.frontends.openai")

TOKENIZER_CONFIG = "tokenizer_config.json"
TEMPLATE_FILE = "chat_template.jinja"


def plain_prompt(messages: Sequence[dict[str, str]]) -> str:
    """The documented template of models without one: ``role: content`` lines, then
    ``assistant:``."""
    lines = [f"{m['role']}: {m['content']}\n" for m in messages]
    lines.append("assistant:")
    return "".join(lines)


class _TemplateRefused(Exception):
    """Raised by a template's ``raise_exception(message)``."""


def _raise_exception(message: str) -> None:
    raise _TemplateRefused(message)


def _token_text(value: Any) -> str:
    """``bos_token`` / ``eos_token`` as tokenizer configs write them: text, or an object
    with ``content``."""
    if isinstance(value, dict):
        value = value.get("content", "")
    return value if isinstance(value, str) else ""


class ChatTemplate:
    """A model's compiled chat template."""

    __slots__ = ("_template", "_bos", "_eos", "source")

    def __init__(self, source: str, bos_token: str = "", eos_token: str = "") -> None:
        try:
            from jinja2.sandbox import ImmutableSandboxedEnvironment
        except ImportError:  # pragma: no cover - jinja2 is in the openai extra
            raise OpenAIError(
                500,
                "This model has a chat template, and rendering it needs jinja2: "
                "pip install 'tritium[openai]'.",
                type="server_error",
            ) from None
        env = ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
        )
        env.globals["raise_exception"] = _raise_exception
        # Templates write JSON with tojson; keep non-ASCII text as it is.
        env.policies["json.dumps_kwargs"] = {"ensure_ascii": False, "sort_keys": False}
        self._template = env.from_string(source)
        self._bos = bos_token
        self._eos = eos_token
        self.source = source

    def render(self, messages: Sequence[dict[str, str]]) -> str:
        from jinja2 import TemplateError

        try:
            return self._template.render(
                messages=list(messages),
                add_generation_prompt=True,
                bos_token=self._bos,
                eos_token=self._eos,
            )
        except _TemplateRefused as exc:
            raise OpenAIError(400, str(exc), param="messages") from None
        except (TemplateError, TypeError, ValueError, KeyError) as exc:
            log.warning("chat template failed to render: %s", exc)
            raise OpenAIError(
                400,
                f"The model's chat template failed on these messages: {exc}",
                param="messages",
            ) from None


def _folders(model_dir: Path) -> list[Path]:
    versions = [p for p in model_dir.iterdir() if p.is_dir() and p.name.isdigit()]
    return [model_dir, *sorted(versions, key=lambda p: int(p.name), reverse=True)]


def _from_tokenizer_config(path: Path) -> ChatTemplate | None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        return None
    source = doc.get("chat_template")
    if isinstance(source, list):
        named = {t.get("name"): t.get("template") for t in source if isinstance(t, dict)}
        source = named.get("default") or next(iter(named.values()), None)
    if not isinstance(source, str) or not source:
        return None
    return ChatTemplate(
        source, _token_text(doc.get("bos_token")), _token_text(doc.get("eos_token"))
    )


def load_chat_template(repositories: Sequence[Path], model: str) -> ChatTemplate | None:
    """The chat template of ``model`` in the first repository that holds it; None when it
    has none. Reads files: call it off the event loop."""
    for root in repositories:
        model_dir = Path(root) / model
        if not model_dir.is_dir():
            continue
        for folder in _folders(model_dir):
            try:
                config = folder / TOKENIZER_CONFIG
                if config.is_file():
                    found = _from_tokenizer_config(config)
                    if found is not None:
                        return found
                jinja = folder / TEMPLATE_FILE
                if jinja.is_file():
                    return ChatTemplate(jinja.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                log.warning("model '%s': cannot read its chat template: %s", model, exc)
                return None
            except OpenAIError:
                raise  # jinja2 is not installed: said to the client, not papered over
            except Exception as exc:  # a template jinja2 cannot compile
                log.warning("model '%s': its chat template does not compile: %s", model, exc)
                return None
        return None
    return None
