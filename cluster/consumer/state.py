"""A consumer's replicated state, changed only by applying its Raft group's entries.

Design (issue 10, agreed with the lead):

- A consumer's *assignment* (its config, stream, peers) lives in the meta
  group. Its *state* lives in its own Raft group, named
  `C-<stream>-<consumer>`, whose peers are the stream's peers. Every replica
  applies the same entries (cluster/consumer/entries.py) in the same order,
  so every replica holds the same delivered sequences, pending acks with
  their delivery counts, ack floor and redelivery marks, and a new leader
  continues exactly where the old one stopped.
- The leader decides (cluster/consumer/delivery.py): which messages go next,
  which pending ones are due again, which have used up max_deliver. It
  proposes DELIVERED / FORGET entries; acks arriving on `$JS.ACK...` are
  proposed as ACK / NAK / PROGRESS / TERM entries.
- `apply` reads no clock and no config but the (immutable) ack policy: time
  travels in the entries. Entries an older leader proposed that no longer
  make sense (a consumer sequence already passed, an ack for a message no
  longer pending) are skipped the same way on every replica.

Numbers are nats-server's (see NOTES.md, "Consumer walkthrough"): a fresh
consumer reports delivered 0/0 (or the start position minus one); pending
acks keep the consumer sequence of their *first* delivery, which is what the
ack floor moves to; when nothing is pending after an explicit ack, the floor
jumps to the delivered position.
"""

from __future__ import annotations

import bisect
import copy
from collections.abc import Iterable
from dataclasses import dataclass, field

import orjson

from cluster.consumer.config import AckPolicy
from cluster.consumer.entries import (
    Ack,
    Acks,
    ConsumerEntry,
    Delivered,
    Forget,
    ForgetReason,
    Nak,
    Progress,
    Purged,
    Reset,
    Restored,
    Start,
    Term,
    decode_consumer_entry,
)


@dataclass(slots=True)
class PendingAck:
    """A delivered message not yet acknowledged."""

    consumer_seq: int  # of its first delivery: nats-server keeps that one for the ack floor
    ts_ns: int  # last delivery, or the last +WPI: the ack wait runs from here
    deliveries: int
    nak_at_ns: int | None = None  # after -NAK: redeliver from this time on


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """What an entry did, for the node: stream seqs acknowledged (ack or term: workqueue and interest
    retention act on them), seqs dropped without an ack (max_deliver: an advisory is due), and the stream
    sequence a RESET starts over at (interest retention checks the messages below it, which the consumer
    no longer wants)."""

    acked: tuple[int, ...] = ()
    forgotten: tuple[int, ...] = ()
    skipped: bool = False
    reset_to: int = 0


_NOTHING = ApplyResult()
# what a RESTORED entry takes from the archived state (not its ack policy or applied index: the
# consumer's own config and log decide those)
_RESTORED_FIELDS = (
    "start_seq",
    "delivered_consumer_seq",
    "delivered_stream_seq",
    "delivered_ts_ns",
    "ack_floor_consumer_seq",
    "ack_floor_stream_seq",
    "ack_floor_ts_ns",
    "pending",
    "last_per_subject",
    "lps_resume",
    "floor_on_record",
)
_SKIPPED = ApplyResult(skipped=True)


