"""Parsing Direct Get requests (ADR-31) into one typed request or an ADR-31 status.

Two subjects reach a stream's responders: `$JS.API.DIRECT.GET.<stream>`
with a JSON body, and `$JS.API.DIRECT.GET.<stream>.<subject>` (last message
on that subject, the body empty). The rules for empty, malformed and
conflicting requests, and their 408 descriptions, are nats-server 2.15's.
Like nats-server, the subject-appended form accepts a body that only sets
options that do not select messages (`no_hdr`, `max_bytes`, and jetraft's
`min_last_seq`); any selecting field there is `408 Bad Request`.

`min_last_seq` is jetraft's read-your-writes extension: the responder must
have applied at least that sequence before answering.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cluster.api import jsjson
from storage.nats_time import parse_request_time

DIRECT_GET_PREFIX = "$JS.API.DIRECT.GET."
# tokens of "$JS.API.DIRECT.GET.<stream>" before any appended subject
_PREFIX_TOKENS = 5


@dataclass(frozen=True, slots=True)
class DirectGetRequest:
    """A valid request; zero / empty / None means "not set", as in nats-server's struct."""

    seq: int = 0
    last_by_subj: str = ""
    next_by_subj: str = ""
    batch: int = 0
    max_bytes: int = 0
    start_time_ns: int | None = None
    multi_last: tuple[str, ...] = ()
    up_to_seq: int = 0
    up_to_time_ns: int | None = None
    no_hdr: bool = False
    min_last_seq: int = 0

    @property
    def is_batch(self) -> bool:
        return self.batch > 0


@dataclass(frozen=True, slots=True)
class BadDirectGet:
    """A request answered with an ADR-31 status and nothing else."""

    status: int
    description: str


EMPTY_REQUEST = BadDirectGet(408, "Empty Request")
MALFORMED_REQUEST = BadDirectGet(408, "Malformed Request")
BAD_REQUEST = BadDirectGet(408, "Bad Request")


def split_direct_subject(subject: str) -> tuple[str, str | None]:
    """(stream, appended subject or None) for a `$JS.API.DIRECT.GET...` subject."""
    tokens = subject.split(".", _PREFIX_TOKENS)
    if len(tokens) < _PREFIX_TOKENS or not subject.startswith(DIRECT_GET_PREFIX):
        raise ValueError(f"not a Direct Get subject: {subject!r}")
    stream = tokens[4]
    appended = tokens[5] if len(tokens) > _PREFIX_TOKENS else None
    return stream, appended or None


def _time(obj: dict[str, Any], key: str) -> int | None:
    raw = obj.get(key)
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise jsjson.RequestJSONError(f"{key} must be an RFC 3339 string")
    try:
        return parse_request_time(raw)
    except ValueError as exc:
        raise jsjson.RequestJSONError(str(exc)) from None


def _decode(payload: bytes) -> DirectGetRequest:
    obj = jsjson.loads_object(payload)
    g = jsjson
    return DirectGetRequest(
        seq=g.get_int(obj, "seq", unsigned=True),
        last_by_subj=g.get_str(obj, "last_by_subj"),
        next_by_subj=g.get_str(obj, "next_by_subj"),
        batch=g.get_int(obj, "batch"),
        max_bytes=g.get_int(obj, "max_bytes"),
        start_time_ns=_time(obj, "start_time"),
        multi_last=tuple(g.get_str_list(obj, "multi_last")),
        up_to_seq=g.get_int(obj, "up_to_seq", unsigned=True),
        up_to_time_ns=_time(obj, "up_to_time"),
        no_hdr=g.get_bool(obj, "no_hdr"),
        min_last_seq=g.get_int(obj, "min_last_seq", unsigned=True),
    )


def _selects_messages(req: DirectGetRequest) -> bool:
    return bool(
        req.seq
        or req.last_by_subj
        or req.next_by_subj
        or req.multi_last
        or req.batch
        or req.start_time_ns is not None
        or req.up_to_seq
        or req.up_to_time_ns is not None
    )


def _conflicting(req: DirectGetRequest) -> bool:
    return bool(
        (req.seq and req.last_by_subj)
        or (req.seq and req.start_time_ns is not None)
        or (req.start_time_ns is not None and req.last_by_subj)
        or (req.last_by_subj and req.next_by_subj)
        or (req.last_by_subj and req.batch > 0)
        or (req.last_by_subj and req.multi_last)
        or (req.next_by_subj and req.multi_last)
        or (req.up_to_seq and req.up_to_time_ns is not None)
        # nats-server quietly answers nothing but an EOB for these; an error is clearer
        or req.batch < 0
        or req.max_bytes < 0
    )


def parse_direct_get(payload: bytes, appended_subject: str | None = None) -> DirectGetRequest | BadDirectGet:
    """The request, or the status to answer with; `appended_subject` is the subject-appended form's key."""
    if appended_subject is not None:
        if not payload:
            # the common form (a KV get): one object built, not a default one to copy options from
            return DirectGetRequest(last_by_subj=appended_subject)
        try:
            request = _decode(payload)
        except jsjson.RequestJSONError:
            return MALFORMED_REQUEST
        if _selects_messages(request):
            return BAD_REQUEST
        return DirectGetRequest(
            last_by_subj=appended_subject,
            max_bytes=request.max_bytes,
            no_hdr=request.no_hdr,
            min_last_seq=request.min_last_seq,
        )
    if not payload:
        return EMPTY_REQUEST
    try:
        request = _decode(payload)
    except jsjson.RequestJSONError:
        return MALFORMED_REQUEST
    if not (
        request.seq
        or request.last_by_subj
        or request.next_by_subj
        or request.multi_last
        or request.start_time_ns is not None
    ):
        return EMPTY_REQUEST
    if _conflicting(request):
        return BAD_REQUEST
    return request
