"""A consumer's configuration: parsed from CONSUMER.CREATE requests, printed back as nats-server does.

Only the model and its JSON live here; defaults, validation and the
create/update decision are in `cluster/consumer/config_check.py`. Field names
are nats-server's JSON names, durations integer nanoseconds. Unknown fields
are ignored; known fields of the wrong type are `invalid JSON` (10025), as Go's
decoder makes them. An unknown enum value is 10025 too, with Go's text
(`can not unmarshal "\\"bogus\\""`): that is what nats-server 2.15 answers for
an unknown deliver, ack or replay policy.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cluster.api import jsjson
from cluster.api.errors import ApiError, JSErrors
from cluster.stream.config import REQUIRED_LEVEL_KEY, SERVER_LEVEL_KEY, SERVER_VERSION_KEY
from storage.nats_time import ZERO_TIME, format_optional_ts, parse_request_time, parse_rfc3339_nano

# Go's zero time: a config may name it as its `pause_until` (kept and printed, pausing nothing)
ZERO_TIME_NS = parse_rfc3339_nano(ZERO_TIME)


_GROUP_NAME = re.compile(r"[a-zA-Z0-9/_=-]{1,16}")


def is_valid_group_name(group: str) -> bool:
    """A priority group's name as nats-server allows it (10162 otherwise)."""
    return _GROUP_NAME.fullmatch(group) is not None


# ADR-42's priority policies, as the config spells them
PRIORITY_NONE = "none"
PRIORITY_OVERFLOW = "overflow"
PRIORITY_PINNED_CLIENT = "pinned_client"
PRIORITY_PRIORITIZED = "prioritized"
PRIORITY_POLICIES = (PRIORITY_OVERFLOW, PRIORITY_PINNED_CLIENT, PRIORITY_PRIORITIZED)
# how long a pinned client keeps its pin without asking, unless the config says (JsDefaultPinnedTTL)
DEFAULT_PINNED_TTL_NS = 120 * 1_000_000_000


class DeliverPolicy(enum.StrEnum):
    ALL = "all"
    LAST = "last"
    NEW = "new"
    BY_START_SEQUENCE = "by_start_sequence"
    BY_START_TIME = "by_start_time"
    LAST_PER_SUBJECT = "last_per_subject"


class AckPolicy(enum.StrEnum):
    NONE = "none"
    ALL = "all"
    EXPLICIT = "explicit"


class ReplayPolicy(enum.StrEnum):
    INSTANT = "instant"
    ORIGINAL = "original"


