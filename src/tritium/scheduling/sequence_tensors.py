"""The tensors the sequence batcher adds to a request, and the implicit state it keeps.

Control inputs are shaped as Triton shapes them: ``[1]`` per request, ``[1, 1]`` when the
model batches (``max_batch_size > 0``). START, END and READY take the configured
``(false, true)`` pair in its own datatype (INT32, FP32 or BOOL); READY is always true
(every request the model sees is a real one). CORRID carries the sequence id converted to
its datatype (numeric ids wrap as a C cast does; a string id in a numeric CORRID reads as
0, a numeric id in a STRING CORRID as its decimal text).

Implicit state (``sequence_batching.state[]``) lives with the sequence: before each
request the state is added as the ``input_name`` input (the initial state on START), and
the model's ``output_name`` output becomes the next request's state. The client sees the
state output only when it asked for it by name (and the model configuration lists it).

Every array made here is read-only and shared between the requests that use it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tritium.core.datatypes import element_count, numpy_dtype, raw_dtype
from tritium.core.errors import InvalidArgument
from tritium.core.types import InferRequest, InferResponse, InputTensor, RequestedOutput
from tritium.scheduling.sequence_config import (
    CORRID,
    END,
    READY,
    START,
    SequenceConfig,
    StateSpec,
)

# numpy dtypes a numeric CORRID wraps into.
_CORRID_INTS = {"UINT64": np.uint64, "INT64": np.int64, "UINT32": np.uint32, "INT32": np.int32}

State = dict[str, np.ndarray]  # input name -> the next request's state


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def load_initial_states(config: dict[str, Any], model_dir: Path) -> dict[str, np.ndarray]:
    """Read every ``initial_state`` given as a ``data_file`` (from the model's
    ``initial_state/`` folder), keyed by state input name. Blocking: run it off the loop."""
    loaded: dict[str, np.ndarray] = {}
    for spec in SequenceConfig.from_config(config).states:
        if not spec.data_file:
            continue
        path = model_dir / "initial_state" / spec.data_file
        try:
            data = path.read_bytes()
        except OSError:
            raise InvalidArgument(
                f"failed to read initial state '{spec.initial_name}' of model "
                f"'{config.get('name', '')}': file '{spec.data_file}' not found in the model's "
                "'initial_state' folder"
            ) from None
        dims = spec.initial_dims or spec.dims
        if spec.datatype == "BYTES":
            raise InvalidArgument(
                f"initial state '{spec.initial_name}' of model '{config.get('name', '')}': "
                "a data_file of TYPE_STRING is not supported"
            )
        dtype = raw_dtype(spec.datatype)
        expected = element_count(dims) * dtype.itemsize
        if len(data) != expected:
            raise InvalidArgument(
                f"initial state '{spec.initial_name}' of model '{config.get('name', '')}': "
                f"file '{spec.data_file}' holds {len(data)} bytes, expected {expected}"
            )
        loaded[spec.input_name] = np.frombuffer(data, dtype).reshape(dims)
    return loaded


class SequenceTensors:
    """Adds control inputs and state to the requests of one model's sequences."""

    def __init__(
        self, config: SequenceConfig, initial_states: dict[str, np.ndarray] | None = None
    ) -> None:
        self._batching = config.batching
        shape = (1, 1) if config.batching else (1,)
        self._shape = shape
        # [start][end] -> the START, END and READY tensors for that combination.
        flags: list[list[list[InputTensor]]] = [[[], []], [[], []]]
        null: list[InputTensor] = []  # every boolean control false
        self._corrid: tuple[str, str] | None = None
        for spec in config.controls:
            if spec.kind == CORRID:
                self._corrid = (spec.name, spec.datatype)
                continue
            assert spec.false_true is not None
            dtype = numpy_dtype(spec.datatype)
            values = [
                InputTensor(spec.name, spec.datatype, shape, _frozen(np.full(shape, v, dtype)))
                for v in spec.false_true
            ]
            null.append(values[0])
            for start in (0, 1):
                for end in (0, 1):
                    if spec.kind == START:
                        flags[start][end].append(values[start])
                    elif spec.kind == END:
                        flags[start][end].append(values[end])
                    elif spec.kind == READY:
                        flags[start][end].append(values[1])
        self._flags = flags
        self._null_controls = null
        self._null_corrid: InputTensor | None = None
        self.states: tuple[StateSpec, ...] = config.states
        self._initial = {
            spec.input_name: self._initial_state(spec, (initial_states or {}).get(spec.input_name))
            for spec in config.states
        }
        self._state_outputs = frozenset(spec.output_name for spec in config.states)
        self._all_outputs = config.config_outputs

    @property
    def has_states(self) -> bool:
        return bool(self.states)

    def corrid_tensor(self, key: int | str) -> InputTensor | None:
        """The CORRID input of one sequence (made once per sequence), None without one."""
        if self._corrid is None:
            return None
        name, datatype = self._corrid
        if datatype == "BYTES":
            text = key if isinstance(key, str) else str(key)
            data = np.full(self._shape, text.encode(), dtype=object)
        else:
            value = key if isinstance(key, int) else 0
            bits = np.dtype(_CORRID_INTS[datatype]).itemsize * 8
            value &= (1 << bits) - 1
            data = np.array([value], dtype=np.uint64).astype(_CORRID_INTS[datatype])
            data = data.reshape(self._shape)
        return InputTensor(name, datatype, self._shape, _frozen(data))

    def add_inputs(
        self,
        request: InferRequest,
        start: bool,
        end: bool,
        corrid: InputTensor | None,
        state: State | None,
    ) -> None:
        """Append the control inputs (and state inputs) to ``request.inputs``."""
        inputs = request.inputs
        inputs.extend(self._flags[start][end])
        if corrid is not None:
            inputs.append(corrid)
        for spec in self.states:
            name = spec.input_name
            array = self._initial[name] if start or state is None else state.get(name)
            if array is None:
                array = self._initial[name]
            inputs.append(InputTensor(name, spec.datatype, array.shape, array))

    def null_request(self, template: InferRequest) -> InferRequest:
        """A request for an empty slot (Triton's null request): the template's inputs as
        zeros (taken before its control inputs are added), every control false, CORRID 0,
        the initial state. Its response is dropped."""
        inputs = [
            InputTensor(
                t.name,
                t.datatype,
                t.shape,
                np.full(t.shape, b"", object) if t.datatype == "BYTES" else np.zeros_like(t.data),
            )
            for t in template.inputs
        ]
        inputs.extend(self._null_controls)
        if self._corrid is not None:
            if self._null_corrid is None:
                self._null_corrid = self.corrid_tensor(0)
            inputs.append(self._null_corrid)  # type: ignore[arg-type]
        for spec in self.states:
            array = self._initial[spec.input_name]
            inputs.append(InputTensor(spec.input_name, spec.datatype, array.shape, array))
        null = InferRequest(template.model_name, template.model_version, "", inputs)
        null.batch_size = 0  # not an inference: Triton's inference_count leaves it out
        return null

    def request_state_outputs(self, request: InferRequest) -> frozenset[str]:
        """Make the model return every state output for ``request``; the names the
        client did not ask for, to take out of its response."""
        wanted = request.outputs
        if wanted is None:
            names = set(self._all_outputs)
            request.outputs = [RequestedOutput(n) for n in self._all_outputs]
        else:
            names = {o.name for o in wanted}
        hidden = self._state_outputs - names
        for name in hidden:
            request.outputs.append(RequestedOutput(name))  # type: ignore[union-attr]
        return frozenset(hidden)

    def take_state(
        self, response: InferResponse, hidden: frozenset[str], previous: State | None
    ) -> State | None:
        """The state the model returned (kept as it was where it returned none); the
        outputs in ``hidden`` are taken out of the response."""
        if response.error is not None:
            return previous
        state: State = dict(previous) if previous else {}
        for spec in self.states:
            for output in response.outputs:
                if output.name == spec.output_name:
                    state[spec.input_name] = output.data
                    break
        if hidden:
            response.outputs = [o for o in response.outputs if o.name not in hidden]
        return state

    def _initial_state(self, spec: StateSpec, loaded: np.ndarray | None) -> np.ndarray:
        if loaded is not None:
            array = loaded
        else:  # zero_data, or no initial_state at all
            dims = [d if d >= 0 else 1 for d in (spec.initial_dims or spec.dims)]
            if spec.datatype == "BYTES":
                array = np.full(dims, b"", dtype=object)
            else:
                array = np.zeros(dims, numpy_dtype(spec.datatype))
        if self._batching:
            array = array.reshape((1, *array.shape))
        return _frozen(np.array(array))
