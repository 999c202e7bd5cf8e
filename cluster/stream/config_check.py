"""Defaults and validation of stream configs, create/update decisions.

The rules and their order follow nats-server 2.15's stream config check, so
clients get the same error for the same mistake, with three deliberate
differences:

- ADR-31: `allow_direct` defaults to true when `max_msgs_per_subject` > 0
  and the request leaves it out (nats-server defaults it to false); an
  explicit false is kept. Configs are compared after this adjustment, so an
  identical re-create still succeeds (see ../shared/spec/NOTES.md).
- Limits below -1 (-1 means unlimited) are rejected instead of being quietly
  turned into -1.
- Features jetraft does not implement (counters, fast batch publish,
  external sources and
  mirrors, copying through a durable consumer) are refused with a clear
  error (10052) rather than accepted and ignored, once nats-server's own
  checks of them passed: a config nats-server would refuse gets
  nats-server's error. docs/config-fields.md has every field's status.

There is no pedantic mode: as nats-server without it, subject delete markers
turn on `allow_msg_ttl` and roll-ups (and off `deny_purge`) by themselves, and
message schedules turn on roll-ups.

All functions are pure: the other streams' configs are passed in.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cluster.api.errors import ApiError, JSErrors
from cluster.runtime.account_limits import UNLIMITED, JetStreamAccountLimits
from cluster.runtime.server_limits import NO_SERVER_LIMITS, ServerJetStreamLimits
from cluster.stream.config import (
    DYNAMIC_METADATA_KEYS,
    REQUIRED_LEVEL_KEY,
    Discard,
    PersistMode,
    Retention,
    StorageType,
    StreamConfig,
    StreamSource,
)
from storage.nats_time import format_go_duration
from subjects.first_token_index import FirstTokenIndex
from subjects.grammar import (
    filters_overlap,
    has_wildcard,
    is_subset_filter,
    is_valid_filter,
    is_valid_subject,
)
from subjects.transform import TransformError, new_transform, validate_mapping

MAX_REPLICAS = 5
MAX_NAME_LEN = 255
MAX_DESCRIPTION_LEN = 4 * 1024
MAX_METADATA_LEN = 128 * 1024
DEFAULT_DUPLICATE_WINDOW_NS = 120 * 1_000_000_000
MIN_WINDOW_NS = 100 * 1_000_000
MIN_MARKER_TTL_NS = 1_000_000_000
_FORBIDDEN_NAME_CHARS = frozenset(" \t\r\n\f.*>\\/")
_API_NAMESPACES = ("$JS.>", "$JSC.>", "$NRG.>")


def _republish_mapping_ok(src: str, dest: str) -> bool:
    """As nats-server decides: a pair its NewSubjectTransform refuses is invalid (an empty `dest`,
    which republishes nothing, is not)."""
    try:
        new_transform(src, dest)
    except TransformError:
        return False
    return True


def is_valid_stream_name(name: str) -> bool:
    """nats-server's asset name rule: non-empty, no whitespace, `.`, `*`, `>`, `\\` or `/`."""
    return bool(name) and not any(ch in _FORBIDDEN_NAME_CHARS for ch in name)


def _invalid(message: str) -> ApiError:
    return JSErrors.STREAM_INVALID_CONFIG(err=message)


def _go_quote(text: str) -> str:
    return json.dumps(text)


def _unsupported(cfg: StreamConfig) -> str | None:
    copies = ([cfg.mirror] if cfg.mirror is not None else []) + list(cfg.sources)
    if any(copy.external is not None for copy in copies):
        return "sources and mirrors in another account or domain (external) are not supported by jetraft"
    if any(copy.consumer is not None for copy in copies):
        return "sources and mirrors through a durable consumer are not supported by jetraft"
    if cfg.allow_msg_counter:
        return "message counters are not supported by jetraft"
    if cfg.allow_batched:
        return "batch publish is not supported by jetraft"
    return None


