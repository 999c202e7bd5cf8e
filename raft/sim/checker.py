"""Raft's safety properties, checked incrementally while the simulation runs.

- Election safety: at most one leader per term.
- Log matching: two persisted logs with an entry of the same index and term
  are identical up to it (checked with a hash chain per persisted log).
- Leader completeness: an entry acknowledged as committed is in the log of
  every leader of a later term.
- State machine safety: every replica applies the same entry at each index,
  in order, without gaps (hash chain of the applied sequence).
- No acknowledged entry lost: follows from the two above, plus the final
  convergence check in the simulation.
- ReadIndex freshness: a read index covers every entry committed anywhere
  before the read was requested.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from raft.sim.state_machine import chain
from raft.types import Entry, Snapshot


class SafetyViolation(Exception):
    """A Raft safety property failed; the message says which and where."""


@dataclass(slots=True)
class PersistedLog:
    """One node's persisted log as a hash chain, for the log-matching check."""

    base_index: int = 0
    base_chain: bytes | None = bytes(16)  # None: unknown (never seen the snapshot's entry)
    chains: list[bytes] = field(default_factory=list)  # chains[k] is for index base_index + 1 + k
    terms: list[int] = field(default_factory=list)

    def last_index(self) -> int:
        return self.base_index + len(self.chains)

    def chain_at(self, index: int) -> bytes | None:
        if index == self.base_index:
            return self.base_chain
        if self.base_index < index <= self.last_index():
            return self.chains[index - self.base_index - 1]
        return None


class SafetyChecker:
    def __init__(self) -> None:
        self.leaders_by_term: dict[int, str] = {}
        # (index, term) -> hash chain of the log up to that entry, over every log ever persisted
        self._log_chains: dict[tuple[int, int], bytes] = {}
        self._persisted: dict[str, PersistedLog] = {}
        # acknowledged (applied somewhere) entries: index -> (term, state-machine digest)
        self.acked: dict[int, tuple[int, bytes]] = {}
        self.max_acked = 0
        # for leader completeness: acked indexes in order with the highest term
        # any node had when each was first acknowledged
        self._ack_indexes: list[int] = []
        self._ack_max_terms: list[int] = []
        self.reads_checked = 0

    # --- election safety ---

    def on_leader(self, node_id: str, term: int) -> bool:
        """Record a leader; True if it is new for this term."""
        known = self.leaders_by_term.get(term)
        if known is None:
            self.leaders_by_term[term] = node_id
            return True
        if known != node_id:
            raise SafetyViolation(f"election safety: {known} and {node_id} both lead term {term}")
        return False

    # --- log matching ---

    def on_persist(self, node_id: str, snapshot: Snapshot | None, entries: tuple[Entry, ...]) -> None:
        log = self._persisted.setdefault(node_id, PersistedLog())
        if snapshot is not None:
            log.base_index = snapshot.index
            log.base_chain = self._log_chains.get((snapshot.index, snapshot.term))
            log.chains = []
            log.terms = []
        if not entries:
            return
        first = entries[0].index
        if first <= log.base_index:
            raise SafetyViolation(f"{node_id} persisted entry {first} below its snapshot at {log.base_index}")
        if first > log.last_index() + 1:
            raise SafetyViolation(f"{node_id} persisted entry {first} after a gap (last {log.last_index()})")
        keep = first - log.base_index - 1
        del log.chains[keep:]
        del log.terms[keep:]
        previous = log.chain_at(first - 1)
        for entry in entries:
            if previous is None:
                log.chains.append(b"")
                log.terms.append(entry.term)
                continue
            current = chain(previous, entry)
            key = (entry.index, entry.term)
            known = self._log_chains.setdefault(key, current)
            if known != current:
                raise SafetyViolation(
                    f"log matching: {node_id}'s entry {entry.index} (term {entry.term}) "
                    "has a different prefix or payload than another log's entry with that index and term"
                )
            log.chains.append(current)
            log.terms.append(entry.term)
            previous = current

    def on_lost_tail(self, node_id: str, last_index: int) -> None:
        """The node's disk lost every entry after `last_index`."""
        log = self._persisted.get(node_id)
        if log is not None and last_index >= log.base_index:
            del log.chains[last_index - log.base_index :]
            del log.terms[last_index - log.base_index :]
        elif log is not None:
            self.forget(node_id)

    def forget(self, node_id: str) -> None:
        """The node lost its disk (it is gone for good)."""
        self._persisted.pop(node_id, None)

    # --- state machine safety ---

    def on_apply(
        self, node_id: str, entry: Entry, applied_before: int, digest_after: bytes, max_term: int
    ) -> None:
        if entry.index != applied_before + 1:
            raise SafetyViolation(
                f"state machine safety: {node_id} applied entry {entry.index} right after {applied_before}"
            )
        known = self.acked.get(entry.index)
        if known is None:
            if entry.index != self.max_acked + 1:
                raise SafetyViolation(
                    f"{node_id} applied entry {entry.index} first, but only {self.max_acked} were acknowledged"
                )
            self.acked[entry.index] = (entry.term, digest_after)
            self.max_acked = entry.index
            self._ack_indexes.append(entry.index)
            self._ack_max_terms.append(max_term)
        elif known != (entry.term, digest_after):
            raise SafetyViolation(
                f"state machine safety: {node_id} applied a different entry {entry.index} "
                f"(term {entry.term}) than was acknowledged (term {known[0]})"
            )

    def on_restore(self, node_id: str, index: int, digest: bytes) -> None:
        if index == 0:
            return
        known = self.acked.get(index)
        if known is None:
            raise SafetyViolation(f"{node_id} restored a snapshot at {index} beyond anything acknowledged")
        if known[1] != digest:
            raise SafetyViolation(f"state machine safety: {node_id}'s snapshot at {index} differs")

    # --- leader completeness ---

    def index_a_leader_must_hold(self, term: int) -> int:
        """The highest acked index a leader of `term` must hold (0 if none): an entry
        acknowledged while every node's term was below `term` was committed in an earlier term."""
        pos = bisect.bisect_left(self._ack_max_terms, term)
        return self._ack_indexes[pos - 1] if pos else 0

    def verify_leader_has(
        self, node_id: str, term: int, index: int, term_in_log: int, first_index: int
    ) -> None:
        if index < first_index - 1:
            return  # compacted into a snapshot, which holds only committed entries
        expected = self.acked[index][0]
        if term_in_log != expected:
            raise SafetyViolation(
                f"leader completeness: {node_id}, leader of term {term}, has term {term_in_log} at "
                f"index {index} where the acknowledged entry has term {expected}"
            )

    # --- ReadIndex ---

    def on_read(self, node_id: str, ctx: bytes, read_index: int, committed_at_request: int) -> None:
        if read_index < committed_at_request:
            raise SafetyViolation(
                f"stale read: {node_id}'s read {ctx!r} got index {read_index}, but {committed_at_request} "
                "was already committed when it was requested"
            )
        self.reads_checked += 1
