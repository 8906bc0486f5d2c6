"""Warm-up (``model_warmup`` in the config): run each sample on every instance before the
version takes traffic.

A sample names its inputs with ``zero_data``, ``random_data`` or ``input_data_file`` (a file
under the model's ``warmup/`` folder, read as raw row-major bytes; BYTES elements carry
their 4-byte length) and runs ``count`` times (at least once) as one batch of
``batch_size`` requests (at least one). A sample that fails, or a response that carries an
error, fails the version with the reason.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tritium.core import InferRequest, InputTensor
from tritium.core import datatypes as dt
from tritium.core.errors import InvalidArgument, TritiumError, Unavailable
from tritium.service.model.version import LoadedVersion

WARMUP_FOLDER = "warmup"


@dataclass(frozen=True, slots=True)
class WarmupSample:
    name: str
    batch_size: int
    count: int
    inputs: tuple[tuple[str, str, tuple[int, ...], np.ndarray], ...]

    def requests(self, model: str, version: str) -> list[InferRequest]:
        return [
            InferRequest(
                model,
                version,
                f"warmup-{self.name}",
                [InputTensor(n, d, shape, data) for n, d, shape, data in self.inputs],
            )
            for _ in range(self.batch_size)
        ]


def build_samples(config: dict[str, Any], model_dir: Path) -> list[WarmupSample]:
    """The config's warm-up samples with their input data (blocking: reads files)."""
    batching = int(config.get("max_batch_size", 0) or 0) > 0
    samples = []
    for sample in config.get("model_warmup") or ():
        name = str(sample.get("name", ""))
        inputs = []
        for input_name, spec in (sample.get("inputs") or {}).items():
            datatype = dt.config_to_wire(str(spec.get("data_type", "")))
            if not dt.is_valid(datatype):
                raise InvalidArgument(
                    f"warmup sample '{name}': input '{input_name}' has an invalid data type"
                )
            dims = tuple(int(d) for d in spec.get("dims", ()))
            if any(d < 0 for d in dims):
                raise InvalidArgument(
                    f"warmup sample '{name}': input '{input_name}' must have fixed dims"
                )
            shape = (1, *dims) if batching else dims
            data = _input_data(name, input_name, spec, datatype, shape, model_dir)
            inputs.append((input_name, datatype, shape, data))
        samples.append(
            WarmupSample(
                name,
                max(int(sample.get("batch_size", 1) or 1), 1),
                max(int(sample.get("count", 0) or 0), 1),
                tuple(inputs),
            )
        )
    return samples


def _input_data(
    sample: str,
    name: str,
    spec: dict[str, Any],
    datatype: str,
    shape: tuple[int, ...],
    model_dir: Path,
) -> np.ndarray:
    count = dt.element_count(shape)
    if "input_data_file" in spec:
        raw = _read_warmup_file(sample, name, str(spec["input_data_file"]), model_dir)
        try:
            return dt.tensor_from_bytes(name, "", datatype, shape, count, raw).copy()
        except TritiumError as exc:
            raise InvalidArgument(f"warmup sample '{sample}': {exc.message}") from None
    random = bool(spec.get("random_data"))
    if datatype == "BYTES":
        out = np.empty(count, dtype=np.object_)
        rng = np.random.default_rng()
        for i in range(count):
            out[i] = bytes(rng.integers(97, 123, 8, dtype=np.uint8)) if random else b""
        return out.reshape(shape)
    dtype = dt.raw_dtype(datatype)
    if random and datatype != "BOOL":
        return np.random.default_rng().integers(0, 100, shape).astype(dtype)
    return np.zeros(shape, dtype)


def _read_warmup_file(sample: str, name: str, relative: str, model_dir: Path) -> bytes:
    """A file of the model's ``warmup/`` folder; paths (or links) that leave it are refused."""
    folder = (model_dir / WARMUP_FOLDER).resolve()
    path = (folder / relative).resolve()
    if "\0" in relative or not path.is_relative_to(folder):
        raise InvalidArgument(
            f"warmup sample '{sample}': input_data_file of input '{name}' must stay within "
            f"the model's '{WARMUP_FOLDER}' folder"
        )
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InvalidArgument(
            f"warmup sample '{sample}': cannot read input_data_file '{relative}' of input "
            f"'{name}': {exc.strerror or type(exc).__name__}"
        ) from None


async def warm_up(loaded: LoadedVersion, model_dir: Path, timeout: float) -> None:
    """Run every sample on every instance of ``loaded``; raises Unavailable with the reason
    when one fails."""
    if not loaded.config.get("model_warmup"):
        return
    loop = asyncio.get_running_loop()
    try:
        samples = await loop.run_in_executor(None, build_samples, loaded.config, model_dir)
    except TritiumError as exc:
        raise Unavailable(f"failed to warm up model '{loaded.name}': {exc.message}") from None
    for instance in loaded.instances:
        for sample in samples:
            for _ in range(sample.count):
                batch = sample.requests(loaded.name, loaded.version_str)
                try:
                    responses = await asyncio.wait_for(_run(instance.submit(batch)), timeout)
                except asyncio.TimeoutError:
                    raise Unavailable(
                        f"warmup sample '{sample.name}' of model '{loaded.name}' did not "
                        f"finish within {timeout:g} s"
                    ) from None
                except TritiumError as exc:
                    raise Unavailable(
                        f"failed to run warmup sample '{sample.name}' of model "
                        f"'{loaded.name}': {exc.message}"
                    ) from None
                for response in responses:
                    if response.error is not None:
                        raise Unavailable(
                            f"failed to run warmup sample '{sample.name}' of model "
                            f"'{loaded.name}': {response.error.message}"
                        )


async def _run(done: Any) -> Any:
    return await done