def _limit(value: int, field: str, pedantic: bool) -> int:
    """A limit as nats-server sets it: 0 or below -1 is -1 (unlimited); pedantic mode refuses below -1."""
    if value < -1 and pedantic:
        raise JSErrors.PEDANTIC(err=f"{field} must be set to -1")
    return -1 if value == 0 or value < -1 else value


def _static_metadata(cfg: StreamConfig, allow_msg_ttl: bool) -> dict[str, str]:
    """Drop server-managed keys a client echoed back and record the API level this config needs, as
    nats-server's setStaticStreamMetadata: 1 for per-message TTLs (`allow_msg_ttl` as normalized), 2 for
    counters, atomic batches, schedules and async persistence, 4 for fast batch publishing."""
    out = {k: v for k, v in cfg.metadata.items() if k not in DYNAMIC_METADATA_KEYS}
    level = 1 if allow_msg_ttl else 0
    if cfg.allow_msg_counter or cfg.allow_atomic or cfg.allow_msg_schedules or cfg.persist_mode is PersistMode.ASYNC:
        level = 2
    if cfg.allow_batched:
        level = 4
    out[REQUIRED_LEVEL_KEY] = str(level)
    return out


def normalize_stream_config(
    requested: StreamConfig,
    streams: Mapping[str, StreamConfig] | None = None,
    limits: JetStreamAccountLimits = UNLIMITED,
    server_limits: ServerJetStreamLimits = NO_SERVER_LIMITS,
    pedantic: bool = False,
) -> StreamConfig:
    """Fill defaults as nats-server 2.15 does and validate; raises ApiError. `pedantic` (the request's
    `pedantic: true`): where nats-server would adjust the config, refuse it with its pedantic error.

    `streams` holds the other existing streams' (normalized) configs by name,
    for mirror/source checks; subject overlap with them is `check_subject_overlap`.
    `limits` are the account's (max_bytes required, and its largest value); `server_limits` the deciding
    node's (the largest duplicate window, and its default).
    """
    others = streams or {}
    cfg = requested
    check_stream_name(cfg)
    if len(cfg.name) > MAX_NAME_LEN:
        raise _invalid(f"stream name is too long, maximum allowed is {MAX_NAME_LEN}")
    if len(cfg.description) > MAX_DESCRIPTION_LEN:
        raise _invalid(f"stream description is too long, maximum allowed is {MAX_DESCRIPTION_LEN}")
    if sum(len(k) + len(v) for k, v in cfg.metadata.items()) > MAX_METADATA_LEN:
        raise _invalid(f"stream metadata exceeds maximum size of {MAX_METADATA_LEN} bytes")

    replicas = cfg.num_replicas or 1
    if replicas > MAX_REPLICAS:
        raise _invalid(f"maximum replicas is {MAX_REPLICAS}")
    if replicas < 0:
        raise JSErrors.REPLICAS_COUNT_CANNOT_BE_NEGATIVE()
    max_msgs = _limit(cfg.max_msgs, "max_msgs", pedantic)
    max_per_subject = _limit(cfg.max_msgs_per_subject, "max_msgs_per_subject", pedantic)
    max_bytes = _limit(cfg.max_bytes, "max_bytes", pedantic)
    max_msg_size = _limit(cfg.max_msg_size, "max_msg_size", pedantic)
    max_consumers = _limit(cfg.max_consumers, "max_consumers", pedantic)
    if cfg.max_age < 0:
        raise _invalid("max age can not be negative")
    if 0 < cfg.max_age < MIN_WINDOW_NS:
        raise _invalid("max age needs to be >= 100ms")

    duplicates = cfg.duplicate_window
    server_window = server_limits.duplicate_window_ns
    if duplicates == 0 and cfg.mirror is None and not cfg.sources:
        # the default, no larger than the server's limit (`jetstream { limits { duplicate_window } }`)
        window = DEFAULT_DUPLICATE_WINDOW_NS
        if 0 < server_window < window:
            if pedantic:
                raise JSErrors.PEDANTIC(err="duplicate window limits are higher than current limits")
            window = server_window
        if 0 < cfg.max_age < window and pedantic:
            raise JSErrors.PEDANTIC(err="duplicate window cannot be bigger than max age")
        duplicates = cfg.max_age if 0 < cfg.max_age < window else window
    if duplicates < 0:
        raise _invalid("duplicates window can not be negative")
    if cfg.max_age != 0 and duplicates > cfg.max_age:
        raise _invalid("duplicates window can not be larger then max age")
    if 0 < server_window < duplicates:
        raise _invalid(f"duplicates window can not be larger then server limit of {format_go_duration(server_window)}")
    if 0 < duplicates < MIN_WINDOW_NS:
        raise _invalid("duplicates window needs to be >= 100ms")
    if cfg.deny_purge and cfg.allow_rollup_hdrs:
        raise _invalid("roll-ups require the purge permission")
    _check_counters(cfg)
    if cfg.discard_new_per_subject:
        if cfg.discard is not Discard.NEW:
            raise _invalid("discard new per subject requires discard new policy to be set")
        if max_per_subject <= 0:
            raise _invalid("discard new per subject requires max msgs per subject > 0")
    marker_ttl = cfg.subject_delete_marker_ttl
    allow_msg_ttl, allow_rollup, deny_purge = cfg.allow_msg_ttl, cfg.allow_rollup_hdrs, cfg.deny_purge
    if marker_ttl > 0:
        if marker_ttl < MIN_MARKER_TTL_NS:
            raise _invalid("subject delete marker TTL must be at least 1 second")
        # markers carry a TTL and a subject roll-up, so both must be on (nats-server turns them on)
        if not allow_msg_ttl and pedantic:
            raise _invalid("subject delete marker cannot be set if message TTLs are disabled")
        allow_msg_ttl = True
        if not allow_rollup:
            if pedantic:
                raise _invalid("subject delete marker cannot be set if roll-ups are disabled")
            allow_rollup, deny_purge = True, False
    elif marker_ttl < 0:
        raise _invalid("subject delete marker TTL must not be negative")
    _check_schedules_and_persistence(cfg, replicas)
    if cfg.allow_msg_schedules and not allow_rollup:
        # schedules are stored as subject roll-ups (nats-server turns them on)
        if pedantic:
            raise _invalid("message scheduling cannot be set if roll-ups are disabled")
        allow_rollup, deny_purge = True, False
    if cfg.mirror_direct and cfg.mirror is None:
        raise _invalid("stream has no mirror but does have mirror direct")

    mirror_direct = cfg.mirror_direct
    if cfg.mirror is not None:
        mirror_direct = _check_mirror(cfg, max_msg_size, others)
        if pedantic and mirror_direct != cfg.mirror_direct:
            raise JSErrors.PEDANTIC(err="origin stream has direct get set, mirror has it disabled")
    if cfg.sources and cfg.allow_msg_schedules:
        raise JSErrors.SOURCE_WITH_MSG_SCHEDULES()
    _check_sources(cfg.sources, max_msg_size, others)
    _check_externals(cfg, others)
    _check_cycles(cfg, others)

    subjects = cfg.subjects
    if not subjects:
        if cfg.mirror is None and not cfg.sources:
            subjects = (cfg.name,)
    else:
        if cfg.mirror is not None:
            raise JSErrors.MIRROR_WITH_SUBJECTS()
        _check_own_subjects(subjects, cfg.no_ack, replicas)
    check_account_max_bytes(max_bytes, cfg.storage, limits)

    if cfg.subject_transform is not None:
        _check_transform(cfg.subject_transform.src, cfg.subject_transform.dest)
    republish = cfg.republish
    if republish is not None:
        if not republish.src:
            if pedantic:
                raise JSErrors.PEDANTIC(err="republish source can not be empty")
            republish = dataclasses.replace(republish, src=">")
        transform = cfg.subject_transform
        if (
            republish.src == ">"
            and republish.dest == ">"
            and transform is not None
            and len(subjects) == 1
            and transform.src == subjects[0]
        ):
            # nats-server's implicit republish: `>` to `>` republishes what the transform produced
            if pedantic:
                raise JSErrors.PEDANTIC(err="implicit republish based on subject transform")
            republish = dataclasses.replace(republish, src=transform.dest, dest=transform.dest)
        if any(filters_overlap(republish.dest, subject) for subject in subjects):
            raise _invalid("stream configuration for republish destination forms a cycle")
        if not _republish_mapping_ok(republish.src, republish.dest):
            raise _invalid(
                f"stream configuration for republish with transform from '{republish.src}' "
                f"to '{republish.dest}' not valid"
            )

    placement = cfg.placement
    if placement is not None and placement.is_empty:
        placement = None
    if placement is not None and placement.preferred:
        raise _invalid("preferred server not permitted in placement")
    unsupported = _unsupported(cfg)
    if unsupported:
        raise _invalid(unsupported)

    # one replace of the 50-field config (a second one for the metadata cost each create ~20 us)
    return dataclasses.replace(
        cfg,
        subjects=subjects,
        num_replicas=replicas,
        max_msgs=max_msgs,
        max_msgs_per_subject=max_per_subject,
        max_bytes=max_bytes,
        max_msg_size=max_msg_size,
        max_consumers=max_consumers,
        duplicate_window=duplicates,
        mirror_direct=mirror_direct,
        republish=republish,
        placement=placement,
        # ADR-31: a per-subject limit marks a KV-like stream, direct-readable unless the request says no
        allow_direct=cfg.allow_direct if cfg.allow_direct is not None else max_per_subject > 0,
        allow_msg_ttl=allow_msg_ttl,
        allow_rollup_hdrs=allow_rollup,
        deny_purge=deny_purge,
        metadata=_static_metadata(cfg, allow_msg_ttl),
    )


