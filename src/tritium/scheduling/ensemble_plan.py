"""The data flow of an ensemble, checked once at load: which step consumes which tensor.

``build_plan`` reads an ensemble's configuration (Triton's JSON form) and the configs of
the models its steps name, and either returns an :class:`EnsemblePlan` or raises a
:class:`~tritium.config.ConfigError` whose message names the step and the tensor at fault:
an unknown model or tensor name, a tensor produced twice, a step input nothing produces,
an ensemble output nothing produces, a cycle, or a producer and consumer that disagree on
datatype or shape. No I/O, no asyncio: the plan is tested on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tritium.config.errors import ConfigError

#: Looks up a composing model's config by (name, version; "" = latest), None if unknown.
ConfigLookup = Callable[[str, str], "dict[str, Any] | None"]

ENSEMBLE_INPUT = -1  # the producer index of a tensor the client sends


@dataclass(frozen=True, slots=True)
class EnsembleStep:
    index: int
    model_name: str
    model_version: str  # "" for -1, the latest ready version at request time
    inputs: tuple[tuple[str, str], ...]  # (model input, ensemble tensor)
    outputs: tuple[tuple[str, str], ...]  # (model output, ensemble tensor)

    def describe(self) -> str:
        return f"step {self.index} (model '{self.model_name}')"


@dataclass(frozen=True, slots=True)
class _TensorType:
    datatype: str  # config enum name, e.g. "TYPE_FP32"
    shape: tuple[int, ...]  # full shape, -1 for a variable dim (batch dim included)


@dataclass(frozen=True, slots=True)
class EnsemblePlan:
    """A validated ensemble graph.

    ``waits[i]`` is how many distinct tensors step ``i`` needs that other steps make;
    ``consumers[t]`` the steps that read tensor ``t``; ``first_steps`` those that need only
    the client's inputs.
    """

    name: str
    steps: tuple[EnsembleStep, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    waits: tuple[int, ...]
    consumers: dict[str, tuple[int, ...]]
    first_steps: tuple[int, ...]


def _full_shape(tensor: dict[str, Any], max_batch_size: int) -> tuple[int, ...]:
    dims = tuple(int(d) for d in tensor.get("dims", ()))
    return (-1, *dims) if max_batch_size > 0 else dims


def _compatible(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return len(a) == len(b) and all(x == y or x == -1 or y == -1 for x, y in zip(a, b))


def _fmt(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def build_plan(config: dict[str, Any], lookup: ConfigLookup) -> EnsemblePlan:
    """Validate ``config``'s ``ensemble_scheduling`` and return its plan."""
    name = config["name"]
    where = f"in ensemble '{name}'"

    def fail(message: str) -> ConfigError:
        return ConfigError(f"{where}, {message}", phase="load")

    max_batch = int(config.get("max_batch_size", 0))
    ensemble_inputs = {t["name"]: t for t in config.get("input", ())}
    ensemble_outputs = {t["name"]: t for t in config.get("output", ())}

    # tensor -> (producer step index or ENSEMBLE_INPUT, its type, what produced it)
    produced: dict[str, tuple[int, _TensorType, str]] = {
        tname: (
            ENSEMBLE_INPUT,
            _TensorType(t["data_type"], _full_shape(t, max_batch)),
            f"ensemble input '{tname}'",
        )
        for tname, t in ensemble_inputs.items()
    }
    steps: list[EnsembleStep] = []
    step_configs: list[dict[str, Any]] = []
    raw_steps = (config.get("ensemble_scheduling") or {}).get("step", ())
    for index, raw in enumerate(raw_steps):
        model = str(raw.get("model_name", ""))
        version = int(raw.get("model_version", -1))
        label = f"step {index} (model '{model}')"
        if not model:
            raise fail(f"step {index} must specify 'model_name'")
        step_config = lookup(model, "" if version < 0 else str(version))
        if step_config is None:
            which = "" if version < 0 else f" version {version}"
            # Triton's words, with the step.
            raise ConfigError(
                f"ensemble {name} contains models that are not available or ambiguous: "
                f"{model}{which} (step {index})",
                phase="load",
            )
        step_mbs = int(step_config.get("max_batch_size", 0))
        if max_batch > 0 and step_mbs < max_batch:
            raise fail(
                f"{label}: the ensemble allows maximum batch size {max_batch}, but model "
                f"'{model}' only allows maximum batch size {step_mbs}"
            )
        model_inputs = {t["name"]: t for t in step_config.get("input", ())}
        model_outputs = {t["name"]: t for t in step_config.get("output", ())}
        input_map = dict(raw.get("input_map", {}))
        output_map = dict(raw.get("output_map", {}))
        for key in input_map:
            if key not in model_inputs:
                raise fail(f"{label}: input_map key '{key}' is not an input of model '{model}'")
        for key, t in model_inputs.items():
            if key not in input_map and not t.get("optional", False):
                raise fail(f"{label}: model input '{key}' is not mapped in input_map")
        for key, tensor in output_map.items():
            if key not in model_outputs:
                raise fail(f"{label}: output_map key '{key}' is not an output of model '{model}'")
            earlier = produced.get(tensor)
            if earlier is not None:
                # Triton's words, and what produced the tensor first.
                raise ConfigError(
                    f"ensemble tensor '{tensor}' can appear in an output map only once for "
                    f"ensemble '{name}' step {index} (already produced by {earlier[2]})",
                    phase="load",
                )
            spec = model_outputs[key]
            produced[tensor] = (
                index,
                _TensorType(spec["data_type"], _full_shape(spec, step_mbs)),
                f"{label} output '{key}'",
            )
        steps.append(
            EnsembleStep(
                index,
                model,
                "" if version < 0 else str(version),
                tuple(input_map.items()),
                tuple(output_map.items()),
            )
        )
        step_configs.append(step_config)

    consumers: dict[str, list[int]] = {}
    waits: list[int] = []
    for step, step_config in zip(steps, step_configs):
        step_mbs = int(step_config.get("max_batch_size", 0))
        model_inputs = {t["name"]: t for t in step_config.get("input", ())}
        needed: set[str] = set()
        for key, tensor in step.inputs:
            source = produced.get(tensor)
            if source is None:
                raise fail(
                    f"{step.describe()}: input '{key}' reads ensemble tensor '{tensor}', "
                    "which no step produces and is not an ensemble input"
                )
            spec = model_inputs[key]
            _check_types(
                fail,
                source,
                _TensorType(spec["data_type"], _full_shape(spec, step_mbs)),
                f"{step.describe()} input '{key}'",
                tensor,
            )
            consumers.setdefault(tensor, []).append(step.index)
            if source[0] != ENSEMBLE_INPUT:
                needed.add(tensor)
        waits.append(len(needed))

    for oname, spec in ensemble_outputs.items():
        source = produced.get(oname)
        if source is None:
            raise fail(f"ensemble output '{oname}' is not produced by any step")
        _check_types(
            fail,
            source,
            _TensorType(spec["data_type"], _full_shape(spec, max_batch)),
            f"ensemble output '{oname}'",
            oname,
        )

    _check_acyclic(fail, steps, produced)
    return EnsemblePlan(
        name=name,
        steps=tuple(steps),
        inputs=tuple(ensemble_inputs),
        outputs=tuple(ensemble_outputs),
        waits=tuple(waits),
        consumers={t: tuple(dict.fromkeys(c)) for t, c in consumers.items()},
        first_steps=tuple(i for i, w in enumerate(waits) if w == 0),
    )


