"""A stand-in for NVIDIA's ``pynvml`` (nvidia-ml-py) on machines without a GPU: the same
function names, units and error class, answering from ``DEVICES``. Tests put this folder
on the path of a server (or load the file) to exercise the GPU gauges; only the hardware
library is replaced, tritium's own code runs unchanged."""

from __future__ import annotations

from types import SimpleNamespace


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):  # noqa: N801 (pynvml's name)
    pass


# One dict per GPU; a value of None makes that call raise NVMLError_NotSupported.
DEVICES: list[dict[str, object]] = [
    {
        "uuid": "GPU-11111111-2222-3333-4444-555555555555",
        "util": 37,  # percent
        "total": 80 * 2**30,
        "used": 2**30,
        "power_mw": 123_456,
        "limit_mw": 700_000,
        "energy_mj": 1_000_000,
        "energy_step_mj": 5_000,  # added at every read, as the GPU keeps drawing power
    },
    {
        "uuid": "GPU-66666666-7777-8888-9999-000000000000",
        "util": 0,
        "total": 16 * 2**30,
        "used": 0,
        "power_mw": None,
        "limit_mw": 250_000,
        "energy_mj": None,
        "energy_step_mj": 0,
    },
]
INIT_ERROR: str | None = None  # set to make nvmlInit fail (no driver)
calls = {"init": 0, "shutdown": 0}


def _value(handle: int, key: str) -> object:
    value = DEVICES[handle][key]
    if value is None:
        raise NVMLError_NotSupported("Not Supported")
    return value


def nvmlInit() -> None:  # noqa: N802 (pynvml's names below)
    if INIT_ERROR is not None:
        raise NVMLError(INIT_ERROR)
    calls["init"] += 1


def nvmlShutdown() -> None:  # noqa: N802
    calls["shutdown"] += 1


def nvmlDeviceGetCount() -> int:  # noqa: N802
    return len(DEVICES)


def nvmlDeviceGetHandleByIndex(index: int) -> int:  # noqa: N802
    return index


def nvmlDeviceGetUUID(handle: int) -> str:  # noqa: N802
    return str(_value(handle, "uuid"))


def nvmlDeviceGetUtilizationRates(handle: int) -> SimpleNamespace:  # noqa: N802
    return SimpleNamespace(gpu=_value(handle, "util"), memory=0)


def nvmlDeviceGetMemoryInfo(handle: int) -> SimpleNamespace:  # noqa: N802
    total, used = _value(handle, "total"), _value(handle, "used")
    return SimpleNamespace(total=total, used=used, free=total - used)  # type: ignore[operator]


def nvmlDeviceGetPowerUsage(handle: int) -> int:  # noqa: N802
    return int(_value(handle, "power_mw"))  # type: ignore[call-overload]


def nvmlDeviceGetEnforcedPowerLimit(handle: int) -> int:  # noqa: N802
    return int(_value(handle, "limit_mw"))  # type: ignore[call-overload]


def nvmlDeviceGetTotalEnergyConsumption(handle: int) -> int:  # noqa: N802
    energy = int(_value(handle, "energy_mj"))  # type: ignore[call-overload]
    DEVICES[handle]["energy_mj"] = energy + int(DEVICES[handle]["energy_step_mj"])  # type: ignore[call-overload]
    return energy