def _check_mirror(cfg: StreamConfig, max_msg_size: int, others: Mapping[str, StreamConfig]) -> bool:
    """Validate the mirror settings; returns the mirror_direct the stream gets."""
    mirror = cfg.mirror
    assert mirror is not None
    if cfg.first_seq > 0:
        raise JSErrors.MIRROR_WITH_FIRST_SEQ()
    if cfg.subjects:
        raise JSErrors.MIRROR_WITH_SUBJECTS()
    if cfg.sources:
        raise JSErrors.MIRROR_WITH_SOURCES()
    if cfg.allow_msg_counter:
        raise JSErrors.MIRROR_WITH_COUNTERS()
    if cfg.allow_atomic:
        raise JSErrors.MIRROR_WITH_ATOMIC_PUBLISH()
    if cfg.allow_batched:
        raise JSErrors.MIRROR_WITH_BATCH_PUBLISH()
    if cfg.allow_msg_schedules:
        raise JSErrors.MIRROR_WITH_MSG_SCHEDULES()
    if mirror.consumer is not None and not _consumer_source_ok(mirror):
        raise JSErrors.MIRROR_DURABLE_CONSUMER_CFG_INVALID()
    if mirror.filter_subject and mirror.subject_transforms:
        raise JSErrors.MIRROR_MULTIPLE_FILTERS_NOT_ALLOWED()
    if cfg.subject_delete_marker_ttl > 0:
        # a marker would take a sequence of its own: the mirror's sequences would leave the origin's
        raise _invalid("subject delete markers forbidden on mirrors")
    for i, transform in enumerate(mirror.subject_transforms):
        if transform.src and not is_valid_filter(transform.src):
            raise JSErrors.MIRROR_INVALID_SUBJECT_FILTER(err=f"invalid subject {transform.src}")
        error = _mapping_error(transform.src, transform.dest)
        if error is not None:
            raise JSErrors.MIRROR_INVALID_TRANSFORM_DESTINATION(err=error)
        for j, other in enumerate(mirror.subject_transforms):
            if i != j and filters_overlap(transform.src or ">", other.src or ">"):
                raise JSErrors.MIRROR_OVERLAPPING_SUBJECT_FILTERS()
    if mirror.external is not None:
        return cfg.mirror_direct
    if not is_valid_stream_name(mirror.name):
        raise JSErrors.MIRROR_INVALID_STREAM_NAME()
    origin = others.get(mirror.name)
    if origin is None:
        return cfg.mirror_direct
    if max_msg_size > 0 and origin.max_msg_size > 0 and max_msg_size < origin.max_msg_size:
        raise JSErrors.MIRROR_MAX_MESSAGE_SIZE_TOO_BIG()
    # as nats-server: a mirror serves its origin's Direct Gets exactly when the origin allows direct
    return origin.allow_direct


