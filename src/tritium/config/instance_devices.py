"""Which device each model instance gets: ``KIND_GPU`` groups' ``gpus``, as Triton hands
them out, and, for any other accelerator, two model parameters Triton ignores (so the
same ``config.pbtxt`` still loads there)::

    parameters: { key: "tritium.device_ids" value: { string_value: "0,1,2,3" } }
    parameters: { key: "tritium.device_env" value: { string_value: "ASCEND_RT_VISIBLE_DEVICES" } }

``tritium.device_ids`` hands its ids to the instances of the ``KIND_CPU`` and
``KIND_MODEL`` groups round robin, in Triton's instance order; each instance's
``initialize(args)`` reads its id as ``args["model_instance_device_id"]``.
``tritium.device_env`` names an environment variable set, in each instance's worker
process before the model is imported, to that instance's device id (also for
``KIND_GPU`` instances), so a runtime that reads it at import sees only its own device.

The instances are computed from the configuration alone (pure; no processes here).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEVICE_IDS = "tritium.device_ids"
DEVICE_ENV = "tritium.device_env"

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class DeviceParameterError(ValueError):
    """A device parameter that cannot be honoured; the text names it."""


@dataclass(frozen=True, slots=True)
class InstanceDevice:
    """One instance as Triton names it, of its kind, on its device.

    ``env``: the environment its worker gets on top of the server's (name, value);
    ``group``: the index of its instance group in the configuration."""

    name: str  # e.g. "add_sub_0_0"
    kind: str  # "CPU" | "GPU" | "MODEL"
    device_id: int = 0
    env: tuple[tuple[str, str], ...] = ()
    group: int = 0


@dataclass(frozen=True, slots=True)
class DeviceParameters:
    ids: tuple[int, ...] = ()
    env: str = ""


def parameter_strings(config: Mapping[str, Any]) -> dict[str, str]:
    """A configuration's (as JSON) ``parameters`` as key -> string value."""
    return {
        str(key): str(value.get("string_value", "")) if isinstance(value, Mapping) else ""
        for key, value in config.get("parameters", {}).items()
    }


def device_parameters(params: Mapping[str, str]) -> DeviceParameters:
    """The device parameters among ``params``; raises DeviceParameterError naming the
    one at fault."""
    ids_text = params.get(DEVICE_IDS, "").strip()
    ids: list[int] = []
    if ids_text:
        for part in ids_text.split(","):
            item = part.strip()
            if not item.isdigit():
                raise DeviceParameterError(
                    f"parameter '{DEVICE_IDS}' must list device ids as non-negative integers "
                    f"separated by commas (e.g. \"0,1\"), got '{ids_text}'"
                )
            ids.append(int(item))
    env = params.get(DEVICE_ENV, "").strip()
    if env and not _ENV_NAME.match(env):
        raise DeviceParameterError(
            f"parameter '{DEVICE_ENV}' must be an environment variable name, got '{env}'"
        )
    return DeviceParameters(tuple(ids), env)


def device_problem(name: str, params: Mapping[str, str], gpu_groups: bool) -> str | None:
    """Why model ``name``'s device parameters (among its ``params``) cannot be honoured,
    or None; ``gpu_groups``: whether it has ``KIND_GPU`` instance groups."""
    try:
        found = device_parameters(params)
    except DeviceParameterError as exc:
        return f"model '{name}': {exc}"
    if found.env and not found.ids and not gpu_groups:
        return (
            f"model '{name}': parameter '{DEVICE_ENV}' needs device ids to set: list "
            f"them in '{DEVICE_IDS}' (or use KIND_GPU instance groups)"
        )
    return None


def instance_devices(config: Mapping[str, Any]) -> list[InstanceDevice]:
    """Every instance of the configuration (as JSON, completed), in Triton's order and
    with Triton's names: each count index on each listed GPU for ``KIND_GPU`` groups;
    ``tritium.device_ids`` round robin over the other groups' instances (device 0
    without it). Invalid device parameters raise DeviceParameterError."""
    found = device_parameters(parameter_strings(config))
    instances: list[InstanceDevice] = []
    others = 0  # instances handed an id from tritium.device_ids so far
    for index, group in enumerate(config.get("instance_group", ())):
        kind = str(group.get("kind", "KIND_CPU")).removeprefix("KIND_")
        count = int(group.get("count", 1))
        gpus = [int(g) for g in group.get("gpus", ())] if kind == "GPU" else []
        for c in range(count):
            name = f"{group['name']}_{c}"
            if kind == "GPU":
                devices = gpus or [0]
                placed = True
            elif found.ids:
                devices = [found.ids[others % len(found.ids)]]
                others += 1
                placed = True
            else:
                devices = [0]
                placed = False
            for device in devices:
                env = ((found.env, str(device)),) if found.env and placed else ()
                instances.append(InstanceDevice(name, kind, device, env, index))
    return instances


def describe(instance: InstanceDevice) -> str:
    """``"add_sub_0_0 (CPU device 1, ASCEND_RT_VISIBLE_DEVICES=1)"``: Triton's words in
    its instance-initialize log line, with the environment set for it."""
    extra = "".join(f", {name}={value}" for name, value in instance.env)
    return f"{instance.name} ({instance.kind} device {instance.device_id}{extra})"


def visible_device_index(config: Mapping[str, Any], device_id: int) -> int:
    """The index a runtime inside the instance's worker opens its device by: 0 when
    ``tritium.device_env`` narrowed the worker to its one device, else ``device_id``."""
    try:
        narrowed = bool(device_parameters(parameter_strings(config)).env)
    except DeviceParameterError:
        narrowed = False
    return 0 if narrowed else device_id


def own_device_index(config: Mapping[str, Any], kind: str, device_id: int) -> int | None:
    """The index a runtime opens the instance's own device by (see
    :func:`visible_device_index`), or None when the instance has no device of its own
    (neither ``KIND_GPU`` nor an id from ``tritium.device_ids``)."""
    try:
        ids = device_parameters(parameter_strings(config)).ids
    except DeviceParameterError:
        ids = ()
    if kind != "GPU" and not ids:
        return None
    return visible_device_index(config, device_id)


def indexed_device(name: str, index: int | None) -> str:
    """An OpenVINO-style device name for the instance's device: a plain name other than
    the CPU gets the index (``GPU`` -> ``GPU.1``); a name with an index, a virtual device
    (``AUTO:GPU,CPU``) or no index at all leave it as written."""
    if index is None or not name.isalpha() or name.upper() == "CPU":
        return name
    return f"{name}.{index}"
