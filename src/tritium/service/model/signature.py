"""A loaded model version's tensor signature and request validation against it.

Validation happens here, once, for both protocols, with Triton's messages (each names the
request, the tensor, the model, what was expected and what was received).
"""

from __future__ import annotations

from dataclasses import dataclass

from tritium.core import InferRequest, datatypes
from tritium.core.errors import InvalidArgument


@dataclass(frozen=True, slots=True)
class TensorSpec:
    name: str
    datatype: str  # wire name
    dims: tuple[int, ...]
    reshape: tuple[int, ...] | None = None
    optional: bool = False
    allow_ragged_batch: bool = False


_VALIDATED_LIMIT = 1024


def _request_tag(request: InferRequest) -> str:
    return f"[request id: {request.id or '<id_unknown>'}] "


def _fmt_shape(shape: tuple[int, ...] | list[int]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _shape_matches(shape: tuple[int, ...], dims: tuple[int, ...]) -> bool:
    if len(shape) != len(dims):
        return False
    for got, want in zip(shape, dims):
        if want != -1 and got != want:
            return False
    return True


_BATCH_NOTE = (
    "NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension "
    "to be prepended to each input shape. If you want to specify the full shape including the "
    "batch dim in your input dims config, try setting max_batch_size to zero. See the model "
    "configuration docs for more info on max_batch_size."
)


class ModelSignature:
    """Inputs/outputs of one model version and the checks a request must pass."""

    def __init__(
        self,
        model_name: str,
        max_batch_size: int,
        inputs: list[TensorSpec],
        outputs: list[TensorSpec],
    ) -> None:
        self.model_name = model_name
        self.max_batch_size = max_batch_size
        self.inputs = {t.name: t for t in inputs}
        self.outputs = {t.name: t for t in outputs}
        self.required = [t.name for t in inputs if not t.optional]
        self._has_reshape = any(t.reshape is not None for t in inputs)
        # layout key -> batch size of requests already found valid
        self._validated: dict[object, int] = {}

    def metadata_tensors(self, which: str) -> list[dict]:
        specs = self.inputs if which == "inputs" else self.outputs
        batch = [-1] if self.max_batch_size > 0 else []
        return [
            {"name": t.name, "datatype": t.datatype, "shape": batch + list(t.dims)}
            for t in specs.values()
        ]

    def validate(self, request: InferRequest) -> None:
        """Check and normalise ``request`` in place (batch size, reshape)."""
        key = request.layout_key
        if key is not None:
            batch_size = self._validated.get(key)
            if batch_size is not None:
                request.batch_size = batch_size
                if self._has_reshape:
                    self._reshape(request)
                return
        self._validate(request)
        if key is not None:
            if len(self._validated) >= _VALIDATED_LIMIT:
                self._validated.clear()
            self._validated[key] = request.batch_size

    def _reshape(self, request: InferRequest) -> None:
        batched = self.max_batch_size > 0
        for tensor in request.inputs:
            spec = self.inputs[tensor.name]
            if spec.reshape is not None:
                tensor.shape = (tensor.shape[0], *spec.reshape) if batched else spec.reshape
                tensor.data = tensor.data.reshape(tensor.shape)

    def _validate(self, request: InferRequest) -> None:
        model = self.model_name
        given = [t.name for t in request.inputs]
        names = set(given)
        missing = [n for n in self.required if n not in names]
        unknown = [n for n in given if n not in self.inputs]
        if missing or (unknown and len(given) != len(self.inputs)) or len(names) != len(given):
            if len(names) != len(given):
                dup = next(n for n in given if given.count(n) > 1)
                raise InvalidArgument(
                    f"{_request_tag(request)}input '{dup}' is specified more than once "
                    f"for model '{model}'"
                )
            got = ",".join(f"'{n}'" for n in reversed(given))
            need = ",".join(f"'{n}'" for n in missing)
            raise InvalidArgument(
                f"{_request_tag(request)}expected {len(self.required)} inputs but got "
                f"{len(given)} inputs for model '{model}'. Got input(s) [{got}], but missing "
                f"required input(s) [{need}]. Please provide all required input(s)."
            )
        batch_size = 0
        for tensor in request.inputs:
            spec = self.inputs.get(tensor.name)
            if spec is None:
                raise InvalidArgument(
                    f"{_request_tag(request)}unexpected inference input '{tensor.name}' "
                    f"for model '{model}'"
                )
            if tensor.datatype != spec.datatype:
                raise InvalidArgument(
                    f"{_request_tag(request)}inference input '{tensor.name}' data-type is "
                    f"'{tensor.datatype}', but model '{model}' expects '{spec.datatype}'"
                )
            shape = tensor.shape
            if self.max_batch_size > 0:
                if len(shape) == 0 or not _shape_matches(shape[1:], spec.dims):
                    raise InvalidArgument(
                        f"{_request_tag(request)}unexpected shape for input '{tensor.name}' "
                        f"for model '{model}'. Expected {_fmt_shape((-1, *spec.dims))}, got "
                        f"{_fmt_shape(shape)}. {_BATCH_NOTE}"
                    )
                rows = shape[0]
                if batch_size and rows != batch_size:
                    raise InvalidArgument(
                        f"{_request_tag(request)}inputs to model '{model}' must all have the "
                        f"same batch size: input '{tensor.name}' has batch size {rows}, "
                        f"expected {batch_size}"
                    )
                batch_size = rows
                if spec.reshape is not None:
                    tensor.shape = (rows, *spec.reshape)
                    tensor.data = tensor.data.reshape(tensor.shape)
            else:
                if not _shape_matches(shape, spec.dims):
                    raise InvalidArgument(
                        f"{_request_tag(request)}unexpected shape for input '{tensor.name}' "
                        f"for model '{model}'. Expected {_fmt_shape(spec.dims)}, got "
                        f"{_fmt_shape(shape)}. "
                    )
                if spec.reshape is not None:
                    tensor.shape = spec.reshape
                    tensor.data = tensor.data.reshape(tensor.shape)
        if self.max_batch_size > 0:
            if batch_size < 1 or batch_size > self.max_batch_size:
                raise InvalidArgument(
                    f"{_request_tag(request)}inference request batch-size must be <= "
                    f"{self.max_batch_size} for '{model}'"
                    if batch_size > self.max_batch_size
                    else f"{_request_tag(request)}inference request batch-size must be >= 1 "
                    f"for '{model}'"
                )
            request.batch_size = batch_size
        else:
            request.batch_size = 1
        if request.outputs is not None:
            seen: set[str] = set()
            for out in request.outputs:
                if out.name not in self.outputs:
                    # Triton words this one without the request-id prefix.
                    raise InvalidArgument(
                        f"unexpected inference output '{out.name}' for model '{model}'"
                    )
                if out.name in seen:
                    raise InvalidArgument(
                        f"{_request_tag(request)}output '{out.name}' is requested more than "
                        f"once for model '{model}'"
                    )
                seen.add(out.name)


def signature_from_config(config: dict) -> ModelSignature:
    """Build the signature from a model config in Triton's JSON form."""

    def spec(t: dict) -> TensorSpec:
        reshape = t.get("reshape")
        return TensorSpec(
            name=t["name"],
            datatype=datatypes.config_to_wire(t["data_type"]),
            dims=tuple(int(d) for d in t.get("dims", ())),
            reshape=tuple(int(d) for d in reshape["shape"]) if reshape else None,
            optional=bool(t.get("optional", False)),
            allow_ragged_batch=bool(t.get("allow_ragged_batch", False)),
        )

    return ModelSignature(
        config["name"],
        int(config.get("max_batch_size", 0)),
        [spec(t) for t in config.get("input", ())],
        [spec(t) for t in config.get("output", ())],
    )
