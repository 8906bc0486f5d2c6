"""What the backends that run a model graph (onnxruntime, openvino) share: a batch of
requests run as one inference, hosted by the worker exactly like a ``TritonPythonModel``.

Requests of a batch with the same inputs and item shapes are joined along the batch
dimension for one run and the outputs split back per request; ``reshape`` is applied
both ways; BYTES elements reach the runtime as text. A backend subclasses
:class:`GraphModel`, sets up its runtime in ``initialize`` (then calls
:meth:`GraphModel._setup`) and implements :meth:`GraphModel._run`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tritium.backends.python.pb_utils_errors import TritonError
from tritium.backends.python.pb_utils_messages import InferenceResponse
from tritium.backends.python.pb_utils_tensor import Tensor
from tritium.core.datatypes import config_to_wire

_new_tensor = Tensor._from_buffer


class GraphModel:
    """A ``TritonPythonModel`` made of a model graph (see module docstring)."""

    #: Prefix of a run's error text, naming the runtime ("onnxruntime: ...").
    runtime_name = "runtime"

    def _setup(self, config: dict[str, Any]) -> None:
        """Read what running and splitting batches needs from the completed ``config``."""
        self.batching = int(config.get("max_batch_size", 0)) > 0
        self.outputs = [o["name"] for o in config.get("output", ())]
        self.inputs = [i["name"] for i in config.get("input", ())]
        self.wire = {
            io["name"]: config_to_wire(io.get("data_type", "TYPE_FP32"))
            for io in (*config.get("input", ()), *config.get("output", ()))
        }
        # Implicit state: the sequence batcher feeds the state input and asks for the state
        # output by name, neither of them in the configuration's inputs and outputs.
        for state in (config.get("sequence_batching") or {}).get("state") or ():
            wire = config_to_wire(state.get("data_type", "TYPE_FP32"))
            self.wire.setdefault(state["input_name"], wire)
            self.wire.setdefault(state["output_name"], wire)
            if state["output_name"] not in self.outputs:
                self.outputs.append(state["output_name"])
        self.input_reshape = _reshapes(config.get("input", ()), "model")
        self.output_reshape = _reshapes(config.get("output", ()), "config")
        self.strings = {name for name, wire in self.wire.items() if wire == "BYTES"}

    def _run(self, feeds: dict[str, Any], names: list[str]) -> list[Any]:
        """Run the graph on ``feeds`` (name -> array in the model's shape); the arrays of
        outputs ``names``, in that order."""
        raise NotImplementedError

    def execute(self, requests: list[Any]) -> list[InferenceResponse]:
        if len(requests) == 1:
            return [self._run_requests(requests, False)[0]]
        if self.batching:
            if _uniform(requests):
                return self._run_requests(requests, True)
        return [self._run_requests([r], False)[0] for r in requests]

    # -- running ------------------------------------------------------------------------

    def _run_requests(self, requests: list[Any], joined: bool) -> list[InferenceResponse]:
        wanted: set[str] = set()
        for request in requests:
            wanted |= request._requested_output_names
        names = [n for n in self.outputs if n in wanted]
        try:
            feeds, sizes = self._feeds(requests, joined)
            results = self._run(feeds, names)
        except Exception as exc:  # noqa: BLE001 - the runtime's own exception types
            error = self._run_error(exc)
            return [InferenceResponse(error=error) for _ in requests]
        if not joined:
            return [InferenceResponse(self._tensors(names, results, None))]
        responses = []
        start = 0
        for request, size in zip(requests, sizes):
            part = slice(start, start + size)
            start += size
            want = request._requested_output_names
            tensors = self._tensors(names, results, part)
            responses.append(InferenceResponse([t for t in tensors if t._name in want]))
        return responses

    def _feeds(self, requests: list[Any], joined: bool) -> tuple[dict[str, Any], list[int]]:
        if not joined:
            feeds = {t._name: self._model_array(t._name, t._array) for t in requests[0]._inputs}
            return feeds, []
        sizes = [r._inputs[0]._array.shape[0] for r in requests]
        columns: dict[str, list[Any]] = {}
        for request in requests:
            for tensor in request._inputs:
                columns.setdefault(tensor._name, []).append(tensor._array)
        feeds = {
            name: self._model_array(name, np.concatenate(arrays))
            for name, arrays in columns.items()
        }
        return feeds, sizes

    def _run_error(self, exc: Exception) -> TritonError:
        """The error every request of a failed run answers with."""
        return TritonError(f"{self.runtime_name}: {exc}")

    def _model_shape(self, name: str, array: Any) -> Any:
        """Input ``name`` in the shape the model takes (its ``reshape``, if any)."""
        shape = self.input_reshape.get(name)
        if shape is not None:
            lead = array.shape[:1] if self.batching else ()
            array = array.reshape(lead + shape)
        return array

    def _config_shape(self, name: str, array: Any) -> Any:
        """Output ``name`` in the shape of the configuration's ``dims`` (when it has a
        ``reshape`` that leaves at most one dimension open)."""
        shape = self.output_reshape.get(name)
        if shape is not None and shape.count(-1) <= 1:
            lead = array.shape[:1] if self.batching else ()
            array = array.reshape(lead + shape)
        return array

    def _model_array(self, name: str, array: Any) -> Any:
        array = self._model_shape(name, array)
        if name in self.strings:
            # The runtimes' strings are text: Triton's BYTES elements are taken as UTF-8.
            flat = [b.decode("utf-8") if isinstance(b, bytes) else str(b) for b in array.ravel()]
            array = np.array(flat, dtype=object).reshape(array.shape)
        return array

    def _tensors(self, names: list[str], results: list[Any], part: slice | None) -> list[Tensor]:
        tensors = []
        for name, array in zip(names, results):
            if part is not None:
                array = array[part]
            wire = self.wire[name]
            if wire == "BYTES":
                array = np.array(
                    [s.encode("utf-8") if isinstance(s, str) else bytes(s) for s in array.ravel()],
                    dtype=object,
                ).reshape(array.shape)
            array = self._config_shape(name, array)
            tensors.append(_new_tensor(name, np.ascontiguousarray(array), wire))
        return tensors


def _reshapes(ios: Any, side: str) -> dict[str, tuple[int, ...]]:
    """Tensors the model sees in another shape (``reshape``), by name: to the model's
    shape (``side`` "model", for inputs) or to the configuration's ``dims`` ("config",
    for outputs)."""
    found: dict[str, tuple[int, ...]] = {}
    for io in ios:
        if "reshape" in io:
            dims = io["reshape"].get("shape", ()) if side == "model" else io.get("dims", ())
            found[io["name"]] = tuple(int(d) for d in dims)
    return found


def _uniform(requests: list[Any]) -> bool:
    """Whether the requests can be joined along the batch dimension: the same inputs,
    in the same order, with the same shape after the batch dimension."""
    first = requests[0]._inputs
    names = [t._name for t in first]
    tails = [t._array.shape[1:] for t in first]
    for request in requests[1:]:
        inputs = request._inputs
        if len(inputs) != len(names):
            return False
        for tensor, name, tail in zip(inputs, names, tails):
            if tensor._name != name or tensor._array.shape[1:] != tail:
                return False
    return bool(names)
