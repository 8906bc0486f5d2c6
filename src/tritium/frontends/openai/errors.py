"""OpenAI-shaped errors: ``{"error": {"message", "type", "param", "code"}}`` with the status
OpenAI's API gives the same mistake.

Handlers raise :class:`OpenAIError`; a core :class:`~tritium.core.errors.TritiumError`
from the service is mapped by :func:`from_tritium` through the one HTTP status table of
the HTTP frontend, so a status means the same on both ports.
"""

from __future__ import annotations

import orjson

from tritium.core.errors import NotFound, TritiumError
from tritium.frontends.http.messages import CONTENT_JSON, HttpResponse
from tritium.frontends.http.status import status_for

#: OpenAI's error types, by the status they come with.
INVALID_REQUEST = "invalid_request_error"
NOT_FOUND_ERROR = "not_found_error"
SERVER_ERROR = "server_error"
UNAVAILABLE_ERROR = "service_unavailable_error"


class OpenAIError(Exception):
    """An error answered as OpenAI's API answers it."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = INVALID_REQUEST,  # noqa: A002 - the field's name in OpenAI's schema
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def document(self) -> dict[str, object]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def response(self) -> HttpResponse:
        return HttpResponse(self.status, orjson.dumps(self.document()), CONTENT_JSON)


def bad_parameter(param: str, message: str) -> OpenAIError:
    """400 for a request field with a wrong type or value."""
    return OpenAIError(400, message, param=param, code="invalid_value")


def unknown_model(name: str) -> OpenAIError:
    return OpenAIError(
        404,
        f"The model `{name}` does not exist.",
        type=NOT_FOUND_ERROR,
        param="model",
        code="model_not_found",
    )


def from_tritium(error: TritiumError, model: str = "") -> OpenAIError:
    """The OpenAI error for a core error (its message is client-safe already)."""
    if isinstance(error, NotFound) and model:
        return unknown_model(model)
    status = status_for(error)
    if status >= 500:
        kind = UNAVAILABLE_ERROR if status == 503 else SERVER_ERROR
    elif status == 404:
        kind = NOT_FOUND_ERROR
    else:
        kind = INVALID_REQUEST
    return OpenAIError(status, error.message, type=kind, code=error.code.value.lower())


def internal_error(what: str) -> OpenAIError:
    return OpenAIError(500, f"internal error in {what}", type=SERVER_ERROR)
