"""Triton's classification extension: an output replaced by its top-k classes.

A request names the outputs it wants classified and k for each (HTTP: the output parameter
``classification``; gRPC: ``classification`` in the requested output's parameters, which
``tritonclient`` sets from ``class_count``). Each class becomes the string
``"<value>:<index>"``, or ``"<value>:<index>:<label>"`` when the output has a
``label_filename`` with a non-empty label at that index; values are formatted as C++
``std::to_string`` does (``%f`` for floats, plain integers). A batching model
(``max_batch_size > 0``) is classified per batch entry and the result has shape
``[batch, k]``; otherwise ``[k]``. k is capped at the class count. The classified output
is a BYTES tensor, so both frontends encode it as any other.

Labels are read once, when the model loads (a label file that cannot be read fails the
load, as in Triton); requests never touch the file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tritium.core import datatypes
from tritium.core.errors import InvalidArgument, TritiumError, Unavailable
from tritium.core.types import InferResponse, OutputTensor

_SUPPORTED = frozenset(
    {"UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP32", "FP64"}
)

Labels = Sequence[bytes]


def top_k(
    datatype: str,
    array: np.ndarray,
    k: int,
    batched: bool,
    labels: Labels | None = None,
) -> tuple[list[int], list[bytes]]:
    """Return (shape, flat class strings) of the classification of ``array``."""
    if datatype not in _SUPPORTED:
        raise InvalidArgument(
            f"class result not available for output due to unsupported type '{datatype}'"
        )
    values = np.asarray(array, dtype=datatypes.numpy_dtype(datatype))
    batch = int(values.shape[0]) if batched and values.ndim > 0 else 0
    rows = values.reshape(batch, -1) if batch else values.reshape(1, -1)
    per_row = int(rows.shape[1]) if batch else int(values.size)
    count = min(k, per_row)
    is_float = datatype.startswith("FP")
    out: list[bytes] = []
    for row in rows:
        items = row.tolist()
        # Stable, descending: equal values keep index order.
        order = sorted(range(len(items)), key=items.__getitem__, reverse=True)[:count]
        for idx in order:
            v = items[idx]
            text = (f"{v:f}:{idx}" if is_float else f"{v}:{idx}").encode()
            if labels is not None and idx < len(labels) and labels[idx]:
                text += b":" + labels[idx]
            out.append(text)
    shape = [batch, count] if batch else [count]
    return shape, out


def read_labels(model_dir: Path, config: Mapping[str, Any]) -> dict[str, tuple[bytes, ...]]:
    """The labels of every output with a ``label_filename`` (a path relative to the model's
    folder), one label per line. Blocking: run it off the event loop."""
    labels: dict[str, tuple[bytes, ...]] = {}
    for output in config.get("output", ()):
        filename = output.get("label_filename")
        if not filename:
            continue
        path = model_dir / filename
        try:
            text = path.read_bytes()
        except OSError as exc:
            raise Unavailable(
                f"failed to load model '{config.get('name', '')}': cannot read the label file "
                f"'{filename}' of output '{output['name']}': {exc.strerror}"
            ) from None
        lines = text.split(b"\n")
        if lines and not lines[-1]:
            lines.pop()  # a final newline ends the last label, it does not start another
        labels[output["name"]] = tuple(lines)
    return labels


class OutputClassifier:
    """Classifies the outputs a request asked for; one per model version, made at load."""

    __slots__ = ("batched", "labels")

    def __init__(self, batched: bool, labels: Mapping[str, Labels]) -> None:
        self.batched = batched
        self.labels = labels

    def apply(self, response: InferResponse, wanted: Mapping[str, int]) -> None:
        """Replace each output named in ``wanted`` (name → k) by its top-k classes; a
        type that cannot be classified becomes the response's error."""
        try:
            outputs = response.outputs
            for i, out in enumerate(outputs):
                k = wanted.get(out.name)
                if k:
                    outputs[i] = self._classify(out, k)
        except TritiumError as exc:
            response.error = exc

    def _classify(self, out: OutputTensor, k: int) -> OutputTensor:
        shape, strings = top_k(
            out.datatype, out.data, k, self.batched, self.labels.get(out.name)
        )
        data = np.empty(len(strings), dtype=np.object_)
        data[:] = strings
        return OutputTensor(out.name, "BYTES", tuple(shape), data.reshape(shape))