@dataclass(slots=True)
class ConsumerState:
    """The state every replica of one consumer holds (nats-server's ConsumerState, plus the start)."""

    ack_policy: AckPolicy
    started: bool = False
    start_seq: int = 0
    delivered_consumer_seq: int = 0
    delivered_stream_seq: int = 0
    delivered_ts_ns: int = 0
    ack_floor_consumer_seq: int = 0
    ack_floor_stream_seq: int = 0
    ack_floor_ts_ns: int = 0
    pending: dict[int, PendingAck] = field(default_factory=dict)
    # last_per_subject: the per-subject sequences not yet delivered, ascending, and the stream's last
    # sequence at creation, after which delivery goes on in stream order
    last_per_subject: list[int] = field(default_factory=list)
    lps_resume: int = 0
    applied_index: int = 0
    # nats-server reports a consumer's ack floor from what its store recorded, and a replicated
    # consumer's store records none at its start: it reports stream sequence 0 until an ack that moves
    # the floor, a reset or a purge writes one, while its own floor (the one a RESET goes back to) is
    # the start's
    floor_on_record: bool = True

    # -- reports --------------------------------------------------------------------------

    @property
    def reported_ack_floor_stream_seq(self) -> int:
        """The ack floor's stream sequence as consumer info shows it."""
        return self.ack_floor_stream_seq if self.floor_on_record else 0

    @property
    def num_ack_pending(self) -> int:
        return len(self.pending)

    @property
    def num_redelivered(self) -> int:
        return sum(1 for p in self.pending.values() if p.deliveries > 1)

    @property
    def next_stream_seq(self) -> int:
        """Where the search for a first delivery starts."""
        return self.delivered_stream_seq + 1

    def wants(self, stream_seq: int) -> bool:
        """Whether this consumer still has to see or ack `stream_seq` (interest retention).

        A message the consumer's filters do not match is the caller's business.
        """
        if not self.started:
            return True
        if stream_seq in self.pending:
            return True
        if stream_seq < self.start_seq:
            return False
        if self.last_per_subject and stream_seq <= self.lps_resume:
            index = bisect.bisect_left(self.last_per_subject, stream_seq)
            return index < len(self.last_per_subject) and self.last_per_subject[index] == stream_seq
        return stream_seq > self.delivered_stream_seq

    # -- the Raft driver's side -----------------------------------------------------------

    def apply(self, entries: Iterable[tuple[int, bytes]]) -> list[ApplyResult]:
        """Apply committed (index, data) pairs in order; entries at or below the applied index are replays."""
        results = []
        for index, data in entries:
            if index <= self.applied_index:
                results.append(_SKIPPED)
                continue
            self.applied_index = index
            results.append(self.apply_entry(decode_consumer_entry(data)) if data else _NOTHING)
        return results

    def apply_entry(self, entry: ConsumerEntry) -> ApplyResult:
        """Apply one decoded entry (also what the leader does to its working copy when it proposes)."""
        if isinstance(entry, Start):
            return self._start(entry)
        if isinstance(entry, Restored):
            return self._restored(entry)
        if not self.started:
            return _SKIPPED
        if isinstance(entry, Reset):
            return self._reset(entry.seq)
        if isinstance(entry, Purged):
            return self._purged(entry)
        if isinstance(entry, Delivered):
            return self._delivered(entry)
        if isinstance(entry, Ack):
            return self._ack(entry.stream_seq, entry.consumer_seq, entry.ts_ns)
        if isinstance(entry, Term):
            if self.ack_policy is AckPolicy.ALL:
                # a TERM under ack-all handles that one message only, not everything below it
                return self._ack_explicit(entry.stream_seq, entry.ts_ns)
            return self._ack(entry.stream_seq, entry.consumer_seq, entry.ts_ns)
        if isinstance(entry, Nak):
            return self._nak(entry)
        if isinstance(entry, Acks):
            return self._acks(entry)
        if isinstance(entry, Progress):
            pending = self.pending.get(entry.stream_seq)
            if pending is None:
                return _SKIPPED
            pending.ts_ns = max(pending.ts_ns, entry.ts_ns)
            pending.nak_at_ns = None
            return _NOTHING
        return self._forget(entry)

    def _acks(self, entry: Acks) -> ApplyResult:
        acked: list[int] = []
        applied = False
        for ack in entry.acks:
            result = self.apply_entry(ack)
            applied = applied or not result.skipped
            acked.extend(result.acked)
        if acked:
            return ApplyResult(acked=tuple(acked))
        return _NOTHING if applied else _SKIPPED

    def _start(self, entry: Start) -> ApplyResult:
        if self.started:
            return _SKIPPED
        self.started = True
        lps = sorted(s for s in entry.last_per_subject if s >= 1)
        first = lps[0] if lps else entry.start_seq
        self.start_seq = max(first, 1)
        self.delivered_stream_seq = self.ack_floor_stream_seq = self.start_seq - 1
        self.floor_on_record = entry.floor_on_record
        self.last_per_subject = lps
        self.lps_resume = entry.resume if lps else 0
        return _NOTHING

    def _restored(self, entry: Restored) -> ApplyResult:
        """A restored consumer starts where its snapshot left it: the archived positions, pending acks
        and their delivery counts, under its own ack policy and its own log's applied index."""
        if self.started:
            return _SKIPPED
        try:
            archived = ConsumerState.restore(entry.state)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return _SKIPPED  # every replica skips the same bytes the same way
        for name in _RESTORED_FIELDS:
            setattr(self, name, getattr(archived, name))
        self.started = True
        return _NOTHING

    def _reset(self, seq: int) -> ApplyResult:
        self.floor_on_record = True
        self.start_seq = max(seq, 1)
        self.delivered_stream_seq = self.ack_floor_stream_seq = self.start_seq - 1
        self.delivered_consumer_seq = self.ack_floor_consumer_seq = 0
        self.delivered_ts_ns = self.ack_floor_ts_ns = 0
        self.pending.clear()
        self.last_per_subject = []
        self.lps_resume = 0
        return ApplyResult(reset_to=self.start_seq)

    def _purged(self, entry: Purged) -> ApplyResult:
        """nats-server's consumer purge: the next delivery is at `start_seq` at the earliest; an ack floor
        below it moves to just before it, dropping what was pending up to there (and the `gone` ones);
        with nothing left pending both floors are the delivered positions."""
        seq = entry.start_seq
        self.floor_on_record = True
        if self.delivered_stream_seq < seq - 1:
            self._consume_position(seq - 1)
        if self.ack_floor_stream_seq < seq:
            self.ack_floor_stream_seq = seq - 1
            gone = set(entry.gone)
            for stream_seq in [s for s in self.pending if s <= seq - 1 or s in gone]:
                pending = self.pending.pop(stream_seq)
                self.ack_floor_consumer_seq = max(self.ack_floor_consumer_seq, pending.consumer_seq)
        if not self.pending:
            self.ack_floor_consumer_seq = self.delivered_consumer_seq
            self.ack_floor_stream_seq = self.delivered_stream_seq
        return _NOTHING

    def _delivered(self, entry: Delivered) -> ApplyResult:
        applied = False
        for d in entry.deliveries:
            if d.consumer_seq <= self.delivered_consumer_seq:
                continue
            if d.deliveries <= 1:
                if d.stream_seq <= self.delivered_stream_seq:
                    continue
                self._consume_position(d.stream_seq)
                if self.ack_policy is not AckPolicy.NONE:
                    self.pending[d.stream_seq] = PendingAck(d.consumer_seq, entry.ts_ns, 1)
            else:
                pending = self.pending.get(d.stream_seq)
                if pending is None:
                    continue
                pending.ts_ns = entry.ts_ns
                pending.deliveries = d.deliveries
                pending.nak_at_ns = None
            self.delivered_consumer_seq = d.consumer_seq
            applied = True
        if not applied:
            return _SKIPPED
        self.delivered_ts_ns = entry.ts_ns
        if self.ack_policy is AckPolicy.NONE:
            self.ack_floor_consumer_seq = self.delivered_consumer_seq
            self.ack_floor_stream_seq = self.delivered_stream_seq
            self.ack_floor_ts_ns = entry.ts_ns
        return _NOTHING

    def _consume_position(self, stream_seq: int) -> None:
        if self.last_per_subject:
            index = bisect.bisect_right(self.last_per_subject, stream_seq)
            del self.last_per_subject[:index]
            if not self.last_per_subject:
                # the per-subject phase is over: go on after the stream's end at creation
                stream_seq = max(stream_seq, self.lps_resume)
        self.delivered_stream_seq = max(self.delivered_stream_seq, stream_seq)

    def _ack(self, stream_seq: int, consumer_seq: int, ts_ns: int) -> ApplyResult:
        if self.ack_policy is AckPolicy.NONE:
            return _SKIPPED
        if self.ack_policy is AckPolicy.ALL:
            return self._ack_all(stream_seq, consumer_seq, ts_ns)
        return self._ack_explicit(stream_seq, ts_ns)

    def _ack_explicit(self, stream_seq: int, ts_ns: int) -> ApplyResult:
        pending = self.pending.pop(stream_seq, None)
        if pending is None:
            # a second ack, or one for a message this consumer no longer tracks: ignored, as a server does
            return _SKIPPED
        self._advance_floor(stream_seq, pending.consumer_seq, ts_ns)
        return ApplyResult(acked=(stream_seq,))

    def _advance_floor(self, stream_seq: int, consumer_seq: int, ts_ns: int) -> None:
        self.ack_floor_ts_ns = ts_ns
        if not self.pending:
            self.floor_on_record = True
            self.ack_floor_consumer_seq = self.delivered_consumer_seq
            self.ack_floor_stream_seq = self.delivered_stream_seq
            return
        if consumer_seq != self.ack_floor_consumer_seq + 1:
            return  # an ack out of order moves no floor, nor records one
        self.floor_on_record = True
        self.ack_floor_consumer_seq, self.ack_floor_stream_seq = consumer_seq, stream_seq
        # first deliveries are in stream order and only they insert, so the dict's first key is the lowest
        lowest = next(iter(self.pending))
        if lowest > stream_seq:
            self.ack_floor_consumer_seq = self.pending[lowest].consumer_seq - 1
            self.ack_floor_stream_seq = lowest - 1

    def _ack_all(self, stream_seq: int, consumer_seq: int, ts_ns: int) -> ApplyResult:
        if consumer_seq <= self.ack_floor_consumer_seq or stream_seq > self.delivered_stream_seq:
            return _SKIPPED
        acked = tuple(sorted(s for s in self.pending if s <= stream_seq))
        for seq in acked:
            del self.pending[seq]
        self.floor_on_record = True
        self.ack_floor_consumer_seq = min(consumer_seq, self.delivered_consumer_seq)
        self.ack_floor_stream_seq = stream_seq
        self.ack_floor_ts_ns = ts_ns
        if not self.pending:
            self.ack_floor_consumer_seq = self.delivered_consumer_seq
            self.ack_floor_stream_seq = self.delivered_stream_seq
        return ApplyResult(acked=acked)

    def _nak(self, entry: Nak) -> ApplyResult:
        pending = self.pending.get(entry.stream_seq)
        if pending is None:
            return _SKIPPED
        pending.nak_at_ns = entry.ts_ns + max(entry.delay_ns, 0)
        return _NOTHING

    def _forget(self, entry: Forget) -> ApplyResult:
        forgotten = []
        for seq in entry.stream_seqs:
            pending = self.pending.pop(seq, None)
            if pending is None:
                continue
            forgotten.append(seq)
            self._advance_floor(seq, pending.consumer_seq, entry.ts_ns)
        if not forgotten:
            return _SKIPPED
        if entry.reason is ForgetReason.MSG_GONE:
            return ApplyResult(acked=tuple(forgotten))
        return ApplyResult(forgotten=tuple(forgotten))

    # -- snapshots ------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """The whole state as bytes; equal states give equal bytes (pending sorted by sequence)."""
        body = {
            "ack_policy": self.ack_policy.value,
            "started": self.started,
            "start": self.start_seq,
            "delivered": [self.delivered_consumer_seq, self.delivered_stream_seq, self.delivered_ts_ns],
            "ack_floor": [self.ack_floor_consumer_seq, self.ack_floor_stream_seq, self.ack_floor_ts_ns],
            "pending": [
                [seq, p.consumer_seq, p.ts_ns, p.deliveries, p.nak_at_ns]
                for seq, p in sorted(self.pending.items())
            ],
            "lps": self.last_per_subject,
            "lps_resume": self.lps_resume,
            "applied": self.applied_index,
            "floor_on_record": self.floor_on_record,
        }
        return orjson.dumps(body)

    @classmethod
    def restore(cls, data: bytes) -> ConsumerState:
        body = orjson.loads(data)
        state = cls(AckPolicy(body["ack_policy"]))
        state.started = bool(body["started"])
        state.start_seq = int(body["start"])
        state.delivered_consumer_seq, state.delivered_stream_seq, state.delivered_ts_ns = body["delivered"]
        state.ack_floor_consumer_seq, state.ack_floor_stream_seq, state.ack_floor_ts_ns = body["ack_floor"]
        state.pending = {
            int(seq): PendingAck(int(c), int(ts), int(n), nak) for seq, c, ts, n, nak in body["pending"]
        }
        state.last_per_subject = [int(s) for s in body["lps"]]
        state.lps_resume = int(body["lps_resume"])
        state.applied_index = int(body["applied"])
        state.floor_on_record = bool(body.get("floor_on_record", True))  # snapshots from before it: True
        return state

    def clone(self) -> ConsumerState:
        """An independent copy: the leader's working state (committed state plus its own proposals)."""
        return copy.deepcopy(self)


__all__ = ["ApplyResult", "ConsumerState", "PendingAck"]
