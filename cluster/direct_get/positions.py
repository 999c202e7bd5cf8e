"""The stream leaders' positions, for their followers' Direct Get staleness: one beacon per node, for all.

A follower's staleness is an upper bound on how far its copy is behind the leader: a follower that has
applied everything the leader had at time T is at most `now - T` behind (see staleness.py). Each node
publishes one beacon on `$JSR.BEACON` every 0.5 s (every 50 ms while a stream here has a staleness
bound), which the route mesh carries once to each peer: its wall clock, and the position of each stream
it leads that moved since its previous beacon, or that it stopped leading. Nothing for a stream whose
position did not move, so idle streams cost no bytes and no work: a position a node announced stays its
*claim*, true as of that node's latest beacon, until a later beacon changes it. A receiver may rely on
that only if it saw every beacon since, so beacons are numbered (with a random epoch per node start):
after a gap, or a node's restart, the receiver turns the sender's claims into facts as of the last
beacon it had, and asks on `$JSR.BEACON.RESYNC` for a full beacon (every stream the sender leads).

A mirror's leader is itself behind its origin; its streams are sent in every beacon with their own
freshness (`as_of_ns`), never as claims. Beacons travel the same links as the Raft appends, so latency
on a follower's link shows up as staleness, which is what a client reading from it would see.

`PositionSender` and `PositionBoard` are sans-IO: what a node says, and what it learned. A follower's
staleness is computed from the board when asked (a Direct Get's bound, a metrics scrape), not by a task
per replica. (Clocks are assumed synchronized, as on one machine or with NTP.)
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from cluster.direct_get.staleness import WINDOW_NS

BEACON_SUBJECT = "$JSR.BEACON"
RESYNC_SUBJECT = "$JSR.BEACON.RESYNC"
# Each replica of a stream subscribes here while it runs, though nothing is published on it: the meta
# leader acknowledges a stream's delete once no node has that subscription left (the route mesh tells it).
PRESENCE_PREFIX = "$JSR.POS."

# sender name length, epoch, number, sent_ns, full, entry count
_HEADER = struct.Struct(">HQQQBI")
# stream name length, last_seq (NOT_LED: the sender no longer leads it), as_of_ns (0: the beacon's time)
_ENTRY = struct.Struct(">HqQ")
NOT_LED = -1


def presence_subject(stream: str) -> str:
    return PRESENCE_PREFIX + stream


@dataclass(frozen=True, slots=True)
class Position:
    stream: str
    last_seq: int  # NOT_LED: the sender stopped leading the stream
    as_of_ns: int = 0  # a copy's own freshness; 0 for a stream whose leader is its source (the beacon's time)


@dataclass(frozen=True, slots=True)
class Beacon:
    sender: str
    epoch: int
    number: int
    sent_ns: int
    full: bool
    positions: tuple[Position, ...]


def encode_beacon(beacon: Beacon) -> bytes:
    sender = beacon.sender.encode()
    parts = [
        _HEADER.pack(
            len(sender), beacon.epoch, beacon.number, beacon.sent_ns, beacon.full, len(beacon.positions)
        ),
        sender,
    ]
    for position in beacon.positions:
        name = position.stream.encode()
        parts.append(_ENTRY.pack(len(name), position.last_seq, position.as_of_ns))
        parts.append(name)
    return b"".join(parts)


def decode_beacon(payload: bytes) -> Beacon | None:
    """The beacon, or None for anything malformed."""
    try:
        sender_len, epoch, number, sent_ns, full, count = _HEADER.unpack_from(payload, 0)
        at = _HEADER.size
        sender = payload[at : at + sender_len].decode()
        at += sender_len
        positions = []
        for _ in range(count):
            name_len, last_seq, as_of_ns = _ENTRY.unpack_from(payload, at)
            at += _ENTRY.size
            name = payload[at : at + name_len]
            if len(name) != name_len:
                return None
            at += name_len
            positions.append(Position(name.decode(), last_seq, as_of_ns))
    except (struct.error, UnicodeDecodeError):
        return None
    if at != len(payload) or len(sender) != sender_len:
        return None
    return Beacon(sender, epoch, number, sent_ns, bool(full), tuple(positions))


@dataclass(frozen=True, slots=True)
class LedStream:
    """A stream this node leads, as its beacons see it."""

    last_seq: Callable[[], int]
    # how far the leader's data is behind where it comes from (a mirror's origin); None when it is the source
    behind_ns: Callable[[], int] | None = None
    # a staleness bound is set (jetraft.max_direct_lag): beacons go every 50 ms (lead it again on a change)
    bounded: bool = False


class PositionSender:
    """What this node's next beacon says: the streams it leads that moved, or that it stopped leading."""

    def __init__(self, sender: str, epoch: int) -> None:
        self.sender = sender
        self.epoch = epoch
        self._number = 0
        self._led: dict[str, LedStream] = {}
        self._copies: set[str] = set()  # led streams with their own freshness: sent in every beacon
        self._bounded: set[str] = set()
        self._moved: set[str] = set()
        self._gone: set[str] = set()
        self._full_next = True  # a node's first beacon tells everything

    def lead(self, stream: str, led: LedStream) -> None:
        self._led[stream] = led
        self._gone.discard(stream)
        self._moved.add(stream)
        if led.behind_ns is not None:
            self._copies.add(stream)
        else:
            self._copies.discard(stream)
        if led.bounded:
            self._bounded.add(stream)
        else:
            self._bounded.discard(stream)

    def unlead(self, stream: str) -> None:
        if self._led.pop(stream, None) is not None:
            self._moved.discard(stream)
            self._copies.discard(stream)
            self._bounded.discard(stream)
            self._gone.add(stream)

    def moved(self, stream: str) -> None:
        """The stream applied entries here while this node leads it."""
        if stream in self._led:
            self._moved.add(stream)

    def resync(self) -> None:
        """A receiver missed a beacon: the next one tells everything."""
        self._full_next = True

    def bounded(self) -> bool:
        """Whether a stream led here has a staleness bound (then beacons go every 50 ms)."""
        return bool(self._bounded)

    def next_beacon(self, now_ns: int) -> Beacon:
        full = self._full_next
        names = self._led.keys() if full else self._moved | self._copies
        positions = [self._position(name, now_ns) for name in sorted(names) if name in self._led]
        if not full:
            positions.extend(Position(name, NOT_LED) for name in sorted(self._gone))
        self._full_next = False
        self._moved.clear()
        self._gone.clear()
        self._number += 1
        return Beacon(self.sender, self.epoch, self._number, now_ns, full, tuple(positions))

    def _position(self, stream: str, now_ns: int) -> Position:
        led = self._led[stream]
        if led.behind_ns is None:
            return Position(stream, led.last_seq())
        # a copy's leader is itself behind its origin: its followers inherit that staleness
        return Position(stream, led.last_seq(), max(now_ns - led.behind_ns(), 1))