class CreateAction(enum.StrEnum):
    """The request's `action`: empty creates or updates, the others insist on one of them."""

    CREATE_OR_UPDATE = ""
    CREATE = "create"
    UPDATE = "update"


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    """A consumer configuration, as requested (zeros mean "not set") or as normalized."""

    durable_name: str = ""
    name: str = ""
    description: str = ""
    deliver_policy: DeliverPolicy = DeliverPolicy.ALL
    opt_start_seq: int = 0
    opt_start_time_ns: int | None = None
    ack_policy: AckPolicy = AckPolicy.NONE
    ack_wait: int = 0
    max_deliver: int = 0
    backoff: tuple[int, ...] = ()
    filter_subject: str = ""
    filter_subjects: tuple[str, ...] = ()
    replay_policy: ReplayPolicy = ReplayPolicy.INSTANT
    rate_limit_bps: int = 0
    sample_freq: str = ""
    max_waiting: int = 0
    max_ack_pending: int = 0
    flow_control: bool = False
    headers_only: bool = False
    max_batch: int = 0
    max_expires: int = 0
    max_bytes: int = 0
    deliver_subject: str = ""
    deliver_group: str = ""
    idle_heartbeat: int = 0
    inactive_threshold: int = 0
    num_replicas: int = 0
    mem_storage: bool = False
    direct: bool = False
    metadata: Mapping[str, str] = field(default_factory=dict)
    pause_until_ns: int | None = None
    priority_groups: tuple[str, ...] = ()
    priority_policy: str = ""
    priority_timeout: int = 0
    sourcing: bool = False

    # -- what the state machine and the leader read --------------------------------------

    @property
    def is_push(self) -> bool:
        return bool(self.deliver_subject)

    @property
    def is_pull(self) -> bool:
        return not self.deliver_subject

    @property
    def is_durable(self) -> bool:
        return bool(self.durable_name)

    @property
    def filters(self) -> tuple[str, ...]:
        """The subject filters, one or many; `()` means every subject of the stream."""
        if self.filter_subjects:
            return self.filter_subjects
        if self.filter_subject and self.filter_subject != ">":
            return (self.filter_subject,)
        return ()

    def ack_wait_for(self, deliveries: int) -> int:
        """How long a message delivered `deliveries` times waits for its ack (backoff list, then ack_wait)."""
        if self.backoff:
            return self.backoff[min(max(deliveries, 1), len(self.backoff)) - 1]
        return self.ack_wait

    @property
    def sample_percent(self) -> int:
        """Ack sampling as a percentage (0: off); the config was validated, so this parses."""
        text = self.sample_freq.strip().removesuffix("%")
        return int(text) if text else 0

    # -- JSON --------------------------------------------------------------------------

    def to_json(self, server_version: str | None = None, api_level: int = 5) -> dict[str, Any]:
        """The config in nats-server's field order and omissions (Go's `omitempty`).

        With `server_version`, metadata also carries `_nats.ver` and `_nats.level`
        (create and info responses), never stored.
        """
        out: dict[str, Any] = {}
        if self.durable_name:
            out["durable_name"] = self.durable_name
        if self.name:
            out["name"] = self.name
        if self.description:
            out["description"] = self.description
        out["deliver_policy"] = self.deliver_policy.value
        if self.opt_start_seq:
            out["opt_start_seq"] = self.opt_start_seq
        if self.opt_start_time_ns is not None:
            out["opt_start_time"] = format_optional_ts(self.opt_start_time_ns)
        out["ack_policy"] = self.ack_policy.value
        if self.ack_wait:
            out["ack_wait"] = self.ack_wait
        if self.max_deliver:
            out["max_deliver"] = self.max_deliver
        if self.backoff:
            out["backoff"] = list(self.backoff)
        if self.filter_subject:
            out["filter_subject"] = self.filter_subject
        if self.filter_subjects:
            out["filter_subjects"] = list(self.filter_subjects)
        out["replay_policy"] = self.replay_policy.value
        if self.rate_limit_bps:
            out["rate_limit_bps"] = self.rate_limit_bps
        if self.sample_freq:
            out["sample_freq"] = self.sample_freq
        if self.max_waiting:
            out["max_waiting"] = self.max_waiting
        if self.max_ack_pending:
            out["max_ack_pending"] = self.max_ack_pending
        if self.flow_control:
            out["flow_control"] = True
        if self.headers_only:
            out["headers_only"] = True
        if self.max_batch:
            out["max_batch"] = self.max_batch
        if self.max_expires:
            out["max_expires"] = self.max_expires
        if self.max_bytes:
            out["max_bytes"] = self.max_bytes
        if self.deliver_subject:
            out["deliver_subject"] = self.deliver_subject
        if self.deliver_group:
            out["deliver_group"] = self.deliver_group
        if self.idle_heartbeat:
            out["idle_heartbeat"] = self.idle_heartbeat
        if self.inactive_threshold:
            out["inactive_threshold"] = self.inactive_threshold
        out["num_replicas"] = self.num_replicas
        if self.mem_storage:
            out["mem_storage"] = True
        if self.direct:
            out["direct"] = True
        metadata = dict(self.metadata)
        if server_version is not None:
            metadata[SERVER_VERSION_KEY] = server_version
            metadata[SERVER_LEVEL_KEY] = str(api_level)
        if metadata:
            out["metadata"] = {key: metadata[key] for key in sorted(metadata)}
        if self.pause_until_ns is not None:
            zero = self.pause_until_ns == ZERO_TIME_NS
            out["pause_until"] = ZERO_TIME if zero else format_optional_ts(self.pause_until_ns)
        if self.priority_groups:
            out["priority_groups"] = list(self.priority_groups)
        if self.priority_policy:
            out["priority_policy"] = self.priority_policy
        if self.priority_timeout:
            out["priority_timeout"] = self.priority_timeout
        if self.sourcing:
            out["sourcing"] = True
        return out

    def to_bytes(self) -> bytes:
        """Compact JSON for meta assignments and snapshots (no dynamic metadata)."""
        return jsjson.dumps(self.to_json())


@dataclass(frozen=True, slots=True)
class CreateConsumerRequest:
    """The body of CONSUMER.CREATE / CONSUMER.DURABLE.CREATE."""

    stream_name: str
    config: ConsumerConfig
    action: CreateAction = CreateAction.CREATE_OR_UPDATE
    pedantic: bool = False


