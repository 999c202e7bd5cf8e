"""The API's errors, with the messages and status codes the real Toxiproxy answers.

Every failure the HTTP layer reports is an `ApiError`; anything else that
escapes a handler is answered as a 500 with its message, as Toxiproxy does.
"""

from __future__ import annotations


class ApiError(Exception):
    """An error with the HTTP status Toxiproxy answers it with; the body is `{"error", "status"}`."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    def wrapping(self, detail: str) -> ApiError:
        """This error with a detail appended, the way Toxiproxy joins `bad request body: <cause>`."""
        return ApiError(f"{self.message}: {detail}", self.status)

    def to_json(self) -> dict[str, object]:
        return {"error": self.message, "status": self.status}


BAD_REQUEST_BODY = ApiError("bad request body", 400)
MISSING_FIELD = ApiError("missing required field", 400)
PROXY_NOT_FOUND = ApiError("proxy not found", 404)
PROXY_ALREADY_EXISTS = ApiError("proxy already exists", 409)
INVALID_STREAM = ApiError("stream was invalid, can be either upstream or downstream", 400)
INVALID_TOXIC_TYPE = ApiError("invalid toxic type", 400)
TOXIC_ALREADY_EXISTS = ApiError("toxic already exists", 409)
TOXIC_NOT_FOUND = ApiError("toxic not found", 404)


def internal_error(message: str) -> ApiError:
    """A failure Toxiproxy has no named error for (a port already in use, an unresolvable address)."""
    return ApiError(message, 500)