def _check_types(
    fail: Callable[[str], ConfigError],
    source: tuple[int, _TensorType, str],
    wanted: _TensorType,
    consumer: str,
    tensor: str,
) -> None:
    # Triton's words ("inconsistent data type: X is inferred from ... while Y is inferred
    # from ..."), naming the producing and the consuming step instead of only their models.
    _, have, producer = source
    if have.datatype != wanted.datatype:
        raise fail(
            f"ensemble tensor '{tensor}': inconsistent data type: {have.datatype} is "
            f"inferred from {producer} while {wanted.datatype} is inferred from {consumer}"
        )
    if not _compatible(have.shape, wanted.shape):
        raise fail(
            f"ensemble tensor '{tensor}': inconsistent shape: {_fmt(have.shape)} is "
            f"inferred from {producer} while {_fmt(wanted.shape)} is inferred from {consumer}"
        )


def _check_acyclic(
    fail: Callable[[str], ConfigError],
    steps: list[EnsembleStep],
    produced: dict[str, tuple[int, _TensorType, str]],
) -> None:
    """Kahn's algorithm over steps; what is left is on (or behind) a cycle."""
    deps = [
        {produced[t][0] for _, t in s.inputs if produced[t][0] != ENSEMBLE_INPUT} for s in steps
    ]
    done: set[int] = set()
    progress = True
    while progress:
        progress = False
        for step in steps:
            if step.index not in done and deps[step.index] <= done:
                done.add(step.index)
                progress = True
    if len(done) == len(steps):
        return
    # Walk back from a stuck step until a step repeats: that loop is the cycle.
    path: list[int] = []
    current = next(s.index for s in steps if s.index not in done)
    while current not in path:
        path.append(current)
        current = min(d for d in deps[current] if d not in done)
    cycle = path[path.index(current) :]
    cycle.reverse()
    first = steps[cycle[0]]
    tensor = next(t for _, t in first.inputs if produced[t][0] == cycle[-1])
    names = " -> ".join(steps[i].describe() for i in (*cycle, cycle[0]))
    raise fail(f"steps form a cycle through ensemble tensor '{tensor}': {names}")
