"""Outputs declared with ``reshape``: the model produces the reshape shape, clients get the
shape of the config's ``dims``, as Triton answers.

For an output ``dims: [1] reshape: { shape: [] }`` of a batching model, the model returns
``[batch]`` and the client receives ``[batch, 1]``. Variable-size dimensions (-1) take
their values, in order, from the dimensions the model returned at the reshape's -1
positions. Built once per model version at load time; models without an output reshape
have no reshaper and pay nothing per request.
"""

from __future__ import annotations

from collections.abc import Iterable

from tritium.core.types import InferResponse
from tritium.service.model.signature import TensorSpec

WILDCARD = -1


class OutputReshaper:
    """Rewrites the shape of each reshaped output of a response to the config's dims."""

    __slots__ = ("_batched", "_rules")

    def __init__(self, batched: bool, rules: dict[str, tuple[tuple[int, ...], tuple[int, ...]]]):
        self._batched = batched
        self._rules = rules  # output name -> (reshape shape, dims)

    def client_shape(self, name: str, shape: tuple[int, ...]) -> tuple[int, ...] | None:
        """The shape the client sees for output ``name`` the model returned as ``shape``;
        None when the output is not reshaped or ``shape`` does not have the reshape's rank
        (the model already returned the config's dims, or broke its contract: either way
        the shape is left as the model gave it)."""
        rule = self._rules.get(name)
        if rule is None:
            return None
        reshape, dims = rule
        lead = shape[:1] if self._batched else ()
        rest = shape[1:] if self._batched else shape
        if (self._batched and not shape) or len(rest) != len(reshape):
            return None
        variable = iter([got for got, want in zip(rest, reshape) if want == WILDCARD])
        return (*lead, *(next(variable, WILDCARD) if d == WILDCARD else d for d in dims))

    def apply(self, response: InferResponse) -> None:
        """Give every reshaped output of ``response`` its client shape (a view, no copy)."""
        for out in response.outputs:
            shape = self.client_shape(out.name, tuple(out.shape))
            if shape is None or out.data is None:
                continue
            if out.data.size != _count(shape):
                continue  # not what the config declares: the frontend reports the mismatch
            out.shape = shape
            out.data = out.data.reshape(shape)


def _count(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def output_reshaper(batched: bool, outputs: Iterable[TensorSpec]) -> OutputReshaper | None:
    """The reshaper of a model's outputs, or None when no output declares a reshape."""
    rules = {o.name: (o.reshape, o.dims) for o in outputs if o.reshape is not None}
    return OutputReshaper(batched, rules) if rules else None