def _check_counters(cfg: StreamConfig) -> None:
    if not cfg.allow_msg_counter:
        return
    if cfg.discard is Discard.NEW:
        raise _invalid("counter stream cannot use discard new")
    if cfg.allow_msg_ttl:
        raise _invalid("counter stream cannot use message TTLs")
    if cfg.allow_msg_schedules:
        raise _invalid("counter stream cannot use message schedules")
    if cfg.retention is not Retention.LIMITS:
        raise _invalid("counter stream can only use limits retention")


def _check_schedules_and_persistence(cfg: StreamConfig, replicas: int) -> None:
    """nats-server's checks of settings jetraft then refuses (`_unsupported`), for its errors first."""
    if cfg.allow_msg_schedules and cfg.discard is Discard.NEW:
        raise _invalid("message scheduling cannot use discard new")
    if cfg.persist_mode is PersistMode.ASYNC:
        if cfg.storage is not StorageType.FILE:
            raise _invalid("async persist mode is only supported on file storage")
        if replicas > 1:
            raise _invalid("async persist mode is not supported on replicated streams")
        if cfg.allow_atomic:
            raise _invalid("async persist mode is not supported with atomic batch publish")


def _consumer_source_ok(source: StreamSource) -> bool:
    """nats-server's check of a mirror's or source's durable consumer (jetraft then refuses it)."""
    consumer = source.consumer
    assert consumer is not None
    deliver = consumer.deliver_subject
    return (
        is_valid_stream_name(consumer.name)
        and is_valid_subject(deliver)
        and not source.opt_start_seq
        and source.opt_start_time_ns is None
        and not source.filter_subject
    )