@dataclass(slots=True)
class _Sender:
    epoch: int
    number: int
    last_ns: int  # the latest beacon's time: every claim of this sender holds as of then
    claims: set[str] = field(default_factory=set)
    # every beacon heard since its last full one (or its first): its claims cover all it leads
    synced: bool = True


@dataclass(slots=True)
class _Claim:
    last_seq: int
    since_ns: int


@dataclass(slots=True)
class _StreamPositions:
    # (time, leader's last_seq): the leader had that sequence then; sorted by time
    facts: list[tuple[int, int]] = field(default_factory=list)
    claims: dict[str, _Claim] = field(default_factory=dict)  # by sender


class PositionBoard:
    """The leaders' positions as this node heard them, and the staleness of a follower here from them."""

    def __init__(self, me: str) -> None:
        self.me = me
        self._senders: dict[str, _Sender] = {}
        self._streams: dict[str, _StreamPositions] = {}
        # streams with a replica here: their positions are kept however old (see `sweep`)
        self._watched: set[str] = set()
        # streams nobody claims any more: `sweep` looks at these only
        self._unclaimed: set[str] = set()

    def watch(self, stream: str) -> None:
        self._watched.add(stream)

    def unwatch(self, stream: str) -> None:
        self._watched.discard(stream)

    def receive(self, beacon: Beacon) -> bool:
        """Take a beacon in; True while the receiver has missed some of its sender's since its last
        full one, and should ask for another (what the sender's unchanged streams are is unknown)."""
        if beacon.sender == self.me:
            return False
        sender = self._senders.get(beacon.sender)
        missed = False
        if sender is None or sender.epoch != beacon.epoch:
            if sender is not None:
                self._drop_claims(beacon.sender, sender, sender.claims)
            sender = self._senders[beacon.sender] = _Sender(beacon.epoch, 0, 0)
            missed = beacon.number != 1
        elif beacon.number <= sender.number:
            return False  # late or repeated
        elif beacon.number != sender.number + 1:
            missed = True
        if missed:
            # what it claimed held as of the last beacon heard, no later: a change may have been lost
            self._drop_claims(beacon.sender, sender, sender.claims)
            sender.synced = False
        if beacon.full:
            told = {position.stream for position in beacon.positions}
            self._drop_claims(beacon.sender, sender, sender.claims - told)
            sender.synced = True
        for position in beacon.positions:
            self._take(beacon.sender, sender, position, beacon.sent_ns)
        sender.number = beacon.number
        sender.last_ns = max(sender.last_ns, beacon.sent_ns)
        return not sender.synced

    def _take(self, name: str, sender: _Sender, position: Position, sent_ns: int) -> None:
        stream = self._streams.get(position.stream)
        if stream is None:
            if position.last_seq == NOT_LED:
                return
            stream = self._streams[position.stream] = _StreamPositions()
        claim = stream.claims.get(name)
        if claim is not None and position.as_of_ns == 0 and claim.last_seq == position.last_seq:
            return  # the same claim again (a full beacon)
        if claim is not None:
            # the old claim held as of the sender's previous beacon
            del stream.claims[name]
            sender.claims.discard(position.stream)
            _add_fact(stream, sender.last_ns, claim.last_seq)
        if position.last_seq != NOT_LED and position.as_of_ns:
            _add_fact(stream, position.as_of_ns, position.last_seq)
        elif position.last_seq != NOT_LED:
            stream.claims[name] = _Claim(position.last_seq, sent_ns)
            sender.claims.add(position.stream)
        if stream.claims:
            self._unclaimed.discard(position.stream)
        else:
            self._unclaimed.add(position.stream)

    def _drop_claims(self, name: str, sender: _Sender, streams: set[str]) -> None:
        for stream_name in list(streams):
            stream = self._streams.get(stream_name)
            claim = stream.claims.pop(name, None) if stream is not None else None
            if stream is not None and claim is not None:
                _add_fact(stream, sender.last_ns, claim.last_seq)
                if not stream.claims:
                    self._unclaimed.add(stream_name)
            sender.claims.discard(stream_name)

    def staleness_ns(self, stream: str, applied_seq: int, now_ns: int, started_ns: int) -> int:
        """An upper bound on how far behind its leader a follower of `stream` is that applied
        `applied_seq`: now less the latest time the leader was known to have no more than that. Behind
        everything known, or knowing nothing, it counts as at least as stale as the window (the safe side)."""
        positions = self._streams.get(stream)
        if positions is None:
            return max(now_ns - started_ns, 0) + WINDOW_NS
        facts = positions.facts
        horizon = now_ns - WINDOW_NS
        dropped = 0
        while dropped < len(facts) - (0 if positions.claims else 1) and facts[dropped][0] < horizon:
            dropped += 1
        if dropped:
            del facts[:dropped]
        newest: int | None = None
        for sender_name, claim in positions.claims.items():
            if claim.last_seq <= applied_seq:
                as_of = self._senders[sender_name].last_ns
                newest = as_of if newest is None else max(newest, as_of)
        for as_of, last_seq in reversed(facts):
            if newest is not None and as_of <= newest:
                break
            if last_seq <= applied_seq:
                newest = as_of
                break
        if newest is not None:
            return max(now_ns - newest, 0)
        known = [as_of for as_of, _ in facts[:1]] + [claim.since_ns for claim in positions.claims.values()]
        return max(now_ns - min(known, default=started_ns), 0) + WINDOW_NS

    def sweep(self, now_ns: int) -> None:
        """Forget streams no replica here follows, nobody claims, and nothing recent is known of (a
        deleted stream, one placed elsewhere)."""
        horizon = now_ns - WINDOW_NS
        for name in list(self._unclaimed):
            positions = self._streams.get(name)
            if positions is None or positions.claims:
                self._unclaimed.discard(name)
            elif name not in self._watched and (not positions.facts or positions.facts[-1][0] < horizon):
                del self._streams[name]
                self._unclaimed.discard(name)

    def known_streams(self) -> int:
        return len(self._streams)


def _add_fact(stream: _StreamPositions, as_of_ns: int, last_seq: int) -> None:
    facts = stream.facts
    if facts and facts[-1][0] <= as_of_ns:
        facts.append((as_of_ns, last_seq))
    else:
        bisect.insort(facts, (as_of_ns, last_seq))
