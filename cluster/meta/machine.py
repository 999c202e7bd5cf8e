"""The meta group's replicated state: which streams exist and which nodes host them.

Entries are an op-code byte followed by a JSON body; op codes are only ever
appended (an old log must keep replaying the same way). Every node applies
the same entries in the same order and then reconciles: it starts the Raft
groups of the streams it hosts and stops the others.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from cluster.consumer.assignment import ConsumerAssignment
from cluster.stream.assignment import StreamAssignment


class MetaOp(enum.IntEnum):
    ASSIGN_STREAM = 1
    UPDATE_STREAM = 2
    REMOVE_STREAM = 3
    SET_STREAM_PEERS = 4
    ASSIGN_CONSUMER = 5
    REMOVE_CONSUMER = 6


def encode_meta_entry(op: MetaOp, body: dict[str, Any]) -> bytes:
    return bytes([op]) + orjson.dumps(body)


@dataclass(slots=True)
class MetaResult:
    ok: bool
    error: str | None = None
    assignment: StreamAssignment | None = None


ChangeListener = Callable[[str, StreamAssignment | None], None]


@dataclass
class MetaMachine:
    """Deterministic meta state; `listeners` hear (stream name, assignment or None when removed)."""

    streams: dict[str, StreamAssignment] = field(default_factory=dict)
    # stream name -> consumer name -> assignment
    consumers: dict[str, dict[str, ConsumerAssignment]] = field(default_factory=dict)
    listeners: list[ChangeListener] = field(default_factory=list)
    # kept up to date by every change of a stream's peers, so placing a stream does not count them all
    _load: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)
    _first: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._recount()

    def load(self) -> dict[str, int]:
        """Streams per node, for placement."""
        return dict(self._load)

    def first_peers(self) -> dict[str, int]:
        """Streams per node that list it as their first peer (the one that stands for leader first)."""
        return dict(self._first)

    def _recount(self) -> None:
        self._load, self._first = {}, {}
        for assignment in self.streams.values():
            self._count(assignment.peers, 1)

    def _count(self, peers: list[str], delta: int) -> None:
        for counts, counted in ((self._load, peers), (self._first, peers[:1])):
            for peer in counted:
                total = counts.get(peer, 0) + delta
                if total:
                    counts[peer] = total
                else:
                    del counts[peer]

    def apply(self, data: bytes) -> MetaResult:
        if not data:
            return MetaResult(ok=True)  # the empty entry a new leader commits
        try:
            op = MetaOp(data[0])
        except ValueError:
            # an entry from a newer version; skipping keeps every replica in step
            return MetaResult(ok=False, error=f"unknown meta op {data[0]}")
        body = orjson.loads(data[1:])
        if op in (MetaOp.ASSIGN_CONSUMER, MetaOp.REMOVE_CONSUMER):
            return self._apply_consumer(op, body)
        name = body["name"]
        existing = self.streams.get(name)
        if op is MetaOp.ASSIGN_STREAM:
            if existing is not None:
                return MetaResult(ok=False, error="stream name already in use", assignment=existing)
            assignment = StreamAssignment.from_json(body)
            self.streams[name] = assignment
            self._count(assignment.peers, 1)
            self._notify(name, assignment)
            return MetaResult(ok=True, assignment=assignment)
        if existing is None:
            return MetaResult(ok=False, error="stream not found")
        if op is MetaOp.UPDATE_STREAM:
            existing.config = body["config"]
            if "peers" in body:  # a change of num_replicas: the stream's new peer set comes with it
                self._rescale_consumers(name, existing.peers, list(body["peers"]))
                self._count(existing.peers, -1)
                existing.peers = list(body["peers"])
                self._count(existing.peers, 1)
                existing.epoch += 1
        elif op is MetaOp.SET_STREAM_PEERS:
            self._move_consumers(name, existing.peers, list(body["peers"]))
            self._count(existing.peers, -1)
            existing.peers = list(body["peers"])
            self._count(existing.peers, 1)
            existing.epoch += 1
        elif op is MetaOp.REMOVE_STREAM:
            self._count(existing.peers, -1)
            del self.streams[name]
            self.consumers.pop(name, None)
            self._notify(name, None)
            return MetaResult(ok=True)
        self._notify(name, existing)
        return MetaResult(ok=True, assignment=existing)

    def _move_consumers(self, stream: str, old: list[str], new: list[str]) -> None:
        """A stream's peer replaced (STREAM.PEER.REMOVE): its consumers' replicas follow, peer for peer,
        in the same entry, so a consumer's group always lives where its stream's replicas are."""
        replaced = {before: after for before, after in zip(old, new, strict=False) if before != after}
        for consumer in self.consumers.get(stream, {}).values():
            if any(peer in replaced for peer in consumer.peers):
                consumer.peers = [replaced.get(peer, peer) for peer in consumer.peers]
                consumer.epoch += 1

    def _rescale_consumers(self, stream: str, old: list[str], new: list[str]) -> None:
        """A stream scaled from `old` to `new` peers: its consumers follow in the same entry, as nats-server's
        do, each to as many replicas as it would have if made now (cluster/meta/consumers.py: its own
        num_replicas, no more than the stream's; else one for an ephemeral or memory consumer, the
        stream's for a durable), keeping its peers that stay (a num_replicas above the stream's comes
        down to it in its config)."""
        for consumer in self.consumers.get(stream, {}).values():
            config = consumer.config
            own = config.get("num_replicas") or 0
            if own:
                wanted = min(own, len(new))
            elif config.get("mem_storage") or not config.get("durable_name"):
                wanted = 1
            else:
                wanted = len(new)
            peers = [peer for peer in consumer.peers if peer in new]
            peers += [peer for peer in new if peer not in peers]
            peers = peers[:wanted]
            if own > len(new):
                consumer.config = {**consumer.config, "num_replicas": len(new)}
            if peers != consumer.peers:
                consumer.peers = peers
                consumer.epoch += 1

    def _apply_consumer(self, op: MetaOp, body: dict[str, Any]) -> MetaResult:
        stream = body["stream"]
        if stream not in self.streams:
            return MetaResult(ok=False, error="stream not found")
        consumers = self.consumers.setdefault(stream, {})
        if op is MetaOp.ASSIGN_CONSUMER:
            # create or update: an update keeps the consumer's group and replicas
            existing = consumers.get(body["name"])
            if existing is not None:
                existing.config = body["config"]
            else:
                consumers[body["name"]] = ConsumerAssignment.from_json(body)
        elif consumers.pop(body["name"], None) is None:
            return MetaResult(ok=False, error="consumer not found")
        self._notify(stream, self.streams[stream])
        return MetaResult(ok=True)

    def snapshot(self) -> bytes:
        return orjson.dumps(
            {
                "streams": [a.to_json() for a in self.streams.values()],
                "consumers": [c.to_json() for by_name in self.consumers.values() for c in by_name.values()],
            }
        )

    def restore(self, data: bytes) -> None:
        previous = set(self.streams)
        body = orjson.loads(data)
        self.streams = {a["name"]: StreamAssignment.from_json(a) for a in body.get("streams", [])}
        self._recount()
        self.consumers = {}
        for raw in body.get("consumers", []):
            consumer = ConsumerAssignment.from_json(raw)
            self.consumers.setdefault(consumer.stream, {})[consumer.name] = consumer
        for name in previous - set(self.streams):
            self._notify(name, None)
        for name, assignment in self.streams.items():
            self._notify(name, assignment)

    def _notify(self, name: str, assignment: StreamAssignment | None) -> None:
        for listener in self.listeners:
            listener(name, assignment)