def _check_externals(cfg: StreamConfig, others: Mapping[str, StreamConfig]) -> None:
    """nats-server's checks of external prefixes (jetraft then refuses external sources and mirrors)."""
    copies = ([cfg.mirror] if cfg.mirror is not None else []) + list(cfg.sources)
    origin_subjects = [
        subject
        for copy in copies
        if copy.external is None and copy.name in others
        for subject in others[copy.name].subjects
    ]
    externals = [copy.external for copy in copies if copy.external is not None]
    for external in externals:
        prefix = external.deliver
        if not prefix:
            continue
        if not is_valid_subject(prefix):
            raise JSErrors.STREAM_INVALID_EXTERNAL_DELIVERY_SUBJ(prefix=prefix)
        for subject in origin_subjects:
            if filters_overlap(subject, f"{prefix}.{subject}"):
                raise JSErrors.STREAM_EXTERNAL_DEL_PREFIX_OVERLAPS(prefix=prefix, subject=subject)
    for external in externals:
        api = external.api
        if not api:
            continue
        if not is_valid_subject(api):
            raise _invalid(
                f"stream external api prefix {_go_quote(api)} must be a valid subject without wildcards"
            )
        if filters_overlap(api, "$JS.API"):
            raise JSErrors.STREAM_EXTERNAL_API_OVERLAP(prefix=api, subject="$JS.API")


