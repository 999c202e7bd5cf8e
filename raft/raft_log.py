"""The core's view of the log: the host's stable storage plus an unstable tail.

Entries the core has accepted but the host has not yet persisted live in the
unstable tail (and, after a follower receives a snapshot, the unstable
snapshot). `ready()` hands them out once; `advance()` drops them when the
host confirms they are stable. Committed entries are handed out once too,
tracked by `applying` (handed out) and `applied` (confirmed).
"""

from __future__ import annotations

from collections.abc import Sequence

from raft.log_storage import CompactedError, LogStorage, UnavailableError, limit_size
from raft.types import Entry, Snapshot


class LogInvariantError(Exception):
    """The log was asked to do something that would break Raft's guarantees (a bug or corruption)."""


class RaftLog:
    def __init__(self, storage: LogStorage, committed: int, applied: int) -> None:
        self.storage = storage
        last = storage.last_index()
        if committed > last:
            raise LogInvariantError(f"commit index {committed} is beyond the stored last index {last}")
        self._unstable: list[Entry] = []
        self._unstable_offset = last + 1  # index of _unstable[0]
        # unstable entries below this index were already handed out in a Ready
        self._handed_out_to = last + 1
        self._unstable_snapshot: Snapshot | None = None
        self._snapshot_handed_out = False
        self.committed = committed
        self.applied = applied
        self.applying = applied

    # --- reading ---

    def first_index(self) -> int:
        if self._unstable_snapshot is not None:
            return self._unstable_snapshot.index + 1
        return self.storage.first_index()

    def last_index(self) -> int:
        if self._unstable:
            return self._unstable_offset + len(self._unstable) - 1
        if self._unstable_snapshot is not None:
            return self._unstable_snapshot.index
        return self.storage.last_index()

    def term(self, index: int) -> int:
        """Term at `index`; raises CompactedError / UnavailableError outside the log."""
        if index >= self._unstable_offset and self._unstable:
            pos = index - self._unstable_offset
            if pos < len(self._unstable):
                return self._unstable[pos].term
            raise UnavailableError(f"index {index} is beyond the last index {self.last_index()}")
        snap = self._unstable_snapshot
        if snap is not None:
            if index == snap.index:
                return snap.term
            if index < snap.index:
                raise CompactedError(f"index {index} is covered by the pending snapshot at {snap.index}")
            raise UnavailableError(f"index {index} is beyond the last index {self.last_index()}")
        return self.storage.term(index)

    def persisted_index(self) -> int:
        """Last index of this log the host has confirmed durable (0 while a received snapshot is not)."""
        if self._unstable_snapshot is not None:
            return 0
        return self._unstable_offset - 1

    def term_or_zero(self, index: int) -> int:
        try:
            return self.term(index)
        except (CompactedError, UnavailableError):
            return 0

    def last_term(self) -> int:
        return self.term(self.last_index())

    def match_term(self, index: int, term: int) -> bool:
        try:
            return self.term(index) == term
        except (CompactedError, UnavailableError):
            return False

    def is_up_to_date(self, last_index: int, term: int) -> bool:
        """Whether a candidate whose log ends at (last_index, term) is at least as up to date (§5.4.1)."""
        our_term = self.last_term()
        return term > our_term or (term == our_term and last_index >= self.last_index())

    def slice(self, lo: int, hi: int, max_bytes: int | None = None) -> list[Entry]:
        """Entries [lo, hi), within max_bytes but at least one if lo < hi."""
        if lo >= hi:
            return []
        if lo < self.first_index():
            raise CompactedError(f"index {lo} is compacted (first index {self.first_index()})")
        if hi > self.last_index() + 1:
            raise UnavailableError(f"index {hi - 1} is beyond the last index {self.last_index()}")
        offset = self._unstable_offset
        if hi <= offset or not self._unstable:
            return self.storage.entries(lo, hi, max_bytes)
        if lo >= offset:
            return limit_size(self._unstable[lo - offset : hi - offset], max_bytes)
        stored = self.storage.entries(lo, offset, max_bytes)
        if len(stored) < offset - lo:
            return stored
        return limit_size(stored + self._unstable[: hi - offset], max_bytes)

    def find_conflict_by_term(self, index: int, term: int) -> int:
        """The largest index <= `index` whose term is <= `term` (or the first unknown index)."""
        while index > 0:
            try:
                if self.term(index) <= term:
                    return index
            except (CompactedError, UnavailableError):
                return index
            index -= 1
        return 0

    # --- writing ---

    def append(self, entries: Sequence[Entry]) -> int:
        """Add entries after truncating any conflicting suffix; returns the new last index."""
        if not entries:
            return self.last_index()
        after = entries[0].index
        if after <= self.committed:
            raise LogInvariantError(f"appending at {after} would overwrite committed index {self.committed}")
        offset = self._unstable_offset
        if after == offset + len(self._unstable):
            self._unstable.extend(entries)
        elif after <= offset:
            # Replaces everything unstable and the stored suffix from `after`;
            # the host's append truncates its copy when it persists these.
            self._unstable = list(entries)
            self._unstable_offset = after
        else:
            del self._unstable[after - offset :]
            self._unstable.extend(entries)
        self._handed_out_to = min(self._handed_out_to, after)
        return self.last_index()

    def maybe_append(
        self, prev_index: int, prev_term: int, leader_commit: int, entries: Sequence[Entry]
    ) -> tuple[int, int] | None:
        """A follower's AppendEntries consistency check and append (§5.3).

        Returns None if the log does not contain (prev_index, prev_term), else
        (last new index, index from which entries were written, 0 if none).
        """
        if not self.match_term(prev_index, prev_term):
            return None
        last_new = prev_index + len(entries)
        conflict = self._find_conflict(entries)
        if conflict:
            if conflict <= self.committed:
                raise LogInvariantError(f"entry {conflict} conflicts with committed index {self.committed}")
            self.append(entries[conflict - prev_index - 1 :])
        self.commit_to(min(leader_commit, last_new))
        return last_new, conflict

    def _find_conflict(self, entries: Sequence[Entry]) -> int:
        """Index of the first entry that is new or whose term differs from ours, else 0."""
        last = self.last_index()
        for entry in entries:
            if entry.index > last or not self.match_term(entry.index, entry.term):
                return entry.index
        return 0

    def commit_to(self, index: int) -> bool:
        if index <= self.committed:
            return False
        if index > self.last_index():
            raise LogInvariantError(f"commit index {index} is beyond the last index {self.last_index()}")
        self.committed = index
        return True

    def restore(self, snapshot: Snapshot) -> None:
        """Replace the whole log with a snapshot received from the leader."""
        self.committed = snapshot.index
        self._unstable = []
        self._unstable_offset = snapshot.index + 1
        self._handed_out_to = snapshot.index + 1
        self._unstable_snapshot = snapshot
        self._snapshot_handed_out = False

    # --- Ready bookkeeping ---

    def has_unstable_to_hand_out(self) -> bool:
        if self._unstable_snapshot is not None and not self._snapshot_handed_out:
            return True
        return self._handed_out_to < self._unstable_offset + len(self._unstable)

    def take_unstable_snapshot(self) -> Snapshot | None:
        if self._unstable_snapshot is None or self._snapshot_handed_out:
            return None
        self._snapshot_handed_out = True
        self.applying = max(self.applying, self._unstable_snapshot.index)
        return self._unstable_snapshot

    def take_unstable_entries(self) -> list[Entry]:
        start = self._handed_out_to - self._unstable_offset
        if start >= len(self._unstable):
            return []
        entries = self._unstable[start:]
        self._handed_out_to = self._unstable_offset + len(self._unstable)
        return entries

    def has_committed_to_hand_out(self) -> bool:
        return self.committed > self.applying and (
            self._unstable_snapshot is None or self._snapshot_handed_out
        )

    def take_committed_entries(self, max_bytes: int) -> list[Entry]:
        if not self.has_committed_to_hand_out():
            return []
        entries = self.slice(self.applying + 1, self.committed + 1, max_bytes)
        if entries:
            self.applying = entries[-1].index
        return entries

    def stable_to(self, index: int, term: int) -> None:
        """The host persisted entries up to (index, term)."""
        pos = index - self._unstable_offset
        if 0 <= pos < len(self._unstable) and self._unstable[pos].term == term:
            del self._unstable[: pos + 1]
            self._unstable_offset = index + 1
            self._handed_out_to = max(self._handed_out_to, self._unstable_offset)

    def stable_snapshot_to(self, index: int) -> None:
        if self._unstable_snapshot is not None and self._unstable_snapshot.index == index:
            self._unstable_snapshot = None
            self._snapshot_handed_out = False

    def applied_to(self, index: int) -> None:
        if index > self.applied:
            self.applied = index
