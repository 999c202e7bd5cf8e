"""The meta leader's checks of a stream create or update against the nodes' own JetStream limits
(`jetstream { max_memory_store, max_file_store }`, cluster/runtime/server_limits.py).

A node without peers answers as a nats-server without a cluster: the stream's max_bytes (1 byte without
one) must fit beside what its other streams reserve, else 10028 (memory) or 10047 (file); an update adds
only what it grows by (server/stream.go configUpdateCheck). In a cluster, nats-server's meta leader checks
the account only and leaves out of placement each node without room for the stream's max_bytes
(selectPeerGroup: "insufficient storage"); `placement_room` says how much room each node has.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cluster.api.errors import ApiError, JSErrors
from cluster.meta.account_limits import reserved_bytes
from cluster.runtime.server_limits import ServerJetStreamLimits, fits_node_reservation
from cluster.stream.config import StorageType, StreamConfig


def _exceeded(in_memory: bool) -> ApiError:
    return JSErrors.MEMORY_RESOURCES_EXCEEDED() if in_memory else JSErrors.STORAGE_RESOURCES_EXCEEDED()


def _reserved(configs: Iterable[StreamConfig], in_memory: bool) -> int:
    memory, storage = reserved_bytes(configs)
    return memory if in_memory else storage


def check_node_create(cfg: StreamConfig, streams: Mapping[str, StreamConfig], limits: ServerJetStreamLimits) -> None:
    """A new stream on a node without peers, where every stream is: its max_bytes must fit."""
    in_memory = cfg.storage is StorageType.MEMORY
    reserved = _reserved((other for name, other in streams.items() if name != cfg.name), in_memory)
    if not fits_node_reservation(limits, in_memory, reserved, cfg.max_bytes):
        raise _exceeded(in_memory)


def check_node_update(
    old: StreamConfig, cfg: StreamConfig, streams: Mapping[str, StreamConfig], limits: ServerJetStreamLimits
) -> None:
    """An update on a node without peers: what it grows max_bytes by must fit (what every stream reserves,
    this one's old max_bytes included, must not be over the limit already)."""
    in_memory = cfg.storage is StorageType.MEMORY
    reserved = _reserved(streams.values(), in_memory)
    growth = max(max(cfg.max_bytes, 0) - max(old.max_bytes, 0), 0)
    if not fits_node_reservation(limits, in_memory, reserved, growth):
        raise _exceeded(in_memory)
