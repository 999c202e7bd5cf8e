"""Answers to the JetStream API requests nats-server 2.15 serves and jetraft has nothing to do for.

STREAM.CANCEL_MOVE: nats-server answers it (checked on a 2.15.1 cluster), and leaving it unanswered
would make a client wait out its timeout; its answer here is exact, since no stream is ever being moved
by a placement change here.

Requests nats-server does not answer (unknown subjects, the system account's
SERVER.*, META.*, ACCOUNT.* and the removed STREAM.TEMPLATE.*) are not
answered here either.
"""

from __future__ import annotations

from cluster.api.errors import ApiError, JSErrors, plain_error
from cluster.api.subjects import ApiOp, ApiRequest

UNIMPLEMENTED_OPS = frozenset({ApiOp.STREAM_CANCEL_MOVE})


def unimplemented_answer(request: ApiRequest, payload: bytes, stream_exists: bool) -> bytes:
    """The response body for one of UNIMPLEMENTED_OPS: STREAM.CANCEL_MOVE, whose answer is exact (no stream
    is ever being moved here)."""
    error = JSErrors.STREAM_RECONFIGURE_NOT_IN_PROGRESS() if stream_exists else JSErrors.STREAM_NOT_FOUND()
    return error_body(request, error)


def error_body(request: ApiRequest, error: ApiError) -> bytes:
    return plain_error(request.response_type, error)
