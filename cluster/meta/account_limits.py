"""The meta leader's checks of a stream create or update against the account's JetStream limits.

As nats-server (server/jetstream.go checkBytesLimits, jetstream_cluster.go jsClusteredStreamLimitsCheck):
a stream with max_bytes reserves that many bytes times its replicas (the limits are not tiered, so
they count every replica) of its storage type's account limit, whether or not they are used yet; a
stream without max_bytes reserves nothing but must still find one byte free.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cluster.api.errors import ApiError, JSErrors
from cluster.runtime.account_limits import JetStreamAccountLimits
from cluster.stream.config import StorageType, StreamConfig


def reserved_bytes(configs: Iterable[StreamConfig]) -> tuple[int, int]:
    """ACCOUNT INFO's (reserved_memory, reserved_storage): the max_bytes the streams set, once each."""
    memory = storage = 0
    for cfg in configs:
        if cfg.max_bytes > 0:
            if cfg.storage is StorageType.MEMORY:
                memory += cfg.max_bytes
            else:
                storage += cfg.max_bytes
    return memory, storage


def _reservation(replicas: int, max_bytes: int) -> int:
    return max(replicas, 1) * max_bytes if max_bytes > 0 else 0


def _reserved_by_others(cfg: StreamConfig, streams: Mapping[str, StreamConfig]) -> int:
    return sum(
        _reservation(other.num_replicas, other.max_bytes)
        for name, other in streams.items()
        if name != cfg.name and other.storage is cfg.storage
    )


def _exceeded(storage: StorageType) -> ApiError:
    if storage is StorageType.MEMORY:
        return JSErrors.MEMORY_RESOURCES_EXCEEDED()
    return JSErrors.STORAGE_RESOURCES_EXCEEDED()


def _byte_limit(cfg: StreamConfig, limits: JetStreamAccountLimits) -> int:
    return limits.max_memory if cfg.storage is StorageType.MEMORY else limits.max_storage


def _check_bytes(cfg: StreamConfig, reserved: int, adding: int, limits: JetStreamAccountLimits) -> None:
    limit = _byte_limit(cfg, limits)
    if limit >= 0 and (reserved > limit or adding > limit - reserved):
        raise _exceeded(cfg.storage)


def check_create_limits(
    cfg: StreamConfig, streams: Mapping[str, StreamConfig], limits: JetStreamAccountLimits
) -> None:
    """A new stream against the account's stream count, consumer cap and storage; ApiError if over."""
    others = len(streams) - (cfg.name in streams)
    if limits.max_streams > 0 and others >= limits.max_streams:
        raise JSErrors.MAXIMUM_STREAMS_LIMIT()
    check_config_limits(cfg, streams, limits)


def check_config_limits(
    cfg: StreamConfig, streams: Mapping[str, StreamConfig], limits: JetStreamAccountLimits
) -> None:
    """The stream's own max_consumers and the bytes it reserves, on create (the stream count aside)."""
    if 0 < limits.max_consumers < cfg.max_consumers:
        raise JSErrors.CONSUMER_MAX_CONSUMERS_LIMIT()
    if _byte_limit(cfg, limits) < 0:
        return  # no limit on this storage: nothing to add up (every other stream's reservation)
    adding = _reservation(cfg.num_replicas, cfg.max_bytes if cfg.max_bytes >= 0 else 1)
    _check_bytes(cfg, _reserved_by_others(cfg, streams), adding, limits)


def check_update_limits(
    old: StreamConfig, cfg: StreamConfig, streams: Mapping[str, StreamConfig], limits: JetStreamAccountLimits
) -> None:
    """An update against the account's storage: the bytes it adds to its reservation must be free."""
    if 0 < limits.max_consumers < cfg.max_consumers:
        raise JSErrors.CONSUMER_MAX_CONSUMERS_LIMIT()
    growth = max(max(cfg.max_bytes, 0) - max(old.max_bytes, 0), 0)
    reserved = _reserved_by_others(cfg, streams) + _reservation(cfg.num_replicas, cfg.max_bytes - growth)
    _check_bytes(cfg, reserved, _reservation(cfg.num_replicas, growth), limits)
