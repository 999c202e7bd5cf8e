"""STREAM.MSG.GET: the coherent (leader-only) read, request and JSON response as nats-server's.

The leader answers only after confirming its leadership (ReadIndex); that is
the caller's part. Here: parse the request with nats-server's rules, read
the store, and build `stream_msg_get_response`, with the stored headers and
payload base64-encoded and the time in RFC 3339.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import structlog

from cluster.api import jsjson
from cluster.api.errors import ApiError, JSErrors, error_response
from cluster.api.response_types import MSG_GET_TYPE
from storage.errors import CorruptStoreError, InvalidSubjectError, MsgNotFoundError
from storage.interface import StreamStore
from storage.model import StoredMsg
from storage.nats_time import format_optional_ts, parse_request_time

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class MsgGetRequest:
    seq: int = 0
    last_by_subj: str = ""
    next_by_subj: str = ""
    start_time_ns: int | None = None
    no_hdr: bool = False


def parse_msg_get(payload: bytes) -> MsgGetRequest:
    """The request, or ApiError: empty body or conflicting fields 10003, bad JSON 10025."""
    if not payload.strip():
        raise JSErrors.BAD_REQUEST()
    try:
        obj = jsjson.loads_request(payload, "JSApiMsgGetRequest")
        start_raw = obj.get("start_time")
        start_ns = None
        if start_raw is not None:
            if not isinstance(start_raw, str):
                raise jsjson.RequestJSONError("start_time must be an RFC 3339 string")
            start_ns = parse_request_time(start_raw)
        request = MsgGetRequest(
            seq=jsjson.get_int(obj, "seq", unsigned=True),
            last_by_subj=jsjson.get_str(obj, "last_by_subj"),
            next_by_subj=jsjson.get_str(obj, "next_by_subj"),
            start_time_ns=start_ns,
            no_hdr=jsjson.get_bool(obj, "no_hdr"),
        )
        batch = jsjson.get_int(obj, "batch")
        max_bytes = jsjson.get_int(obj, "max_bytes")
        multi_last = jsjson.get_str_list(obj, "multi_last")
        # Direct Get's batch bounds: known, and without a batch meaningless here (nats-server too)
        jsjson.get_int(obj, "up_to_seq", unsigned=True)
        obj.get("up_to_time")
        jsjson.reject_unknown(obj)
    except (jsjson.RequestJSONError, ValueError) as exc:
        raise JSErrors.INVALID_JSON(err=str(exc)) from None
    # this API has no batches (those are Direct Get's)
    if batch > 0 or max_bytes > 0 or multi_last:
        raise JSErrors.BAD_REQUEST()
    r = request
    if (
        (r.seq and r.last_by_subj)
        or (not r.seq and not r.last_by_subj and not r.next_by_subj and r.start_time_ns is None)
        or (r.seq and r.start_time_ns is not None)
        or (r.start_time_ns is not None and r.last_by_subj)
        or (r.last_by_subj and r.next_by_subj)
    ):
        raise JSErrors.BAD_REQUEST()
    return request


def load_for_msg_get(request: MsgGetRequest, store: StreamStore) -> StoredMsg:
    """The message the request names; ApiError 10037 when there is none (a subject that is not a valid
    filter names none: nats-server answers `$O.bucket.M.`, an object store's `get("")`, so)."""
    seq = request.seq
    if request.start_time_ns is not None:
        seq = store.get_seq_from_time(max(request.start_time_ns, 0))
    try:
        if request.next_by_subj:
            return store.load_next_msg(request.next_by_subj, seq)
        if seq > 0:
            return store.load_msg(seq)
        return store.load_last_msg(request.last_by_subj)
    except (MsgNotFoundError, InvalidSubjectError):
        raise JSErrors.NO_MESSAGE_FOUND() from None
    except CorruptStoreError as exc:
        # never the damaged bytes; nats-server folds every load error into "no message found"
        log.error("stored_message_damaged", error=str(exc))
        raise JSErrors.NO_MESSAGE_FOUND() from None


def msg_get_response(msg: StoredMsg, no_hdr: bool = False) -> bytes:
    message: dict[str, Any] = {"subject": msg.subject, "seq": msg.seq}
    if msg.headers and not no_hdr:
        message["hdrs"] = base64.b64encode(msg.headers).decode()
    if msg.payload:
        message["data"] = base64.b64encode(msg.payload).decode()
    message["time"] = format_optional_ts(msg.ts_ns)
    return jsjson.dumps({"type": MSG_GET_TYPE, "message": message})


def msg_get_error(error: ApiError) -> bytes:
    return error_response(MSG_GET_TYPE, error)


def answer_msg_get(payload: bytes, store: StreamStore) -> bytes:
    """The whole STREAM.MSG.GET exchange against a store: request bytes in, response bytes out."""
    try:
        request = parse_msg_get(payload)
        msg = load_for_msg_get(request, store)
    except ApiError as error:
        return msg_get_error(error)
    return msg_get_response(msg, request.no_hdr)
