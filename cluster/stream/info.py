"""JSON of the stream-management API responses, as nats-server 2.15 writes them.

STREAM.CREATE / UPDATE / INFO / LIST / NAMES / PURGE / DELETE,
STREAM.MSG.DELETE, LEADER.STEPDOWN and account INFO: field order, omissions
and paging as in the traces. The request parsers for INFO / NAMES / LIST /
PURGE / MSG.DELETE are here too, returning the replicated entry or ApiError.
Builders take plain values; gathering them (store state, Raft progress) is
the caller's job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cluster.api import jsjson
from cluster.api.errors import ApiError, JSErrors, error_response
from cluster.api.response_types import (
    ACCOUNT_INFO_TYPE,
    LEADER_STEPDOWN_TYPE,
    MSG_DELETE_TYPE,
    STREAM_CREATE_TYPE,
    STREAM_DELETE_TYPE,
    STREAM_INFO_TYPE,
    STREAM_LIST_TYPE,
    STREAM_NAMES_TYPE,
    STREAM_PURGE_TYPE,
    STREAM_UPDATE_TYPE,
)
from cluster.runtime.account_limits import UNLIMITED, JetStreamAccountLimits
from cluster.stream.config import StreamConfig, StreamSource, SubjectTransformConfig
from cluster.stream.config_check import subjects_match_stream
from cluster.stream.entries import DeleteMsg, Purge
from storage.model import StreamState
from storage.nats_time import format_optional_ts

NAMES_LIMIT = 1024
LIST_LIMIT = 256
SUBJECT_DETAILS_LIMIT = 100_000
API_LEVEL = 5


@dataclass(frozen=True, slots=True)
class PeerInfo:
    """A replica other than the leader, as STREAM.INFO's `cluster.replicas` shows it."""

    name: str
    current: bool
    active_ns: int
    lag: int = 0
    offline: bool = False
    peer: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "current": self.current}
        if self.offline:
            out["offline"] = True
        out["active"] = self.active_ns
        if self.lag:
            out["lag"] = self.lag
        out["peer"] = self.peer or self.name
        return out


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    leader: str = ""
    name: str = ""
    raft_group: str = ""
    leader_since_ns: int | None = None
    # nats-server names the account its Raft traffic travels in (its system account); jetraft's goes
    # over the gRPC cluster port, which plays that part: reported as nats-server's default
    traffic_account: str = ""
    replicas: tuple[PeerInfo, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.name:
            out["name"] = self.name
        if self.raft_group:
            out["raft_group"] = self.raft_group
        if self.leader:
            out["leader"] = self.leader
        if self.leader_since_ns is not None:
            out["leader_since"] = format_optional_ts(self.leader_since_ns)
        if self.traffic_account:
            out["system_account"] = True
            out["traffic_account"] = self.traffic_account
        if self.replicas:
            out["replicas"] = [r.to_json() for r in self.replicas]
        return out


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """A mirror's or source's progress: `lag` messages behind, last active `active_ns` ago (-1: never)."""

    name: str
    lag: int = 0
    active_ns: int = -1
    error: ApiError | None = None
    filter_subject: str = ""
    subject_transforms: tuple[SubjectTransformConfig, ...] = ()
    # a source's last origin sequence copied (nats-server 2.15 shows it for sources, not mirrors; 0: none)
    seq: int = 0

    @classmethod
    def for_source(
        cls, source: StreamSource, lag: int = 0, active_ns: int = -1, seq: int = 0
    ) -> SourceInfo:
        return cls(source.name, lag, active_ns, None, source.filter_subject, source.subject_transforms, seq)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "lag": self.lag}
        if self.seq:
            out["seq"] = self.seq
        out["active"] = self.active_ns
        if self.error is not None:
            out["error"] = self.error.to_json()
        if self.filter_subject:
            out["filter_subject"] = self.filter_subject
        if self.subject_transforms:
            out["subject_transforms"] = [t.to_json() for t in self.subject_transforms]
        return out


@dataclass(frozen=True, slots=True)
class Alternate:
    """A stream answering the same Direct Gets (the origin and its mirror_direct mirrors)."""

    name: str
    cluster: str
    domain: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.domain:
            out["domain"] = self.domain
        out["cluster"] = self.cluster
        return out


@dataclass(frozen=True, slots=True)
class StreamInfo:
    """Everything a STREAM.INFO / CREATE / UPDATE / LIST entry reports about one stream."""

    config: StreamConfig
    created_ns: int
    state: StreamState
    now_ns: int
    consumer_count: int = 0
    subjects: Mapping[str, int] | None = None
    cluster: ClusterInfo | None = None
    mirror: SourceInfo | None = None
    sources: tuple[SourceInfo, ...] = ()
    alternates: tuple[Alternate, ...] = ()
    domain: str = ""

    def to_json(self, server_version: str | None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "config": self.config.to_json(server_version),
            "created": format_optional_ts(self.created_ns),
            "state": state_json(self.state, self.consumer_count, self.subjects),
        }
        if self.domain:
            out["domain"] = self.domain
        if self.cluster is not None:
            out["cluster"] = self.cluster.to_json()
        if self.mirror is not None:
            out["mirror"] = self.mirror.to_json()
        if self.sources:
            out["sources"] = [s.to_json() for s in self.sources]
        if self.alternates:
            out["alternates"] = [a.to_json() for a in self.alternates]
        out["ts"] = format_optional_ts(self.now_ns)
        return out


