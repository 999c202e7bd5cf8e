"""Answers to the JetStream API requests nats-server 2.15 serves and jetraft does not implement.

nats-server answers these (checked on a 2.15.1 cluster); leaving them
unanswered would make a client wait out its timeout. Each request is checked
as nats-server checks it (empty body, JSON, stream name, existence) and gets
nats-server's error for what is wrong; a well-formed one is refused with
JetStream's general stream error (10051) saying what jetraft lacks, except
CANCEL_MOVE, whose answer is exact: no stream is ever being moved here.

Requests nats-server does not answer (unknown subjects, the system account's
SERVER.*, META.*, ACCOUNT.* and the removed STREAM.TEMPLATE.*) are not
answered here either.
"""

from __future__ import annotations

from cluster.api import jsjson
from cluster.api.errors import ApiError, JSErrors, error_response, plain_error
from cluster.api.subjects import ApiOp, ApiRequest

UNIMPLEMENTED_OPS = frozenset(
    {ApiOp.STREAM_SNAPSHOT, ApiOp.STREAM_RESTORE, ApiOp.STREAM_CANCEL_MOVE}
)

_WHAT_IS_MISSING = {
    ApiOp.STREAM_SNAPSHOT: "stream snapshots are not supported by jetraft",
    ApiOp.STREAM_RESTORE: "stream restores are not supported by jetraft",
}


def unimplemented_answer(request: ApiRequest, payload: bytes, stream_exists: bool) -> bytes:
    """The response body for one of UNIMPLEMENTED_OPS."""
    try:
        _check(request, payload, stream_exists)
    except ApiError as error:
        return error_body(request, error)
    raise AssertionError("every unimplemented operation ends in an error")


def error_body(request: ApiRequest, error: ApiError) -> bytes:
    if request.op is ApiOp.STREAM_RESTORE:
        return error_response(request.response_type, error, deliver_subject="")
    return plain_error(request.response_type, error)


def _check(request: ApiRequest, payload: bytes, stream_exists: bool) -> None:
    op = request.op
    if op is ApiOp.STREAM_CANCEL_MOVE:
        if not stream_exists:
            raise JSErrors.STREAM_NOT_FOUND()
        raise JSErrors.STREAM_RECONFIGURE_NOT_IN_PROGRESS()
    if not payload.strip():
        raise JSErrors.BAD_REQUEST()
    if op is ApiOp.STREAM_SNAPSHOT and not stream_exists:
        raise JSErrors.STREAM_NOT_FOUND()  # nats-server looks the stream up before decoding
    try:
        body = jsjson.loads_object(payload)
    except jsjson.RequestJSONError as exc:
        raise JSErrors.INVALID_JSON(err=str(exc)) from None
    if op is ApiOp.STREAM_RESTORE:
        config = body.get("config")
        name = config.get("name") if isinstance(config, dict) else None
        if name and name != request.stream:
            raise JSErrors.STREAM_MISMATCH()
    raise JSErrors.STREAM_GENERAL(err=_WHAT_IS_MISSING[op])
