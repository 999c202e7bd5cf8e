"""What this node's JetStream may hold (nats-server's `jetstream { max_memory_store, max_file_store }`),
what its consumers and streams may ask for (`jetstream { limits { max_ack_pending, max_request_batch,
duplicate_window } }`), and the checks nats-server 2.15.1 makes against them. (Stream and consumer configs
are decided by the meta leader: its node's `limits` apply, as a clustered nats-server's meta leader applies
its own.)

Unlike the account's limits, these are each node's own: every node reads its own config file. As in
nats-server, they count one replica's bytes (what this node stores), never a stream's replicas times:
- a stream with max_bytes reserves that many bytes on every node that holds a replica of it; a create or
  update on a node without peers is refused (10028 memory, 10047 storage) when the bytes it adds do not fit
  beside the other streams' reservations (server/jetstream.go checkBytesLimits); in a cluster the meta
  leader leaves out of placement a node without that room (10005 "insufficient storage", selectPeerGroup);
- a publish is refused with 10023 once what the node holds already exceeds its limit: the message that
  crosses it is stored, the next one is not (server/stream.go, js.limitsExceeded).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class ServerJetStreamLimits:
    # bytes of memory / file storage this node's streams may hold; None: no limit (a node's own always has
    # them, configured or nats-server's defaults, cluster/runtime/default_limits.py; a peer may announce none)
    max_memory: int | None = None
    max_storage: int | None = None
    # `limits { max_ack_pending }`: the most a consumer may ask for, and the default's cap (0 or less: none)
    max_ack_pending: int = 0
    # `limits { max_request_batch }`: a pull consumer's default max_batch, and its cap (0 or less: none)
    max_request_batch: int = 0
    # `limits { duplicate_window }`, in nanoseconds: a stream's largest duplicate window, and its default's
    # cap (0 or less: none)
    duplicate_window_ns: int = 0

    def byte_limit(self, in_memory: bool) -> int | None:
        return self.max_memory if in_memory else self.max_storage


NO_SERVER_LIMITS = ServerJetStreamLimits()


def fits_node_reservation(limits: ServerJetStreamLimits, in_memory: bool, reserved: int, adding: int) -> bool:
    """Whether a stream's max_bytes (`adding`; -1, no max_bytes, counts as 1 byte) fits beside what the
    other streams on this node reserve (if not, nats-server answers 10028 or 10047)."""
    limit = limits.byte_limit(in_memory)
    if limit is None:
        return True
    adding = 1 if adding < 0 else adding
    return reserved <= limit and adding <= limit - reserved


def room_for(limits: ServerJetStreamLimits, in_memory: bool, reserved: int) -> int | None:
    """The bytes a node can still give a new stream's max_bytes: its limit less what its streams reserve
    (nats-server's placement takes the larger of that and what they hold; the meta leader here knows the
    reservations only). None: no limit."""
    limit = limits.byte_limit(in_memory)
    if limit is None:
        return None
    return max(limit - reserved, 0)


def node_over_limit(limits: ServerJetStreamLimits, in_memory: bool, used: int) -> bool:
    """Whether the node already holds more than its limit of this storage type (then a publish gets 10023)."""
    limit = limits.byte_limit(in_memory)
    return limit is not None and used > limit


class SiblingHoldings(Protocol):
    """On one worker of a several-worker node: what the node's other workers hold, and where this worker
    tells them what it holds (cluster/node/supervision/shared_holdings.py). The node's limits are the
    node's, as a nats-server's are its server's, whichever of its workers holds a replica."""

    def tell(self, memory: int, storage: int) -> None:
        """What this worker's replicas hold now."""
        ...

    def others(self, in_memory: bool) -> int:
        """What the other workers' replicas held when they last told."""
        ...


class NodeHoldings:
    """What this node's stream replicas hold now, by storage type, for a publish checked against the node's
    limit. Kept up to date as they change, never by reading every store at each publish (with a thousand
    streams that took milliseconds): a replica says when its store may have changed (after an apply or a
    restore) and when it goes, and only the stores that changed are read again, when next asked.

    On a worker of a several-worker node (`siblings`), what it holds is also told to its siblings, once
    per loop turn in which something changed (a follower's applies change it without any publish here
    asking), and what they hold is added to its own."""

    def __init__(self, siblings: SiblingHoldings | None = None) -> None:
        self._held: dict[object, tuple[bool, int]] = {}  # by replica: (in memory, bytes), as last read
        self._changed: dict[object, Callable[[], tuple[bool, int]]] = {}
        self._totals = {True: 0, False: 0}
        self._siblings = siblings
        self._telling = False

    def changed(self, replica: object, measure: Callable[[], tuple[bool, int]]) -> None:
        """`replica`'s store may have changed: `measure()` reads (in memory, bytes) when next asked."""
        self._changed[replica] = measure
        self._tell_soon()

    def gone(self, replica: object) -> None:
        self._changed.pop(replica, None)
        self._count(replica, None)
        self._tell_soon()

    def held(self, in_memory: bool) -> int:
        self._measure()
        own = self._totals[in_memory]
        return own if self._siblings is None else own + self._siblings.others(in_memory)

    def _measure(self) -> None:
        if self._changed:
            changed, self._changed = self._changed, {}
            for replica, measure in changed.items():
                self._count(replica, measure())

    def _tell_soon(self) -> None:
        if self._siblings is None or self._telling:
            return
        self._telling = True
        asyncio.get_running_loop().call_soon(self._tell)

    def _tell(self) -> None:
        self._telling = False
        self._measure()
        assert self._siblings is not None
        self._siblings.tell(self._totals[True], self._totals[False])

    def _count(self, replica: object, now: tuple[bool, int] | None) -> None:
        before = self._held.pop(replica, None)
        if before is not None:
            self._totals[before[0]] -= before[1]
        if now is not None:
            self._held[replica] = now
            self._totals[now[0]] += now[1]


# A node announces its limits to its peers among the labels of its route hello (gateway/routes.py carries
# them as opaque strings, beside its placement tags): the meta leader's placement reads them there.
LIMIT_LABEL_PREFIX = "$jetraft.js."
_LIMIT_LABELS = ("max_memory", "max_storage")


def limit_labels(limits: ServerJetStreamLimits) -> tuple[str, ...]:
    """The labels that announce `limits` (none for a limit not configured)."""
    return tuple(
        f"{LIMIT_LABEL_PREFIX}{label}={value}"
        for label, value in zip(_LIMIT_LABELS, (limits.max_memory, limits.max_storage), strict=True)
        if value is not None
    )


def split_labels(labels: Iterable[str]) -> tuple[frozenset[str], ServerJetStreamLimits]:
    """A node's placement tags, and the limits its labels announce (a malformed one is no limit)."""
    tags: set[str] = set()
    found: dict[str, int] = {}
    for label in labels:
        if not label.startswith(LIMIT_LABEL_PREFIX):
            tags.add(label)
            continue
        name, _, value = label[len(LIMIT_LABEL_PREFIX) :].partition("=")
        if name in _LIMIT_LABELS and value.isdigit():
            found[name] = int(value)
    return frozenset(tags), ServerJetStreamLimits(**found)