def _check_sources(
    sources: Iterable[StreamSource], max_msg_size: int, others: Mapping[str, StreamConfig]
) -> None:
    seen: set[str] = set()
    consumers: set[str] = set()
    for source in sources:
        if not is_valid_stream_name(source.name):
            raise JSErrors.SOURCE_INVALID_STREAM_NAME()
        index_name = source.index_name()
        if index_name in seen:
            raise JSErrors.SOURCE_DUPLICATE_DETECTED()
        seen.add(index_name)
        if source.filter_subject and source.subject_transforms:
            raise JSErrors.SOURCE_MULTIPLE_FILTERS_NOT_ALLOWED()
        for transform in source.subject_transforms:
            if transform.src and not is_valid_filter(transform.src):
                raise JSErrors.SOURCE_INVALID_SUBJECT_FILTER(err=f"invalid subject {transform.src}")
            error = _mapping_error(transform.src, transform.dest)
            if error is not None:
                raise JSErrors.SOURCE_INVALID_TRANSFORM_DESTINATION(err=error)
        for i, transform in enumerate(source.subject_transforms):
            for j, other in enumerate(source.subject_transforms):
                if i != j and is_subset_filter(transform.src or ">", other.src or ">"):
                    raise JSErrors.SOURCE_OVERLAPPING_SUBJECT_FILTERS()
        if source.consumer is not None:
            if not _consumer_source_ok(source):
                raise JSErrors.SOURCE_DURABLE_CONSUMER_CFG_INVALID()
            consumer_key = f"{source.name} {source.consumer.name}"
            if consumer_key in consumers:
                raise JSErrors.SOURCE_DURABLE_CONSUMER_DUPLICATE_DETECTED()
            consumers.add(consumer_key)
        if source.external is None:
            origin = others.get(source.name)
            if (
                origin is not None
                and max_msg_size > 0
                and origin.max_msg_size > 0
                and max_msg_size < origin.max_msg_size
            ):
                raise JSErrors.SOURCE_MAX_MESSAGE_SIZE_TOO_BIG()


def _mapping_error(src: str, dest: str) -> str | None:
    """nats-server's ValidateMapping verdict on a transform: None, or its error text."""
    try:
        validate_mapping(src, dest)
    except TransformError as exc:
        return str(exc)
    return None


def _check_transform(src: str, dest: str) -> None:
    if src and not is_valid_filter(src):
        raise JSErrors.STREAM_TRANSFORM_INVALID_SOURCE(err=f"invalid subject {src}")
    error = _mapping_error(src, dest)
    if error is not None:
        raise JSErrors.STREAM_TRANSFORM_INVALID_DESTINATION(err=error)


def _check_cycles(cfg: StreamConfig, others: Mapping[str, StreamConfig]) -> None:
    """Refuse a config whose sources/mirror lead back to itself with overlapping subjects."""
    to_visit = [cfg]
    visited: set[str] = set()
    while to_visit:
        current = to_visit.pop(0)
        visited.add(current.name)
        for source in current.sources:
            if source.external is not None:
                continue
            if source.name in visited:
                filt = source.filter_subject
                if not filt or any(filters_overlap(subject, filt) for subject in current.subjects):
                    raise _invalid("detected cycle")
            elif source.name in others:
                to_visit.append(others[source.name])
        mirror = current.mirror
        if mirror is not None and mirror.external is None:
            if mirror.name in visited:
                raise _invalid("detected cycle")
            if mirror.name in others:
                to_visit.append(others[mirror.name])


