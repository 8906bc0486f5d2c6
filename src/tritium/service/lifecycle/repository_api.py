"""Triton's model repository extension as service operations: index, load, unload.

Both frontends call these with already-decoded values: load parameters map a name to a
``str`` (Triton's STRING parameter, e.g. ``config``) or ``bytes`` (BYTES, the
``file:<path>`` contents); anything else is another type. Every check runs before the
model manager is asked to do anything, so a refused request changes nothing.
"""

from __future__ import annotations

from typing import Any

import orjson

from tritium import config as cfg
from tritium.core.errors import InvalidArgument, TritiumError, Unavailable, error_from_code
from tritium.repository.overrides import (
    FILE_PREFIX,
    LoadOverride,
    check_file_layout,
    override_file_path,
    printable,
    validate_model_name,
)
from tritium.service.lifecycle.manager import ModelManager

CONTROL_MODES = ("none", "poll", "explicit")
#: What server metadata lists once the repository extension is served.
EXTENSIONS = ("model_repository", "model_repository(unload_dependents)")
NOT_EXPLICIT = "explicit model load / unload is not allowed if polling is enabled"


class RepositoryControl:
    """The repository API over a model manager in control mode ``mode``; it also serves
    ``model_code``'s loads and unloads (see :class:`ModelCodeControl`)."""

    def __init__(
        self, models: ModelManager, mode: str = "none", model_code: ModelCodeControl | None = None
    ) -> None:
        if mode not in CONTROL_MODES:
            raise ValueError(f"unknown model control mode {mode!r}")
        self.models = models
        self.mode = mode
        if model_code is not None:
            model_code._serve(self)

    async def index(self, ready_only: bool = False) -> list[dict[str, Any]]:
        """Every model folder, loaded or not, with its versions' states and reasons."""
        names = await self.models.folder_names()
        return self.models.index_entries(names, ready_only)

    async def load(self, name: str, parameters: dict[str, Any] | None = None) -> None:
        """Load or reload ``name`` (with an override config and files); returns once the
        new versions serve. Every failure says ``failed to load '<name>'`` (see
        :func:`failed_load`); outside explicit mode the answer is Triton's own refusal,
        the same for load and unload."""
        self._check_explicit()
        try:
            validate_model_name(name)
            override = parse_load_parameters(parameters or {})
            await self.models.load(name, override)
        except TritiumError as exc:
            raise failed_load(name, exc) from None

    async def unload(self, name: str, unload_dependents: bool = False) -> None:
        """Unload ``name`` (and, with ``unload_dependents``, the models it depends on that
        nothing else needs); returns once its workers stopped. Unknown names are a no-op,
        as in Triton."""
        self._check_explicit()
        validate_model_name(name)
        await self.models.unload(name, unload_dependents)

    def _check_explicit(self) -> None:
        if self.mode != "explicit":
            raise Unavailable(NOT_EXPLICIT)


class ModelCodeControl:
    """``pb_utils.load_model`` / ``unload_model`` from model code: the repository API's
    load and unload, with the same rules (explicit mode only) and errors.

    This small object breaks the one construction-order cycle of the wiring: the BLS
    endpoint needs it, the version builder (hence the model manager) needs the BLS
    endpoint for the workers it starts, and the repository API needs the manager. So it is
    created first, empty, given to the endpoint, and the :class:`RepositoryControl` built
    last names itself its target in its own constructor. No model code can call it before
    that: no worker exists until the manager loads a model, after the wiring is done.
    """

    __slots__ = ("_repository",)

    def __init__(self) -> None:
        self._repository: RepositoryControl | None = None

    def _serve(self, repository: RepositoryControl) -> None:
        if self._repository is not None:
            raise RuntimeError("model code's model control already has its repository API")
        self._repository = repository

    def _target(self) -> RepositoryControl:
        repository = self._repository
        if repository is None:  # only a wiring mistake gets here
            raise Unavailable("model control is not available on this server")
        return repository

    async def load(self, name: str, config: str) -> None:
        await self._target().load(name, {"config": config} if config else None)

    async def unload(self, name: str, unload_dependents: bool) -> None:
        await self._target().unload(name, unload_dependents)


def failed_load(name: str, exc: TritiumError) -> TritiumError:
    """``exc`` as the answer to a load of ``name``: its code, and a message that contains
    ``failed to load '<name>'``, the words Triton's example clients look for in any failed
    load, followed by the reason (Triton's own text, such as "load failed for model ...:
    version 1 is at UNAVAILABLE state: ...", kept whole after it)."""
    shown = printable(name)
    head = f"failed to load '{shown}'"
    message = exc.message
    if head in message:
        return exc
    # The version builder's own prefix would say the same words twice.
    message = message.removeprefix(f"failed to load model '{shown}': ")
    return error_from_code(exc.code, f"{head}: {message}")


class ConfigOverrideError(InvalidArgument):
    """A load's ``config`` parameter is not a model config."""


def parse_load_parameters(parameters: dict[str, Any]) -> LoadOverride | None:
    """The override a load's parameters ask for (None for a plain load), with Triton's
    errors for parameters of the wrong type, unknown names and paths that leave the model
    folder."""
    config = None
    files = {}
    for key, value in parameters.items():
        if key == "config":
            if not isinstance(value, str):
                raise InvalidArgument(
                    "Config parameter 'config' must have string type for its value"
                )
            config = _config_from_json(value)
        elif key.startswith(FILE_PREFIX):
            if not isinstance(value, bytes | bytearray | memoryview):
                raise InvalidArgument(f"File parameter '{key}' must have bytes type for its value")
            files[override_file_path(key)] = bytes(value)
        else:
            raise InvalidArgument(
                f"Unrecognized load parameter '{key}' with type '{_type_name(value)}'"
            )
    if files and config is None:
        raise InvalidArgument("Load parameter 'config' must be specified for model file override")
    check_file_layout(files)
    if config is None:
        return None
    return LoadOverride(config, files)


def _config_from_json(text: str) -> Any:
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ConfigOverrideError(f"Invalid config override: {exc}") from None
    if not isinstance(doc, dict):
        raise ConfigOverrideError("Invalid config override: the model config must be a JSON object")
    try:
        return cfg.config_from_dict(doc)
    except cfg.ConfigError as exc:
        raise ConfigOverrideError(f"Invalid config override: {exc}") from None


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "BOOL"
    if isinstance(value, int):
        return "INT"
    if isinstance(value, bytes | bytearray | memoryview):
        return "BYTES"
    if isinstance(value, str):
        return "STRING"
    return type(value).__name__.upper()