# nats-server 2.15's fourth ack policy: a push consumer acknowledged through its flow control (what it
# uses for sourcing streams), which jetraft does not implement
ACK_FLOW_CONTROL = "flow_control"


def _flow_control_ack_refusal(config: dict[str, Any], pedantic: bool) -> ApiError:
    """nats-server's answer to an `ack_policy: flow_control` config that its checks refuse, in their
    order (after its defaults: flow control on and a heartbeat of one second, unless pedantic); else
    jetraft's refusal."""
    if not config.get("deliver_subject"):
        return JSErrors.CONSUMER_ACK_FC_REQUIRES_PUSH()
    if pedantic and not config.get("flow_control"):
        return JSErrors.CONSUMER_ACK_FC_REQUIRES_FC()

    def number(key: str) -> int:
        value = config.get(key)
        return value if isinstance(value, int) else 0

    if number("max_ack_pending") < 0:
        return JSErrors.CONSUMER_ACK_FC_REQUIRES_MAX_ACK_PENDING()
    if number("ack_wait") or config.get("backoff"):
        return JSErrors.CONSUMER_ACK_FC_REQUIRES_NO_ACK_WAIT()
    if number("max_deliver") > 0:
        return JSErrors.CONSUMER_ACK_FC_REQUIRES_NO_MAX_DELIVER()
    return JSErrors.CONSUMER_CREATE(err="flow control ack policy is not supported by jetraft")


def _go_unmarshal_error(raw: Any) -> jsjson.RequestJSONError:
    # nats-server's enum decoders answer `can not unmarshal %q` of the raw JSON token
    return jsjson.RequestJSONError(f"can not unmarshal {json.dumps(json.dumps(raw))}")


def _priority_policy(obj: dict[str, Any]) -> str:
    """ADR-42's `priority_policy`; "" for none (nats-server leaves none out of the config it shows)."""
    raw = obj.get("priority_policy")
    if raw is None or raw == PRIORITY_NONE:
        return ""
    if raw not in PRIORITY_POLICIES:
        # nats-server's PriorityPolicy decoder names the raw JSON token
        raise jsjson.RequestJSONError(f"unknown priority policy: {json.dumps(raw)}")
    return str(raw)


def _enum(obj: dict[str, Any], key: str, kind: type[enum.StrEnum], default: enum.StrEnum) -> Any:
    raw = obj.get(key)
    if raw is None:
        return default
    if not isinstance(raw, str):
        raise _go_unmarshal_error(raw)
    try:
        return kind(raw)
    except ValueError:
        raise _go_unmarshal_error(raw) from None


def _time_ns(obj: dict[str, Any], key: str) -> int | None:
    raw = obj.get(key)
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise jsjson.RequestJSONError(f"json: cannot unmarshal {type(raw).__name__} into field {key}")
    try:
        return parse_request_time(raw)
    except ValueError as exc:
        raise jsjson.RequestJSONError(str(exc)) from None


def parse_pause_until(text: str) -> int:
    """An RFC 3339 `pause_until` as Unix ns (ZERO_TIME_NS for Go's zero time). Raises ValueError."""
    if parse_rfc3339_nano(text) == ZERO_TIME_NS:
        return ZERO_TIME_NS
    return parse_request_time(text)


def _pause_until(obj: dict[str, Any]) -> int | None:
    raw = obj.get("pause_until")
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise jsjson.RequestJSONError(f"json: cannot unmarshal {type(raw).__name__} into field pause_until")
    try:
        return parse_pause_until(raw)
    except ValueError as exc:
        raise jsjson.RequestJSONError(str(exc)) from None


def _durations(obj: dict[str, Any], key: str) -> tuple[int, ...]:
    raw = obj.get(key)
    if raw is None:
        return ()
    if not isinstance(raw, list) or any(isinstance(v, bool) or not isinstance(v, int) for v in raw):
        raise jsjson.RequestJSONError(f"json: cannot unmarshal into field {key} of type []time.Duration")
    return tuple(raw)