def _check_own_subjects(subjects: tuple[str, ...], no_ack: bool, replicas: int) -> None:
    # a literal duplicate is reported by the overlap check below, as nats-server reports it
    for i, subject in enumerate(subjects):
        if not is_valid_filter(subject):
            raise _invalid("invalid subject")
        if subject == ">":
            if not no_ack:
                raise _invalid("capturing all subjects requires no-ack to be true")
            if replicas != 1:
                raise _invalid("capturing all subjects requires replicas of 1")
        if not no_ack:
            for namespace in _API_NAMESPACES:
                if filters_overlap(subject, namespace) and not is_subset_filter(subject, "$JS.EVENT.>"):
                    raise _invalid("subjects that overlap with jetstream api require no-ack to be true")
            if filters_overlap(subject, "$SYS.>") and not is_subset_filter(subject, "$SYS.ACCOUNT.>"):
                raise _invalid("subjects that overlap with system api require no-ack to be true")
        for later in subjects[i + 1 :]:
            if filters_overlap(later, subject):
                raise _invalid(f"subject {_go_quote(subject)} overlaps with {_go_quote(later)}")


def check_account_max_bytes(max_bytes: int, storage: StorageType, limits: JetStreamAccountLimits) -> None:
    """The account may require every stream to set max_bytes, and cap it by storage type."""
    largest = limits.max_stream_bytes(in_memory=storage is StorageType.MEMORY)
    if limits.max_bytes_required and max_bytes <= 0:
        raise JSErrors.STREAM_MAX_BYTES_REQUIRED()
    if largest > 0 and max_bytes > largest:
        raise JSErrors.STREAM_MAX_STREAM_BYTES_EXCEEDED()


def check_subject_overlap(
    cfg: StreamConfig, streams: Mapping[str, StreamConfig], index: FirstTokenIndex | None = None
) -> None:
    """ApiError 10065 when `cfg`'s subjects overlap another stream's (the stream itself excluded).
    `index`, if given, holds the subjects of every stream in `streams`: only the streams it names as
    candidates are compared."""
    names = streams.keys() if index is None else index.candidates(cfg.subjects)
    for name in names:
        other = streams.get(name)
        if other is None or name == cfg.name:
            continue
        for theirs in other.subjects:
            for ours in cfg.subjects:
                if filters_overlap(ours, theirs):
                    raise JSErrors.STREAM_SUBJECT_OVERLAP()


def check_stream_name(cfg: StreamConfig) -> None:
    if not is_valid_stream_name(cfg.name):
        raise _invalid("stream name is required and can not contain '.', '*', '>', '\\', '/'")


def check_request_subject(stream_in_subject: str, cfg: StreamConfig) -> None:
    """The checks on `$JS.API.STREAM.CREATE|UPDATE.<name>` before the config itself."""
    if stream_in_subject != cfg.name:
        raise JSErrors.STREAM_MISMATCH()
    if "/" in stream_in_subject or "\\" in stream_in_subject:
        raise JSErrors.STREAM_NAME_CONTAINS_PATH_SEPARATORS()


@dataclass(frozen=True, slots=True)
class CreateDecision:
    """What a STREAM.CREATE does: `config` to assign, or `exists` (identical re-create: answer, no change)."""

    config: StreamConfig
    exists: bool


def decide_create(
    requested: StreamConfig,
    streams: Mapping[str, StreamConfig],
    limits: JetStreamAccountLimits = UNLIMITED,
    subjects: FirstTokenIndex | None = None,
    server_limits: ServerJetStreamLimits = NO_SERVER_LIMITS,
    pedantic: bool = False,
) -> CreateDecision:
    """Validate a create against the existing streams (by name); raises ApiError. `subjects`: the
    streams' subjects indexed (see check_subject_overlap)."""
    if requested.sealed:
        raise _invalid("stream configuration for create can not be sealed")
    cfg = normalize_stream_config(requested, streams, limits, server_limits, pedantic)
    existing = streams.get(cfg.name)
    if existing is not None:
        if not same_config(existing, cfg):
            raise JSErrors.STREAM_NAME_EXIST()
        return CreateDecision(config=existing, exists=True)
    check_subject_overlap(cfg, streams, subjects)
    return CreateDecision(config=cfg, exists=False)


