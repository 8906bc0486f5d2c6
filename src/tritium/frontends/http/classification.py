"""Triton's classification extension: an output replaced by its top-k classes.

Each class becomes the string ``"<value>:<index>"`` or ``"<value>:<index>:<label>"``,
values formatted as C++ ``std::to_string`` does (``%f`` for floats, plain integers).
A model with batching (``max_batch_size > 0``) is classified per batch entry and the
result has shape ``[batch, k]``; otherwise ``[k]``. k is capped at the class count.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tritium.core import datatypes
from tritium.core.errors import InvalidArgument

_SUPPORTED = frozenset(
    {"UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP32", "FP64"}
)


def top_k(
    datatype: str,
    array: np.ndarray,
    k: int,
    batched: bool,
    labels: Sequence[str] | None = None,
) -> tuple[list[int], list[str]]:
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
    out: list[str] = []
    for row in rows:
        items = row.tolist()
        # Stable, descending: equal values keep index order.
        order = sorted(range(len(items)), key=items.__getitem__, reverse=True)[:count]
        for idx in order:
            v = items[idx]
            text = f"{v:f}:{idx}" if is_float else f"{v}:{idx}"
            if labels is not None and idx < len(labels) and labels[idx]:
                text += ":" + labels[idx]
            out.append(text)
    shape = [batch, count] if batch else [count]
    return shape, out
