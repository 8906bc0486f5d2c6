"""Which requests may share a batch: Triton's "required equal inputs" rule.

A batch is concatenated along its first dimension, so every input whose non-batch dims
may vary (a ``-1`` in ``dims``, not ``allow_ragged_batch``) must have the same
``shape[1:]`` as in the batch's first request. When the model has optional inputs,
requests must also carry the same set of inputs. Models with neither need no check.
"""

from __future__ import annotations

from tritium.core import InferRequest


class InputMatcher:
    def __init__(self, equal_shape_inputs: frozenset[str], has_optional_inputs: bool) -> None:
        self._equal_shape = equal_shape_inputs
        self._optional = has_optional_inputs
        self.enabled = bool(equal_shape_inputs) or has_optional_inputs
        # Input name -> the non-batch dims it must have, or None for "present, any shape".
        self._want: dict[str, tuple[int, ...] | None] = {}
        self._count = 0

    def reset(self, first: InferRequest) -> None:
        """Start a new batch whose first request is ``first``."""
        want: dict[str, tuple[int, ...] | None] = {}
        for tensor in first.inputs:
            if tensor.name in self._equal_shape:
                want[tensor.name] = tuple(tensor.shape[1:])
            elif self._optional:
                want[tensor.name] = None
        self._want = want
        self._count = len(first.inputs)

    def matches(self, request: InferRequest) -> bool:
        want = self._want
        optional = self._optional
        if optional and len(request.inputs) != self._count:
            return False
        for tensor in request.inputs:
            if tensor.name in want:
                dims = want[tensor.name]
                if dims is not None and tuple(tensor.shape[1:]) != dims:
                    return False
            elif optional:
                return False
        return True