def same_config(a: StreamConfig, b: StreamConfig) -> bool:
    """Equal as configs, ignoring server-managed metadata keys."""
    if a is b:
        return True  # a new leader's check of the config it was just made with
    return _without_server_keys(a) == _without_server_keys(b)


def _without_server_keys(cfg: StreamConfig) -> StreamConfig:
    keep = {
        k: v for k, v in cfg.metadata.items() if k not in DYNAMIC_METADATA_KEYS and k != REQUIRED_LEVEL_KEY
    }
    return dataclasses.replace(cfg, metadata=keep)


def decide_update(
    old: StreamConfig,
    requested: StreamConfig,
    streams: Mapping[str, StreamConfig],
    limits: JetStreamAccountLimits = UNLIMITED,
    server_limits: ServerJetStreamLimits = NO_SERVER_LIMITS,
    pedantic: bool = False,
) -> StreamConfig:
    """The config an update results in, or ApiError for a change nats-server forbids."""
    cfg = normalize_stream_config(requested, streams, limits, server_limits, pedantic)
    if cfg.name != old.name:
        raise _invalid("stream configuration name must match original")
    if cfg.storage is not old.storage:
        raise _invalid("stream configuration update can not change storage type")
    if cfg.persist_mode is not old.persist_mode:
        raise _invalid("stream configuration update can not change persist mode")
    if cfg.retention is not old.retention and Retention.WORKQUEUE in (cfg.retention, old.retention):
        raise _invalid("stream configuration update can not change retention policy to/from workqueue")
    if old.sealed and not cfg.sealed:
        raise _invalid("stream configuration update can not unseal a sealed stream")
    if old.deny_delete and not cfg.deny_delete:
        raise _invalid("stream configuration update can not cancel deny message deletes")
    if old.deny_purge and not cfg.deny_purge:
        raise _invalid("stream configuration update can not cancel deny purge")
    # a mirror may be removed (promoting it to a normal stream) but not changed
    if cfg.mirror is not None and cfg.mirror != old.mirror:
        raise JSErrors.STREAM_MIRROR_NOT_UPDATABLE()
    if old.allow_msg_ttl and not cfg.allow_msg_ttl:
        raise _invalid("message TTL status can not be disabled")
    if old.allow_msg_schedules and not cfg.allow_msg_schedules:
        raise _invalid("message schedules can not be disabled")
    if cfg.placement != old.placement:
        # nats-server moves the stream to peers matching the new placement; jetraft does not move streams
        raise _invalid("stream placement can not be changed: jetraft does not move streams")
    if cfg.sealed:
        cfg = dataclasses.replace(
            cfg, max_age=0, discard=Discard.NEW, deny_delete=True, deny_purge=True, allow_rollup_hdrs=False
        )
    check_subject_overlap(cfg, streams)
    return cfg


def check_replicas_placeable(cfg: StreamConfig, cluster_size: int, cluster_name: str = "") -> None:
    """ApiError 10005 as a clustered nats-server answers R5 on three nodes, or a placement in a cluster
    other than this one (jetraft nodes form one cluster)."""
    elsewhere = cfg.placement is not None and cfg.placement.cluster not in ("", cluster_name)
    if cfg.num_replicas > cluster_size or elsewhere:
        raise JSErrors.CLUSTER_NO_PEERS(err="no suitable peers for placement")


def subjects_match_stream(filter_subject: str, cfg: StreamConfig) -> bool:
    """Whether STREAM.NAMES' `subject` filter selects this stream (a stream without subjects: its name)."""
    subjects = cfg.subjects or (cfg.name,)
    return any(filters_overlap(filter_subject, subject) for subject in subjects)


def stream_accepts_subject(cfg: StreamConfig, subject: str) -> bool:
    """Whether a publish on literal `subject` is stored by this stream."""
    if not is_valid_subject(subject) or has_wildcard(subject):
        return False
    return any(filters_overlap(pattern, subject) for pattern in cfg.subjects)
