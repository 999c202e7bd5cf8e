"""The meta leader's checks of a stream create or update against the nodes' own JetStream limits
(`jetstream { max_memory_store, max_file_store }`, cluster/runtime/server_limits.py).

A node without peers answers as a nats-server without a cluster: the stream's max_bytes (1 byte without
one) must fit beside what its other streams reserve, else 10028 (memory) or 10047 (file); an update adds
only what it grows by (server/stream.go configUpdateCheck). In a cluster, nats-server's meta leader checks
the account only and leaves out of placement each node without room for the stream's max_bytes
(selectPeerGroup: "insufficient storage"); `nodes_without_room` says which nodes those are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from cluster.api.errors import ApiError, JSErrors
from cluster.meta.account_limits import reserved_bytes
from cluster.meta.placement import NodeInfo
from cluster.runtime.server_limits import ServerJetStreamLimits, fits_node_reservation, room_for
from cluster.runtime.workers import node_of
from cluster.stream.config import StorageType, StreamConfig


def _exceeded(in_memory: bool) -> ApiError:
    return JSErrors.MEMORY_RESOURCES_EXCEEDED() if in_memory else JSErrors.STORAGE_RESOURCES_EXCEEDED()


def _reserved(configs: Iterable[StreamConfig], in_memory: bool) -> int:
    memory, storage = reserved_bytes(configs)
    return memory if in_memory else storage


def check_node_create(cfg: StreamConfig, streams: Mapping[str, StreamConfig], limits: ServerJetStreamLimits) -> None:
    """A new stream on a node without peers, where every stream is: its max_bytes must fit."""
    in_memory = cfg.storage is StorageType.MEMORY
    if limits.byte_limit(in_memory) is None:
        return  # nothing to add up
    reserved = _reserved((other for name, other in streams.items() if name != cfg.name), in_memory)
    if not fits_node_reservation(limits, in_memory, reserved, cfg.max_bytes):
        raise _exceeded(in_memory)


def check_node_update(
    old: StreamConfig, cfg: StreamConfig, streams: Mapping[str, StreamConfig], limits: ServerJetStreamLimits
) -> None:
    """An update on a node without peers: what it grows max_bytes by must fit (what every stream reserves,
    this one's old max_bytes included, must not be over the limit already)."""
    in_memory = cfg.storage is StorageType.MEMORY
    if limits.byte_limit(in_memory) is None:
        return
    reserved = _reserved(streams.values(), in_memory)
    growth = max(max(cfg.max_bytes, 0) - max(old.max_bytes, 0), 0)
    if not fits_node_reservation(limits, in_memory, reserved, growth):
        raise _exceeded(in_memory)


def _reserved_by_machine(
    streams: Mapping[str, StreamConfig], peers_of: Callable[[str], Sequence[str]], storage: StorageType, but: str
) -> dict[str, int]:
    """The max_bytes the streams of this storage type (all but `but`) reserve on each node they are on."""
    reserved: dict[str, int] = {}
    for name, other in streams.items():
        if name == but or other.storage is not storage or other.max_bytes <= 0:
            continue
        for machine in {node_of(peer) for peer in peers_of(name)}:
            reserved[machine] = reserved.get(machine, 0) + other.max_bytes
    return reserved


def nodes_without_room(
    cfg: StreamConfig,
    nodes: Iterable[NodeInfo],
    streams: Mapping[str, StreamConfig],
    peers_of: Callable[[str], Sequence[str]],
) -> frozenset[str]:
    """The nodes (machines) whose own limit leaves no room for `cfg`'s max_bytes beside the max_bytes of
    the other streams with a replica there (each reserves its max_bytes once on every node it is on). Only
    a stream with max_bytes is placed by room, as nats-server does; what a node holds beyond its
    reservations is not known to the meta leader here (nats-server also counts it, from each server's
    statsz)."""
    in_memory = cfg.storage is StorageType.MEMORY
    limited = [node for node in nodes if node.limits.byte_limit(in_memory) is not None]
    if cfg.max_bytes <= 0 or not limited:
        return frozenset()  # the common case adds up no stream's reservation
    reserved = _reserved_by_machine(streams, peers_of, cfg.storage, but=cfg.name)
    full = set()
    for node in limited:
        room = room_for(node.limits, in_memory, reserved.get(node.machine, 0))
        if room is not None and cfg.max_bytes > room:
            full.add(node.machine)
    return frozenset(full)


def check_cluster_update(
    old: StreamConfig,
    cfg: StreamConfig,
    nodes: Iterable[NodeInfo],
    streams: Mapping[str, StreamConfig],
    peers_of: Callable[[str], Sequence[str]],
) -> None:
    """An update in a cluster: what it grows max_bytes by must fit on every node with a replica of it
    (10028 or 10047). nats-server's meta leader checks its own node's reservations, wherever the stream
    is; jetraft checks the nodes the bytes are reserved on."""
    growth = max(max(cfg.max_bytes, 0) - max(old.max_bytes, 0), 0)
    in_memory = cfg.storage is StorageType.MEMORY
    mine = {node_of(peer) for peer in peers_of(cfg.name)}
    limited = [node for node in nodes if node.machine in mine and node.limits.byte_limit(in_memory) is not None]
    if not limited:
        return
    reserved = _reserved_by_machine(streams, peers_of, cfg.storage, but="")
    for node in limited:
        if not fits_node_reservation(node.limits, in_memory, reserved.get(node.machine, 0), growth):
            raise _exceeded(in_memory)
