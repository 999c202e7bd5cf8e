"""Defaults and validation of consumer configs, and the create-or-update decision.

Rules, texts and codes follow what nats-server 2.15 answers (checked against
a real server). Where the issue's wording and the server disagree we follow
the server, as NOTES.md asks:

- an unknown deliver/ack/replay policy is `invalid JSON` (10025), from the decoder;
- `max_deliver` 0 or negative is not an error: it becomes -1 (unlimited);
- a filter outside the stream's subjects is accepted (it matches nothing yet).

Pedantic mode (`pedantic: true` in the create request) refuses, with nats-server's
10157, what it would otherwise adjust. Features jetraft does not implement (direct
and sourcing consumers) are refused with a clear error instead of being accepted
and ignored. All functions are pure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cluster.api.errors import ApiError, JSErrors
from cluster.consumer.config import (
    DEFAULT_PINNED_TTL_NS,
    PRIORITY_PINNED_CLIENT,
    ZERO_TIME_NS,
    AckPolicy,
    ConsumerConfig,
    CreateAction,
    CreateConsumerRequest,
    DeliverPolicy,
    is_valid_group_name,
)
from cluster.runtime.server_limits import NO_SERVER_LIMITS, ServerJetStreamLimits
from cluster.stream.config import DYNAMIC_METADATA_KEYS, REQUIRED_LEVEL_KEY, Retention, StreamConfig
from storage.nats_time import format_go_duration
from subjects.grammar import filters_overlap, is_valid_filter, is_valid_subject, subject_matches

NS_PER_S = 1_000_000_000
DEFAULT_ACK_WAIT_NS = 30 * NS_PER_S
DEFAULT_MAX_ACK_PENDING = 1000
DEFAULT_MAX_WAITING = 512
DEFAULT_EPHEMERAL_INACTIVE_NS = 5 * NS_PER_S
MIN_MAX_EXPIRES_NS = 1_000_000
MAX_NAME_LEN = 255
MAX_DESCRIPTION_LEN = 4096  # nats-server's JSMaxDescriptionLen
_FORBIDDEN_NAME_CHARS = frozenset(" \t\r\n\f.*>\\/")


def is_valid_consumer_name(name: str) -> bool:
    return bool(name) and not any(ch in _FORBIDDEN_NAME_CHARS for ch in name)


@dataclass(frozen=True, slots=True)
class CreateSubject:
    """What the request subject says: `$JS.API.CONSUMER.CREATE.<stream>[.<consumer>[.<filter>]]` or
    `$JS.API.CONSUMER.DURABLE.CREATE.<stream>.<durable>`."""

    stream: str
    consumer: str = ""
    filter_subject: str = ""
    durable_api: bool = False


def parse_create_subject(subject: str, prefix: str = "$JS.API.") -> CreateSubject | None:
    """Split a create subject into its parts; None when it is not one."""
    if not subject.startswith(prefix):
        return None
    tokens = subject[len(prefix) :].split(".")
    if tokens[:3] == ["CONSUMER", "DURABLE", "CREATE"] and len(tokens) == 5:
        return CreateSubject(tokens[3], tokens[4], durable_api=True)
    if tokens[:2] == ["CONSUMER", "CREATE"] and len(tokens) >= 3:
        consumer = tokens[3] if len(tokens) >= 4 else ""
        return CreateSubject(tokens[2], consumer, ".".join(tokens[4:]))
    return None


def check_create_request(subject: CreateSubject, request: CreateConsumerRequest) -> ConsumerConfig:
    """The checks nats-server makes between subject and body, before it looks at the stream.

    Returns the config with the name the subject gives (a name in the subject wins).
    """
    if request.stream_name != subject.stream:
        raise JSErrors.STREAM_MISMATCH()
    cfg = request.config
    if subject.durable_api:
        if not cfg.durable_name:
            raise JSErrors.CONSUMER_DURABLE_NAME_NOT_SET()
        if cfg.durable_name != subject.consumer:
            raise JSErrors.CONSUMER_NAME_DURABLE_MISMATCH()
        return cfg
    if not subject.consumer:
        if cfg.durable_name:
            raise JSErrors.CONSUMER_EPHEMERAL_WITH_DURABLE_NAME()
        return cfg
    if cfg.durable_name and cfg.durable_name != subject.consumer:
        raise JSErrors.CONSUMER_NAME_DURABLE_MISMATCH()
    if subject.filter_subject and cfg.filter_subjects:
        raise JSErrors.CONSUMER_MULTIPLE_FILTERS_NOT_ALLOWED()
    if subject.filter_subject and subject.filter_subject != cfg.filter_subject:
        raise JSErrors.CONSUMER_CREATE_FILTER_SUBJECT_MISMATCH()
    return dataclasses.replace(cfg, name=subject.consumer)


def _invalid(message: str) -> ApiError:
    return JSErrors.STREAM_INVALID_CONFIG(err=message)


def _policy(message: str) -> ApiError:
    return JSErrors.CONSUMER_INVALID_POLICY(err=message)


_POLICY_TEXT = {
    DeliverPolicy.ALL: "deliver all",
    DeliverPolicy.LAST: "deliver last",
    DeliverPolicy.NEW: "deliver new",
    DeliverPolicy.LAST_PER_SUBJECT: "deliver last per subject",
    DeliverPolicy.BY_START_SEQUENCE: "deliver by start sequence",
    DeliverPolicy.BY_START_TIME: "deliver by start time",
}


def _check_deliver_policy(cfg: ConsumerConfig) -> None:
    text = f"consumer delivery policy is {_POLICY_TEXT[cfg.deliver_policy]}, but optional"
    policy = cfg.deliver_policy
    if policy is DeliverPolicy.BY_START_SEQUENCE:
        if cfg.opt_start_seq == 0:
            raise _policy(f"{text} start sequence is not set")
        if cfg.opt_start_time_ns is not None:
            raise _policy(f"{text} start time is also set")
        return
    if policy is DeliverPolicy.BY_START_TIME:
        if cfg.opt_start_time_ns is None:
            raise _policy(f"{text} start time is not set")
        if cfg.opt_start_seq:
            raise _policy(f"{text} start sequence is also set")
        return
    if cfg.opt_start_seq:
        raise _policy(f"{text} start sequence is also set")
    if cfg.opt_start_time_ns is not None:
        raise _policy(f"{text} start time is also set")
    if policy is DeliverPolicy.LAST_PER_SUBJECT and not (cfg.filter_subject or cfg.filter_subjects):
        raise _policy(f"{text} filter subject is not set")


def _check_filters(cfg: ConsumerConfig) -> None:
    if cfg.filter_subject and cfg.filter_subjects:
        raise JSErrors.CONSUMER_DUPLICATE_FILTER_SUBJECTS()
    filters = cfg.filter_subjects or ((cfg.filter_subject,) if cfg.filter_subject else ())
    if "" in cfg.filter_subjects:
        raise JSErrors.CONSUMER_EMPTY_FILTER()
    for subject in filters:
        if not is_valid_filter(subject):
            raise _invalid("invalid subject")
    for i, first in enumerate(filters):
        for second in filters[i + 1 :]:
            if filters_overlap(first, second):
                raise JSErrors.CONSUMER_OVERLAPPING_SUBJECT_FILTERS()


def _check_sampling(sample_freq: str) -> None:
    text = sample_freq.strip().removesuffix("%")
    if not text:
        return
    digits = text[1:] if text[0] in "+-" else text
    if not digits.isdigit():
        raise JSErrors.CONSUMER_INVALID_SAMPLING(err=f'strconv.Atoi: parsing "{text}": invalid syntax')


def required_api_level(cfg: ConsumerConfig) -> int:
    """The JetStream API level a server needs to honour `cfg` (nats-server's `_nats.req.level`):
    1 for a pause (added in 2.11; Go's zero time is none) or priority groups (2.11), else 0."""
    if cfg.pause_until_ns is not None and cfg.pause_until_ns != ZERO_TIME_NS:
        return 1
    return 1 if cfg.priority_policy or cfg.priority_timeout or cfg.priority_groups else 0


def static_metadata(cfg: ConsumerConfig) -> dict[str, str]:
    """The metadata to store: the user's, and the API level the config requires."""
    out = {k: v for k, v in cfg.metadata.items() if k not in DYNAMIC_METADATA_KEYS}
    out[REQUIRED_LEVEL_KEY] = str(required_api_level(cfg))
    return out


def normalize_consumer_config(
    requested: ConsumerConfig,
    stream: StreamConfig,
    others: Mapping[str, ConsumerConfig] | None = None,
    account_max_ack_pending: int = -1,
    server_limits: ServerJetStreamLimits = NO_SERVER_LIMITS,
    pedantic: bool = False,
) -> ConsumerConfig:
    """Fill defaults as nats-server 2.15 does and validate against the stream; raises ApiError.
    `pedantic` (the request's `pedantic: true`): where nats-server would adjust, refuse instead (10157).

    `others` are the stream's other consumers by name (workqueue uniqueness);
    an existing consumer being updated must not be among them. `account_max_ack_pending` is the
    account's limit (0 or less: none): the default where lower, and a cap. `server_limits` are the
    deciding node's `jetstream { limits { max_ack_pending, max_request_batch } }` (0 or less: none): its
    max_ack_pending likewise, before the account's; its max_request_batch a pull consumer's default
    max_batch, and its cap (10125).
    """
    cfg = requested
    if cfg.durable_name and cfg.name and cfg.durable_name != cfg.name:
        raise JSErrors.CONSUMER_DURABLE_NAME_MISMATCH()
    name = cfg.name or cfg.durable_name
    if name and not is_valid_consumer_name(name):
        raise _invalid("consumer name can not contain '.', '*', '>', '\\', '/'")
    if len(name) > MAX_NAME_LEN:
        raise JSErrors.CONSUMER_NAME_TOO_LONG(max=MAX_NAME_LEN)
    if len(cfg.description) > MAX_DESCRIPTION_LEN:
        raise JSErrors.CONSUMER_DESCRIPTION_TOO_LONG(max=MAX_DESCRIPTION_LEN)
    if cfg.direct:
        raise JSErrors.CONSUMER_CREATE(err="direct consumers are not supported by jetraft")
    if cfg.sourcing:
        raise JSErrors.CONSUMER_CREATE(err="sourcing consumers are not supported by jetraft")

    # defaults, in nats-server's order (the checks below see the filled-in values)
    ack_wait = cfg.ack_wait
    if any(backoff < 0 for backoff in cfg.backoff):
        raise JSErrors.CONSUMER_BACKOFF_NEGATIVE()
    if ack_wait < 0:
        raise JSErrors.CONSUMER_ACK_WAIT_NEGATIVE()
    if pedantic:
        _refuse_adjustments(cfg, stream, server_limits)
    if cfg.backoff:
        ack_wait = cfg.backoff[0]
    elif ack_wait == 0 and cfg.ack_policy is not AckPolicy.NONE:
        ack_wait = DEFAULT_ACK_WAIT_NS
    max_deliver = cfg.max_deliver if cfg.max_deliver > 0 else -1
    max_ack_pending = cfg.max_ack_pending
    if max_ack_pending < 0:
        max_ack_pending = -1
    elif max_ack_pending == 0:
        # the stream's consumer limit, for any ack policy (as nats-server); else the default, capped
        limit = stream.consumer_limits.max_ack_pending
        if limit > 0:
            max_ack_pending = limit
        elif cfg.ack_policy is not AckPolicy.NONE:
            max_ack_pending = DEFAULT_MAX_ACK_PENDING
            for cap in (server_limits.max_ack_pending, account_max_ack_pending):
                if 0 < cap < max_ack_pending:
                    max_ack_pending = cap
    max_waiting = cfg.max_waiting
    if cfg.is_push:
        if max_waiting != 0:
            raise JSErrors.CONSUMER_PUSH_MAX_WAITING()
    elif max_waiting <= 0:
        max_waiting = DEFAULT_MAX_WAITING
    # the stream's consumer limit is every consumer's default, durables' too (nats-server's
    # setConsumerConfigDefaults); an ephemeral without either goes after nats-server's five seconds
    inactive = max(cfg.inactive_threshold, 0)
    if inactive == 0:
        inactive = max(stream.consumer_limits.inactive_threshold, 0)
    if not cfg.durable_name and inactive == 0:
        inactive = DEFAULT_EPHEMERAL_INACTIVE_NS
    max_expires = max(cfg.max_expires, 0)
    if 0 < max_expires < MIN_MAX_EXPIRES_NS:
        raise JSErrors.CONSUMER_MAX_REQUEST_EXPIRES_TOO_SMALL()

    cfg = dataclasses.replace(
        cfg,
        name=name,
        ack_wait=ack_wait,
        max_deliver=max_deliver,
        max_ack_pending=max_ack_pending,
        max_waiting=max_waiting,
        inactive_threshold=inactive,
        max_expires=max_expires,
        max_batch=_max_batch(cfg, server_limits.max_request_batch),
        max_bytes=max(cfg.max_bytes, 0),
        priority_timeout=_priority_timeout(cfg),
        metadata=static_metadata(cfg),
    )

    if cfg.is_pull:
        if cfg.rate_limit_bps > 0:
            raise JSErrors.CONSUMER_PULL_WITH_RATE_LIMIT()
        if cfg.idle_heartbeat:
            raise JSErrors.CONSUMER_HB_REQUIRES_PUSH()
        if cfg.flow_control:
            raise JSErrors.CONSUMER_FC_REQUIRES_PUSH()
        if 0 < server_limits.max_request_batch < cfg.max_batch:
            raise JSErrors.CONSUMER_MAX_REQUEST_BATCH_EXCEEDED(limit=server_limits.max_request_batch)
    else:
        if any(token in ("*", ">") for token in cfg.deliver_subject.split(".")):
            raise JSErrors.CONSUMER_DELIVER_TO_WILDCARDS()
        if not is_valid_subject(cfg.deliver_subject):
            raise _invalid("invalid deliver subject")
        if any(subject_matches(s, cfg.deliver_subject) for s in stream.subjects):
            raise JSErrors.CONSUMER_DELIVER_CYCLE()
        if cfg.flow_control and cfg.idle_heartbeat <= 0:
            raise JSErrors.CONSUMER_FLOW_CONTROL_NEEDS_HEARTBEATS()
    _check_max_ack_pending(
        cfg.max_ack_pending,
        (server_limits.max_ack_pending, account_max_ack_pending, stream.consumer_limits.max_ack_pending),
    )
    inactive_limit = stream.consumer_limits.inactive_threshold
    if 0 < inactive_limit < cfg.inactive_threshold:
        raise JSErrors.CONSUMER_INACTIVE_THRESHOLD_EXCESS(limit=format_go_duration(inactive_limit))
    _check_deliver_policy(cfg)
    _check_filters(cfg)
    _check_sampling(cfg.sample_freq)
    if cfg.backoff and cfg.max_deliver != -1 and cfg.max_deliver < len(cfg.backoff):
        raise JSErrors.CONSUMER_MAX_DELIVER_BACKOFF()
    replicas = stream.num_replicas or 1
    if cfg.num_replicas < 0:
        raise JSErrors.REPLICAS_COUNT_CANNOT_BE_NEGATIVE()
    if cfg.num_replicas > replicas:
        raise JSErrors.CONSUMER_REPLICAS_EXCEEDS_STREAM()
    _check_priority(cfg)
    if stream.retention is Retention.WORKQUEUE:
        _check_workqueue(cfg, (others or {}).values())
    return cfg


def _refuse_adjustments(cfg: ConsumerConfig, stream: StreamConfig, server_limits: ServerJetStreamLimits) -> None:
    """Pedantic mode: nats-server's pedantic errors, in its order, for each value it would otherwise
    adjust (a negative limit, an ack_wait the backoff overrides, a default taken from the stream's or
    the server's limits)."""
    negatives = (
        (cfg.max_deliver < -1, "max_deliver must be set to -1"),
        (cfg.max_waiting < 0, "max_waiting must not be negative"),
        (cfg.max_ack_pending < -1, "max_ack_pending must be set to -1"),
        (cfg.max_batch < 0, "max_batch must not be negative"),
        (cfg.max_expires < 0, "max_expires must not be negative"),
        (cfg.max_bytes < 0, "max_bytes must not be negative"),
        (cfg.idle_heartbeat < 0, "idle_heartbeat must not be negative"),
        (cfg.inactive_threshold < 0, "inactive_threshold must not be negative"),
        (cfg.priority_timeout < 0, "priority_timeout must not be negative"),
    )
    for refused, why in negatives:
        if refused:
            raise JSErrors.PEDANTIC(err=why)
    ack_wait = cfg.ack_wait
    if ack_wait == 0 and cfg.ack_policy in (AckPolicy.EXPLICIT, AckPolicy.ALL):
        ack_wait = DEFAULT_ACK_WAIT_NS
    if cfg.backoff and ack_wait != cfg.backoff[0]:
        raise JSErrors.PEDANTIC(err="first backoff value has to equal batch AckWait")
    if cfg.max_ack_pending == 0 and stream.consumer_limits.max_ack_pending > 0:
        raise JSErrors.PEDANTIC(err="max_ack_pending must be set if it's configured in stream limits")
    if cfg.inactive_threshold == 0 and stream.consumer_limits.inactive_threshold > 0:
        raise JSErrors.PEDANTIC(err="inactive_threshold must be set if it's configured in stream limits")
    if cfg.is_pull and cfg.max_batch == 0 and server_limits.max_request_batch > 0:
        raise JSErrors.PEDANTIC(err="max_request_batch must be set if it's JetStream limits are set")


def _priority_timeout(cfg: ConsumerConfig) -> int:
    """How long a pinned client keeps its pin without asking: negative is none, and a pinned_client
    consumer without one gets nats-server's two minutes."""
    timeout = max(cfg.priority_timeout, 0)
    if cfg.priority_policy == PRIORITY_PINNED_CLIENT and timeout == 0:
        return DEFAULT_PINNED_TTL_NS
    return timeout


def _check_priority(cfg: ConsumerConfig) -> None:
    """ADR-42's priority groups, as nats-server's checkConsumerCfg checks them."""
    if cfg.priority_policy:
        if cfg.is_push:
            raise JSErrors.CONSUMER_PUSH_WITH_PRIORITY_GROUP()
        if not cfg.priority_groups:
            raise JSErrors.CONSUMER_PRIORITY_POLICY_WITHOUT_GROUP()
        for group in cfg.priority_groups:
            if not group:
                raise JSErrors.CONSUMER_EMPTY_GROUP_NAME()
            if not is_valid_group_name(group):
                raise JSErrors.CONSUMER_INVALID_GROUP_NAME()
    else:
        if cfg.priority_groups:
            raise JSErrors.CONSUMER_PRIORITY_GROUP_WITH_POLICY_NONE()
        if cfg.priority_timeout > 0:
            raise JSErrors.CONSUMER_PINNED_TTL_WITHOUT_PRIORITY_POLICY_NONE()


def _max_batch(cfg: ConsumerConfig, server_max_request_batch: int) -> int:
    """A pull consumer without max_batch gets the server's max_request_batch, as in nats-server."""
    max_batch = max(cfg.max_batch, 0)
    if cfg.is_pull and max_batch == 0 and server_max_request_batch > 0:
        return server_max_request_batch
    return max_batch


def _check_max_ack_pending(max_ack_pending: int, limits: Iterable[int]) -> None:
    """The server's max_ack_pending, the account's, then the stream's consumer limit cap every consumer's."""
    for limit in limits:
        if 0 < limit < max_ack_pending:
            raise JSErrors.CONSUMER_MAX_PENDING_ACK_EXCESS(limit=limit)


def _check_workqueue(cfg: ConsumerConfig, others: Iterable[ConsumerConfig]) -> None:
    if cfg.ack_policy is not AckPolicy.EXPLICIT:
        if cfg.is_pull:
            raise JSErrors.CONSUMER_WQ_REQUIRES_EXPLICIT_ACK_PULL()
        raise JSErrors.CONSUMER_WQ_REQUIRES_EXPLICIT_ACK()
    if cfg.deliver_policy is not DeliverPolicy.ALL:
        raise JSErrors.CONSUMER_WQ_CONSUMER_NOT_DELIVER_ALL()
    mine = cfg.filters
    for other in others:
        theirs = other.filters
        if not mine and not theirs:
            raise JSErrors.CONSUMER_WQ_MULTIPLE_UNFILTERED()
        if not mine or not theirs or any(filters_overlap(a, b) for a in mine for b in theirs):
            raise JSErrors.CONSUMER_WQ_CONSUMER_NOT_UNIQUE()


def _update_error(existing: ConsumerConfig, new: ConsumerConfig) -> str | None:
    if existing.is_pull and new.is_push:
        return "can not update pull consumer to push based"
    if existing.is_push and new.is_pull:
        return "can not update push consumer to pull based"
    checks = (
        ("deliver_policy", "deliver policy can not be updated"),
        ("opt_start_seq", "start sequence can not be updated"),
        ("opt_start_time_ns", "start time can not be updated"),
        ("ack_policy", "ack policy can not be updated"),
        ("replay_policy", "replay policy can not be updated"),
        ("idle_heartbeat", "heart beats can not be updated"),
        ("flow_control", "flow control can not be updated"),
        ("mem_storage", "mem storage can not be updated"),
        ("deliver_group", "deliver group can not be updated"),
    )
    for attr, message in checks:
        if getattr(existing, attr) != getattr(new, attr):
            return message
    return None


def decide_create(
    action: CreateAction, existing: ConsumerConfig | None, new: ConsumerConfig
) -> ConsumerConfig | None:
    """Create, update or leave alone: the config to store, or None when nothing changes; raises ApiError.

    `new` is normalized; `existing` is the stored config of the same name, if any.
    """
    if existing is None:
        if action is CreateAction.UPDATE:
            raise JSErrors.CONSUMER_DOES_NOT_EXIST()
        return new
    if existing == new:
        return None
    if action is CreateAction.CREATE:
        raise JSErrors.CONSUMER_ALREADY_EXISTS()
    message = _update_error(existing, new)
    if message is not None:
        raise JSErrors.CONSUMER_CREATE(err=message)
    return new


def generate_consumer_name(random_bytes: bytes) -> str:
    """An 8-character ephemeral name like nats-server's, from caller-supplied randomness (>= 8 bytes)."""
    alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    return "".join(alphabet[b % len(alphabet)] for b in random_bytes[:8])


__all__ = [
    "DEFAULT_ACK_WAIT_NS",
    "DEFAULT_EPHEMERAL_INACTIVE_NS",
    "DEFAULT_MAX_ACK_PENDING",
    "DEFAULT_MAX_WAITING",
    "CreateSubject",
    "check_create_request",
    "decide_create",
    "generate_consumer_name",
    "is_valid_consumer_name",
    "normalize_consumer_config",
    "parse_create_subject",
    "required_api_level",
    "static_metadata",
]
