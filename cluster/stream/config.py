"""A stream's configuration: parsed from the JetStream API's JSON, printed back as nats-server does.

This module only models the fields; `cluster/stream/config_check.py` fills
defaults and validates. Field names are nats-server's JSON names. Unknown
fields (from newer clients) are ignored; known fields of the wrong type are
an `invalid JSON` error, as Go's decoder makes them.

Durations are integer nanoseconds and times integer Unix nanoseconds, as on
the wire.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cluster.api import jsjson
from cluster.api.errors import ApiError, JSErrors
from storage.nats_time import format_optional_ts, parse_rfc3339_nano

# Metadata keys nats-server manages itself (ADR-44 versioning)
REQUIRED_LEVEL_KEY = "_nats.req.level"
SERVER_VERSION_KEY = "_nats.ver"
SERVER_LEVEL_KEY = "_nats.level"
DYNAMIC_METADATA_KEYS = frozenset({SERVER_VERSION_KEY, SERVER_LEVEL_KEY})

# jetraft's own stream setting (issue 6): a replica leaves the Direct Get group while this far behind
MAX_DIRECT_LAG_KEY = "jetraft.max_direct_lag"


class Retention(enum.StrEnum):
    LIMITS = "limits"
    INTEREST = "interest"
    WORKQUEUE = "workqueue"


class Discard(enum.StrEnum):
    OLD = "old"
    NEW = "new"


class StorageType(enum.StrEnum):
    FILE = "file"
    MEMORY = "memory"


class Compression(enum.StrEnum):
    NONE = "none"
    S2 = "s2"


class PersistMode(enum.StrEnum):
    DEFAULT = "default"
    ASYNC = "async"


@dataclass(frozen=True, slots=True)
class SubjectTransformConfig:
    src: str
    dest: str

    def to_json(self) -> dict[str, Any]:
        return {"src": self.src, "dest": self.dest}


@dataclass(frozen=True, slots=True)
class RePublish:
    dest: str
    src: str = ""
    headers_only: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.src:
            out["src"] = self.src
        out["dest"] = self.dest
        if self.headers_only:
            out["headers_only"] = True
        return out


@dataclass(frozen=True, slots=True)
class Placement:
    cluster: str = ""
    tags: tuple[str, ...] = ()
    preferred: str = ""

    @property
    def is_empty(self) -> bool:
        return not (self.cluster or self.tags or self.preferred)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.cluster:
            out["cluster"] = self.cluster
        if self.tags:
            out["tags"] = list(self.tags)
        if self.preferred:
            out["preferred"] = self.preferred
        return out


@dataclass(frozen=True, slots=True)
class ExternalStream:
    api: str
    deliver: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"api": self.api, "deliver": self.deliver}


@dataclass(frozen=True, slots=True)
class ConsumerSource:
    """A durable consumer a mirror or source copies through (nats-server 2.14+); jetraft refuses it."""

    name: str = ""
    deliver_subject: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.name:
            out["name"] = self.name
        if self.deliver_subject:
            out["deliver_subject"] = self.deliver_subject
        return out


@dataclass(frozen=True, slots=True)
class StreamSource:
    """A mirror's origin or one of a stream's sources."""

    name: str
    opt_start_seq: int = 0
    opt_start_time_ns: int | None = None
    filter_subject: str = ""
    subject_transforms: tuple[SubjectTransformConfig, ...] = ()
    external: ExternalStream | None = None
    consumer: ConsumerSource | None = None

    def index_name(self) -> str:
        """What makes two sources the same source (nats-server's iname): name, filters, destinations."""
        iname = self.name
        if self.external is not None:
            iname += ":" + self.external.api
        if self.consumer is not None:
            iname += ":C=" + self.consumer.name
        if not self.subject_transforms:
            sources, destinations = self.filter_subject or ">", ">"
        else:
            sources = "\f".join(t.src or ">" for t in self.subject_transforms)
            destinations = "\f".join(t.dest or ">" for t in self.subject_transforms)
        return f"{iname} {sources} {destinations}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.opt_start_seq:
            out["opt_start_seq"] = self.opt_start_seq
        if self.opt_start_time_ns is not None:
            out["opt_start_time"] = format_optional_ts(self.opt_start_time_ns)
        if self.filter_subject:
            out["filter_subject"] = self.filter_subject
        if self.subject_transforms:
            out["subject_transforms"] = [t.to_json() for t in self.subject_transforms]
        if self.external is not None:
            out["external"] = self.external.to_json()
        if self.consumer is not None:
            out["consumer"] = self.consumer.to_json()
        return out


@dataclass(frozen=True, slots=True)
class ConsumerLimits:
    inactive_threshold: int = 0
    max_ack_pending: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.inactive_threshold:
            out["inactive_threshold"] = self.inactive_threshold
        if self.max_ack_pending:
            out["max_ack_pending"] = self.max_ack_pending
        return out


@dataclass(frozen=True, slots=True)
class StreamConfig:
    """A stream configuration, as requested (zeros mean "not set") or as normalized."""

    name: str
    description: str = ""
    subjects: tuple[str, ...] = ()
    retention: Retention = Retention.LIMITS
    max_consumers: int = 0
    max_msgs: int = 0
    max_bytes: int = 0
    max_age: int = 0
    max_msgs_per_subject: int = 0
    max_msg_size: int = 0
    discard: Discard = Discard.OLD
    storage: StorageType = StorageType.FILE
    num_replicas: int = 0
    no_ack: bool = False
    duplicate_window: int = 0
    placement: Placement | None = None
    mirror: StreamSource | None = None
    sources: tuple[StreamSource, ...] = ()
    compression: Compression = Compression.NONE
    first_seq: int = 0
    subject_transform: SubjectTransformConfig | None = None
    republish: RePublish | None = None
    # None: the request left it out (normalizing decides, see config_check.py); a normalized config has a bool
    allow_direct: bool | None = None
    mirror_direct: bool = False
    discard_new_per_subject: bool = False
    sealed: bool = False
    deny_delete: bool = False
    deny_purge: bool = False
    allow_rollup_hdrs: bool = False
    consumer_limits: ConsumerLimits = field(default_factory=ConsumerLimits)
    allow_msg_ttl: bool = False
    subject_delete_marker_ttl: int = 0
    allow_msg_counter: bool = False
    allow_atomic: bool = False
    allow_msg_schedules: bool = False
    persist_mode: PersistMode = PersistMode.DEFAULT
    allow_batched: bool = False
    metadata: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_mirror(self) -> bool:
        return self.mirror is not None

    @property
    def max_direct_lag(self) -> int | None:
        """jetraft's opt-in bounded staleness for Direct Get, from metadata; None when unset or unusable."""
        raw = self.metadata.get(MAX_DIRECT_LAG_KEY)
        if raw is None or not raw.strip().isdigit():
            return None
        return int(raw)

    def to_json(self, server_version: str | None = None, api_level: int = 5) -> dict[str, Any]:
        """The config object in nats-server's field order and omissions.

        With `server_version`, the metadata also carries `_nats.ver` and
        `_nats.level`, as in create, update and info responses (not in
        STREAM.LIST entries, and never stored).
        """
        out: dict[str, Any] = {"name": self.name}
        if self.description:
            out["description"] = self.description
        if self.subjects:
            out["subjects"] = list(self.subjects)
        out["retention"] = self.retention.value
        out["max_consumers"] = self.max_consumers
        out["max_msgs"] = self.max_msgs
        out["max_bytes"] = self.max_bytes
        out["max_age"] = self.max_age
        out["max_msgs_per_subject"] = self.max_msgs_per_subject
        if self.max_msg_size:
            out["max_msg_size"] = self.max_msg_size
        out["discard"] = self.discard.value
        out["storage"] = self.storage.value
        out["num_replicas"] = self.num_replicas
        if self.no_ack:
            out["no_ack"] = True
        if self.duplicate_window:
            out["duplicate_window"] = self.duplicate_window
        if self.placement is not None:
            out["placement"] = self.placement.to_json()
        if self.mirror is not None:
            out["mirror"] = self.mirror.to_json()
        if self.sources:
            out["sources"] = [s.to_json() for s in self.sources]
        out["compression"] = self.compression.value
        if self.first_seq:
            out["first_seq"] = self.first_seq
        if self.subject_transform is not None:
            out["subject_transform"] = self.subject_transform.to_json()
        if self.republish is not None:
            out["republish"] = self.republish.to_json()
        out["allow_direct"] = bool(self.allow_direct)
        out["mirror_direct"] = self.mirror_direct
        if self.discard_new_per_subject:
            out["discard_new_per_subject"] = True
        out["sealed"] = self.sealed
        out["deny_delete"] = self.deny_delete
        out["deny_purge"] = self.deny_purge
        out["allow_rollup_hdrs"] = self.allow_rollup_hdrs
        out["consumer_limits"] = self.consumer_limits.to_json()
        out["allow_msg_ttl"] = self.allow_msg_ttl
        if self.subject_delete_marker_ttl:
            out["subject_delete_marker_ttl"] = self.subject_delete_marker_ttl
        if self.allow_msg_counter:
            out["allow_msg_counter"] = True
        if self.allow_atomic:
            out["allow_atomic"] = True
        if self.allow_msg_schedules:
            out["allow_msg_schedules"] = True
        if self.persist_mode is not PersistMode.DEFAULT:
            out["persist_mode"] = self.persist_mode.value
        if self.allow_batched:
            out["allow_batched"] = True
        metadata = dict(self.metadata)
        if server_version is not None:
            metadata[SERVER_VERSION_KEY] = server_version
            metadata[SERVER_LEVEL_KEY] = str(api_level)
        if metadata:
            # Go prints map keys sorted
            out["metadata"] = {key: metadata[key] for key in sorted(metadata)}
        return out

    def to_bytes(self) -> bytes:
        """Compact JSON for replicated entries and snapshots (no dynamic metadata)."""
        return jsjson.dumps(self.to_json())


def _enum(obj: dict[str, Any], key: str, kind: type[enum.StrEnum], default: enum.StrEnum) -> Any:
    raw = obj.get(key)
    if raw is None:
        return default
    if not isinstance(raw, str):
        raise jsjson.RequestJSONError(f"json: cannot unmarshal {type(raw).__name__} into field {key}")
    value = raw.lower() if kind is Discard else raw
    if value == "" and kind in (Compression, PersistMode):
        return default
    try:
        return kind(value)
    except ValueError:
        if kind is Compression:
            raise jsjson.RequestJSONError("unknown compression algorithm") from None
        # Go's `can not unmarshal %q` of the raw JSON token, its quotes included
        raise jsjson.RequestJSONError(f"can not unmarshal {json.dumps(json.dumps(raw))}") from None


def _time_ns(obj: dict[str, Any], key: str) -> int | None:
    raw = obj.get(key)
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise jsjson.RequestJSONError(
            f"json: cannot unmarshal {type(raw).__name__} into field {key} of type time"
        )
    try:
        return parse_rfc3339_nano(raw)
    except ValueError as exc:
        raise jsjson.RequestJSONError(str(exc)) from None


def _transforms(obj: dict[str, Any], key: str) -> tuple[SubjectTransformConfig, ...]:
    raw = obj.get(key)
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise jsjson.RequestJSONError(
            f"json: cannot unmarshal into field {key} of type []SubjectTransformConfig"
        )
    out = []
    for item in raw:
        if not isinstance(item, dict):
            raise jsjson.RequestJSONError(
                f"json: cannot unmarshal into field {key} of type SubjectTransformConfig"
            )
        item = jsjson.nested_object(obj, key, item)
        out.append(SubjectTransformConfig(jsjson.get_str(item, "src"), jsjson.get_str(item, "dest")))
    return tuple(out)


def _source(raw: dict[str, Any]) -> StreamSource:
    external_raw = jsjson.get_object(raw, "external")
    external = None
    if external_raw is not None:
        external = ExternalStream(
            jsjson.get_str(external_raw, "api"), jsjson.get_str(external_raw, "deliver")
        )
    consumer_raw = jsjson.get_object(raw, "consumer")
    consumer = None
    if consumer_raw is not None:
        consumer = ConsumerSource(
            jsjson.get_str(consumer_raw, "name"), jsjson.get_str(consumer_raw, "deliver_subject")
        )
    return StreamSource(
        name=jsjson.get_str(raw, "name"),
        opt_start_seq=jsjson.get_int(raw, "opt_start_seq", unsigned=True),
        opt_start_time_ns=_time_ns(raw, "opt_start_time"),
        filter_subject=jsjson.get_str(raw, "filter_subject"),
        subject_transforms=_transforms(raw, "subject_transforms"),
        external=external,
        consumer=consumer,
    )


def _sources(obj: dict[str, Any]) -> tuple[StreamSource, ...]:
    raw = obj.get("sources")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise jsjson.RequestJSONError("json: cannot unmarshal into field sources of type []StreamSource")
    out = []
    for item in raw:
        if item is None:
            # a null entry: nats-server rejects it as an invalid source name during validation
            out.append(StreamSource(name=""))
            continue
        if not isinstance(item, dict):
            raise jsjson.RequestJSONError("json: cannot unmarshal into field sources of type StreamSource")
        out.append(_source(jsjson.nested_object(obj, "sources", item)))
    return tuple(out)


def stream_config_from_json(obj: dict[str, Any]) -> StreamConfig:
    """Build a StreamConfig from a decoded request object; raises ApiError 10025 on wrong types."""
    try:
        return _from_json(obj)
    except jsjson.RequestJSONError as exc:
        raise JSErrors.INVALID_JSON(err=str(exc)) from None


def parse_stream_config(payload: bytes | bytearray | memoryview | str) -> StreamConfig:
    """Decode a STREAM.CREATE / STREAM.UPDATE body as nats-server's strict decoder does; raises
    ApiError 10025 when it is not valid JSON or holds a field nats-server (and jetraft) does not know."""
    return parse_stream_request(payload)[0]


def parse_stream_request(payload: bytes | bytearray | memoryview | str) -> tuple[StreamConfig, bool]:
    """`parse_stream_config`, and whether the request asks for pedantic mode (`pedantic: true`: refuse
    what nats-server would otherwise adjust, cluster/stream/config_check.py)."""
    try:
        obj = jsjson.loads_request(payload, "StreamConfigRequest")
        config = _from_json(obj)
        pedantic = jsjson.get_bool(obj, "pedantic")
        jsjson.reject_unknown(obj)
    except jsjson.RequestJSONError as exc:
        raise JSErrors.INVALID_JSON(err=str(exc)) from None
    return config, pedantic


def _from_json(obj: dict[str, Any]) -> StreamConfig:
    g = jsjson
    placement_raw = g.get_object(obj, "placement")
    placement = None
    if placement_raw is not None:
        placement = Placement(
            cluster=g.get_str(placement_raw, "cluster"),
            tags=tuple(g.get_str_list(placement_raw, "tags")),
            preferred=g.get_str(placement_raw, "preferred"),
        )
    mirror_raw = g.get_object(obj, "mirror")
    transform_raw = g.get_object(obj, "subject_transform")
    republish_raw = g.get_object(obj, "republish")
    limits_raw = g.get_object(obj, "consumer_limits") or {}
    return StreamConfig(
        name=g.get_str(obj, "name"),
        description=g.get_str(obj, "description"),
        subjects=tuple(g.get_str_list(obj, "subjects")),
        retention=_enum(obj, "retention", Retention, Retention.LIMITS),
        max_consumers=g.get_int(obj, "max_consumers"),
        max_msgs=g.get_int(obj, "max_msgs"),
        max_bytes=g.get_int(obj, "max_bytes"),
        max_age=g.get_int(obj, "max_age"),
        max_msgs_per_subject=g.get_int(obj, "max_msgs_per_subject"),
        max_msg_size=g.get_int(obj, "max_msg_size"),
        discard=_enum(obj, "discard", Discard, Discard.OLD),
        storage=_enum(obj, "storage", StorageType, StorageType.FILE),
        num_replicas=g.get_int(obj, "num_replicas"),
        no_ack=g.get_bool(obj, "no_ack"),
        duplicate_window=g.get_int(obj, "duplicate_window"),
        placement=placement,
        mirror=_source(mirror_raw) if mirror_raw is not None else None,
        sources=_sources(obj),
        compression=_enum(obj, "compression", Compression, Compression.NONE),
        first_seq=g.get_int(obj, "first_seq", unsigned=True),
        subject_transform=(
            SubjectTransformConfig(g.get_str(transform_raw, "src"), g.get_str(transform_raw, "dest"))
            if transform_raw is not None
            else None
        ),
        republish=(
            RePublish(
                dest=g.get_str(republish_raw, "dest"),
                src=g.get_str(republish_raw, "src"),
                headers_only=g.get_bool(republish_raw, "headers_only"),
            )
            if republish_raw is not None
            else None
        ),
        allow_direct=g.get_bool(obj, "allow_direct") if obj.get("allow_direct") is not None else None,
        mirror_direct=g.get_bool(obj, "mirror_direct"),
        discard_new_per_subject=g.get_bool(obj, "discard_new_per_subject"),
        sealed=g.get_bool(obj, "sealed"),
        deny_delete=g.get_bool(obj, "deny_delete"),
        deny_purge=g.get_bool(obj, "deny_purge"),
        allow_rollup_hdrs=g.get_bool(obj, "allow_rollup_hdrs"),
        consumer_limits=ConsumerLimits(
            inactive_threshold=g.get_int(limits_raw, "inactive_threshold"),
            max_ack_pending=g.get_int(limits_raw, "max_ack_pending"),
        ),
        allow_msg_ttl=g.get_bool(obj, "allow_msg_ttl"),
        subject_delete_marker_ttl=g.get_int(obj, "subject_delete_marker_ttl"),
        allow_msg_counter=g.get_bool(obj, "allow_msg_counter"),
        allow_atomic=g.get_bool(obj, "allow_atomic"),
        allow_msg_schedules=g.get_bool(obj, "allow_msg_schedules"),
        persist_mode=_enum(obj, "persist_mode", PersistMode, PersistMode.DEFAULT),
        allow_batched=g.get_bool(obj, "allow_batched"),
        metadata=g.get_str_map(obj, "metadata") or {},
    )


def stream_config_from_bytes(data: bytes) -> StreamConfig:
    """Inverse of `StreamConfig.to_bytes` (replicated entries, snapshots, meta assignments)."""
    return stream_config_from_json(jsjson.loads_object(data))


__all__ = [
    "DYNAMIC_METADATA_KEYS",
    "MAX_DIRECT_LAG_KEY",
    "REQUIRED_LEVEL_KEY",
    "ApiError",
    "Compression",
    "ConsumerLimits",
    "ConsumerSource",
    "Discard",
    "ExternalStream",
    "PersistMode",
    "Placement",
    "RePublish",
    "Retention",
    "StorageType",
    "StreamConfig",
    "StreamSource",
    "SubjectTransformConfig",
    "parse_stream_config",
    "parse_stream_request",
    "stream_config_from_bytes",
    "stream_config_from_json",
]