def _from_json(obj: dict[str, Any]) -> ConsumerConfig:
    g = jsjson
    return ConsumerConfig(
        durable_name=g.get_str(obj, "durable_name"),
        name=g.get_str(obj, "name"),
        description=g.get_str(obj, "description"),
        deliver_policy=_enum(obj, "deliver_policy", DeliverPolicy, DeliverPolicy.ALL),
        opt_start_seq=g.get_int(obj, "opt_start_seq", unsigned=True),
        opt_start_time_ns=_time_ns(obj, "opt_start_time"),
        ack_policy=_enum(obj, "ack_policy", AckPolicy, AckPolicy.NONE),
        ack_wait=g.get_int(obj, "ack_wait"),
        max_deliver=g.get_int(obj, "max_deliver"),
        backoff=_durations(obj, "backoff"),
        filter_subject=g.get_str(obj, "filter_subject"),
        filter_subjects=tuple(g.get_str_list(obj, "filter_subjects")),
        replay_policy=_enum(obj, "replay_policy", ReplayPolicy, ReplayPolicy.INSTANT),
        rate_limit_bps=g.get_int(obj, "rate_limit_bps", unsigned=True),
        sample_freq=g.get_str(obj, "sample_freq"),
        max_waiting=g.get_int(obj, "max_waiting"),
        max_ack_pending=g.get_int(obj, "max_ack_pending"),
        flow_control=g.get_bool(obj, "flow_control"),
        headers_only=g.get_bool(obj, "headers_only"),
        max_batch=g.get_int(obj, "max_batch"),
        max_expires=g.get_int(obj, "max_expires"),
        max_bytes=g.get_int(obj, "max_bytes"),
        deliver_subject=g.get_str(obj, "deliver_subject"),
        deliver_group=g.get_str(obj, "deliver_group"),
        idle_heartbeat=g.get_int(obj, "idle_heartbeat"),
        inactive_threshold=g.get_int(obj, "inactive_threshold"),
        num_replicas=g.get_int(obj, "num_replicas"),
        mem_storage=g.get_bool(obj, "mem_storage"),
        direct=g.get_bool(obj, "direct"),
        metadata=g.get_str_map(obj, "metadata") or {},
        pause_until_ns=_pause_until(obj),
        priority_groups=tuple(g.get_str_list(obj, "priority_groups")),
        priority_policy=_priority_policy(obj),
        priority_timeout=g.get_int(obj, "priority_timeout"),
        sourcing=g.get_bool(obj, "sourcing"),
    )


def consumer_config_from_json(obj: dict[str, Any]) -> ConsumerConfig:
    """Build a ConsumerConfig from a decoded object; raises ApiError 10025 on wrong types or enum values."""
    try:
        return _from_json(obj)
    except jsjson.RequestJSONError as exc:
        raise JSErrors.INVALID_JSON(err=str(exc)) from None


def consumer_config_from_bytes(data: bytes) -> ConsumerConfig:
    """Inverse of `ConsumerConfig.to_bytes`."""
    return consumer_config_from_json(jsjson.loads_object(data))


def parse_create_request(payload: bytes | bytearray | memoryview | str) -> CreateConsumerRequest:
    """Decode a CONSUMER.CREATE body; raises ApiError 10025 when it is not the JSON nats-server accepts."""
    try:
        obj = jsjson.loads_request(payload, "CreateConsumerRequest")
        config_obj = jsjson.get_object(obj, "config") or {}
        stream_name = jsjson.get_str(obj, "stream_name")
        action_raw = jsjson.get_str(obj, "action")
        pedantic = jsjson.get_bool(obj, "pedantic")
        try:
            action = CreateAction(action_raw)
        except ValueError:
            raise _go_unmarshal_error(action_raw) from None
        if config_obj.get("ack_policy") == ACK_FLOW_CONTROL:
            raise _flow_control_ack_refusal(config_obj, pedantic)
        config = _from_json(config_obj)
        jsjson.reject_unknown(obj)
    except jsjson.RequestJSONError as exc:
        raise JSErrors.INVALID_JSON(err=str(exc)) from None
    return CreateConsumerRequest(stream_name, config, action, pedantic)


__all__ = [
    "DEFAULT_PINNED_TTL_NS",
    "PRIORITY_NONE",
    "PRIORITY_OVERFLOW",
    "PRIORITY_PINNED_CLIENT",
    "PRIORITY_POLICIES",
    "PRIORITY_PRIORITIZED",
    "REQUIRED_LEVEL_KEY",
    "ZERO_TIME_NS",
    "AckPolicy",
    "ConsumerConfig",
    "CreateAction",
    "CreateConsumerRequest",
    "DeliverPolicy",
    "ReplayPolicy",
    "consumer_config_from_bytes",
    "consumer_config_from_json",
    "is_valid_group_name",
    "parse_create_request",
    "parse_pause_until",
]