def state_json(
    state: StreamState, consumer_count: int = 0, subjects: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """STREAM.INFO's `state` in nats-server's field order (subject counts, when asked for, sorted)."""
    out: dict[str, Any] = {
        "messages": state.messages,
        "bytes": state.bytes,
        "first_seq": state.first_seq,
        "first_ts": format_optional_ts(state.first_ts_ns),
        "last_seq": state.last_seq,
        "last_ts": format_optional_ts(state.last_ts_ns),
    }
    if state.num_subjects:
        out["num_subjects"] = state.num_subjects
    if subjects:
        out["subjects"] = {subject: subjects[subject] for subject in sorted(subjects)}
    if state.num_deleted:
        out["num_deleted"] = state.num_deleted
    if state.deleted:
        out["deleted"] = list(state.deleted)
    out["consumer_count"] = consumer_count
    return out


# -- requests ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InfoRequest:
    subjects_filter: str = ""
    deleted_details: bool = False
    offset: int = 0


def _request_object(payload: bytes, go_type: str, *, objects_only: bool = False) -> dict[str, Any]:
    try:
        return jsjson.loads_request(payload, go_type, objects_only=objects_only)
    except jsjson.RequestJSONError as exc:
        raise JSErrors.INVALID_JSON(err=str(exc)) from None


def parse_info_request(payload: bytes) -> InfoRequest:
    obj = _request_object(payload, "JSApiStreamInfoRequest", objects_only=True)
    try:
        request = InfoRequest(
            subjects_filter=jsjson.get_str(obj, "subjects_filter"),
            deleted_details=jsjson.get_bool(obj, "deleted_details"),
            offset=max(jsjson.get_int(obj, "offset"), 0),
        )
        jsjson.reject_unknown(obj)
    except jsjson.RequestJSONError as exc:
        raise JSErrors.INVALID_JSON(err=str(exc)) from None
    # a subjects_filter that is no valid filter selects no subject, as in nats-server
    return request


@dataclass(frozen=True, slots=True)
class ListRequest:
    """STREAM.NAMES and STREAM.LIST: a page offset and an optional subject filter."""

    offset: int = 0
    subject: str = ""


def parse_list_request(payload: bytes, go_type: str = "JSApiStreamNamesRequest") -> ListRequest:
    """`go_type`: JSApiStreamNamesRequest or JSApiStreamListRequest, which Go's errors name."""
    obj = _request_object(payload, go_type, objects_only=True)
    try:
        request = ListRequest(
            offset=max(jsjson.get_int(obj, "offset"), 0), subject=jsjson.get_str(obj, "subject")
        )
        jsjson.reject_unknown(obj)
    except jsjson.RequestJSONError as exc:
        raise JSErrors.INVALID_JSON(err=str(exc)) from None
    # any subject is compared token by token, as nats-server's SubjectsCollide does (`a..b` too)
    return request


def parse_purge_request(payload: bytes, config: StreamConfig) -> Purge:
    """The PURGE entry to propose, or ApiError (sealed, deny_purge, seq with keep)."""
    obj = _request_object(payload, "JSApiStreamPurgeRequest", objects_only=True)
    try:
        purge = Purge(
            filter=jsjson.get_str(obj, "filter"),
            seq=jsjson.get_int(obj, "seq", unsigned=True),
            keep=jsjson.get_int(obj, "keep", unsigned=True),
        )
        jsjson.reject_unknown(obj)
    except jsjson.RequestJSONError as exc:
        raise JSErrors.INVALID_JSON(err=str(exc)) from None
    if purge.seq and purge.keep:
        raise JSErrors.BAD_REQUEST()
    # a filter that is no valid filter purges nothing (cluster/stream/machine.py), as in nats-server
    if config.sealed:
        raise JSErrors.STREAM_SEALED()
    if config.deny_purge:
        raise JSErrors.STREAM_PURGE_FAILED(err="stream purge not permitted")
    return purge


def parse_msg_delete_request(payload: bytes, config: StreamConfig) -> DeleteMsg:
    """The DELETE_MSG entry to propose, or ApiError (empty request, sealed, deny_delete)."""
    if not payload.strip():
        raise JSErrors.BAD_REQUEST()
    obj = _request_object(payload, "JSApiMsgDeleteRequest")
    try:
        entry = DeleteMsg(
            seq=jsjson.get_int(obj, "seq", unsigned=True), erase=not jsjson.get_bool(obj, "no_erase")
        )
        jsjson.reject_unknown(obj)
    except jsjson.RequestJSONError as exc:
        raise JSErrors.INVALID_JSON(err=str(exc)) from None
    if config.sealed:
        raise JSErrors.STREAM_SEALED()
    if config.deny_delete:
        raise JSErrors.STREAM_MSG_DELETE_FAILED(err="message delete not permitted")
    return entry


# -- responses -----------------------------------------------------------------------------


def stream_create_response(info: StreamInfo, server_version: str, did_create: bool) -> bytes:
    body: dict[str, Any] = {"type": STREAM_CREATE_TYPE, **info.to_json(server_version)}
    if did_create:
        body["did_create"] = True
    return jsjson.dumps(body)


def stream_update_response(info: StreamInfo, server_version: str) -> bytes:
    return jsjson.dumps({"type": STREAM_UPDATE_TYPE, **info.to_json(server_version)})


def stream_info_response(
    info: StreamInfo, server_version: str, subjects_total: int = 0, offset: int = 0
) -> bytes:
    """STREAM.INFO; with a subjects filter that matched, `total`/`offset`/`limit` describe the subject page."""
    paged = {"total": subjects_total, "offset": offset if subjects_total else 0}
    paged["limit"] = SUBJECT_DETAILS_LIMIT if subjects_total else 0
    return jsjson.dumps({"type": STREAM_INFO_TYPE, **paged, **info.to_json(server_version)})


def subjects_page(totals: Mapping[str, int], offset: int) -> tuple[dict[str, int], int]:
    """The page of per-subject counts STREAM.INFO returns from `offset`, and the total number of subjects."""
    total = len(totals)
    if offset == 0 and total <= SUBJECT_DETAILS_LIMIT:
        return dict(totals), total
    names = sorted(totals)[offset : offset + SUBJECT_DETAILS_LIMIT]
    return {name: totals[name] for name in names}, total


def stream_names_response(
    configs: Sequence[StreamConfig], request: ListRequest, standalone: bool = False
) -> bytes:
    """STREAM.NAMES: sorted names (filtered by subject when asked), a page of at most 1024.

    An empty page is Go's nil slice, `null`, where nats-server never appended a name to it: in a
    cluster when no stream matched at all (a page past the end of the matches is `[]`), on a
    standalone server whenever the page is empty."""
    names = sorted(
        cfg.name for cfg in configs if not request.subject or subjects_match_stream(request.subject, cfg)
    )
    offset = min(request.offset, len(names))
    page: list[str] | None = names[offset : offset + NAMES_LIMIT]
    if not (page if standalone else names):
        page = None
    return jsjson.dumps(
        {"type": STREAM_NAMES_TYPE, "total": len(names), "offset": offset, "limit": NAMES_LIMIT, "streams": page}
    )


def stream_list_response(
    infos: Sequence[StreamInfo], request: ListRequest, missing: Sequence[str] = ()
) -> bytes:
    """STREAM.LIST: infos sorted by name, a page of at most 256; configs without dynamic metadata."""
    chosen = sorted(
        (i for i in infos if not request.subject or subjects_match_stream(request.subject, i.config)),
        key=lambda i: i.config.name,
    )
    offset = min(request.offset, len(chosen))
    body: dict[str, Any] = {
        "type": STREAM_LIST_TYPE,
        "total": len(chosen),
        "offset": offset,
        "limit": LIST_LIMIT,
        "streams": [i.to_json(None) for i in chosen[offset : offset + LIST_LIMIT]],
    }
    if missing:
        body["missing"] = list(missing)
    return jsjson.dumps(body)


def stream_delete_response() -> bytes:
    return jsjson.dumps({"type": STREAM_DELETE_TYPE, "success": True})


def stream_purge_response(purged: int) -> bytes:
    return jsjson.dumps({"type": STREAM_PURGE_TYPE, "success": True, "purged": purged})


def stream_purge_error(error: ApiError) -> bytes:
    return error_response(STREAM_PURGE_TYPE, error, purged=0)


def msg_delete_response() -> bytes:
    return jsjson.dumps({"type": MSG_DELETE_TYPE, "success": True})


def leader_stepdown_response() -> bytes:
    return jsjson.dumps({"type": LEADER_STEPDOWN_TYPE, "success": True})


@dataclass(frozen=True, slots=True)
class AccountUsage:
    memory: int = 0
    storage: int = 0
    streams: int = 0
    consumers: int = 0
    api_total: int = 0
    api_errors: int = 0
    limits: JetStreamAccountLimits = UNLIMITED
    domain: str = ""
    # the max_bytes the account's streams have set aside (nats-server's reserved_memory/reserved_storage)
    reserved_memory: int = 0
    reserved_storage: int = 0


def account_info_response(usage: AccountUsage) -> bytes:
    """`$JS.API.INFO`'s answer (trace 04)."""
    body: dict[str, Any] = {
        "type": ACCOUNT_INFO_TYPE,
        "memory": usage.memory,
        "storage": usage.storage,
        "reserved_memory": usage.reserved_memory,
        "reserved_storage": usage.reserved_storage,
        "streams": usage.streams,
        "consumers": usage.consumers,
        "limits": usage.limits.to_json(),
    }
    if usage.domain:
        body["domain"] = usage.domain
    body["api"] = {"level": API_LEVEL, "total": usage.api_total, "errors": usage.api_errors}
    return jsjson.dumps(body)
