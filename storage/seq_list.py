"""The ascending sequences of one subject, kept as runs of consecutive sequences or as a plain array.

A subject whose messages are consecutive (a stream on one subject, or mostly one)
is one run however long it is, so it is kept as runs: `_seqs` holds each run's
first sequence and `_pos` each run's position in the subject's sequence order
(its count of earlier messages, offset by `_base`), which gives counts by binary
search over runs. That is 16 bytes per run. A subject whose messages are
interleaved with others' has about as many runs as messages, and is kept as a
plain array of 8-byte sequences instead (`_pos` is None). A list switches
representation when the other one would be at least twice smaller (with a margin,
so a list on the border does not switch back and forth).

Appends go at the end; removals may hit any position but mostly the front
(limits and max_age remove oldest first), so the front is dropped by moving a
head offset and the arrays are compacted only once half of them is dead.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from itertools import chain, pairwise

# Do not bother compacting tiny arrays: moving the head is enough.
_MIN_COMPACT = 32
# A plain list this long or longer becomes runs once it has at most a quarter as many runs as sequences.
_MIN_RUNS_LEN = 32
# Runs go back to a plain array once there are more than half as many runs as sequences, plus this.
_RUNS_SLACK = 16


class SeqList:
    __slots__ = ("_breaks", "_end", "_head", "_pos", "_seqs")

    def __init__(self, seqs: Iterable[int] = ()) -> None:
        self._seqs = array("Q")
        self._pos: array | None = None
        self._head = 0
        self._end = 0
        self._breaks = 0
        for seq in seqs:
            self.append(seq)

    @classmethod
    def from_array(cls, seqs: array) -> SeqList:
        """A list that takes `seqs` (ascending, not shared with anyone) as its storage."""
        made = cls()
        made._seqs = seqs
        made._pos = None
        made._head = 0
        made._end = 0
        made._breaks = sum(1 for before, after in pairwise(seqs) if after != before + 1)
        made._maybe_to_runs()
        return made

    @classmethod
    def from_runs(cls, starts: array, lengths: array) -> SeqList:
        """A list of the runs `starts[i]`, `starts[i] + 1`, ... `lengths[i]` long (ascending, gaps between)."""
        made = cls()
        made._seqs = starts
        made._pos = array("Q")
        made._head = 0
        made._breaks = 0
        position = 0
        for length in lengths:
            made._pos.append(position)
            position += length
        made._end = position
        made._maybe_to_flat()
        return made

    def runs(self) -> Iterator[tuple[int, int]]:
        """(first sequence, length) of each run of consecutive sequences, ascending."""
        if self._pos is None:
            return _runs_of(self._seqs[self._head :])
        return iter(self._run_list(self._head))

    def as_array(self) -> array:
        """The sequences as a new array."""
        if self._pos is None:
            return self._seqs[self._head :]
        return array("Q", iter(self))

    @property
    def run_count(self) -> int:
        return len(self._seqs) - self._head if self._pos is not None else self._breaks + bool(len(self))

    @property
    def nbytes(self) -> int:
        """Bytes the sequences take (the arrays' items, not their headers or spare room)."""
        arrays = (self._seqs,) if self._pos is None else (self._seqs, self._pos)
        return sum(len(values) * values.itemsize for values in arrays)

    def __len__(self) -> int:
        if self._pos is None:
            return len(self._seqs) - self._head
        return self._end - self._pos[self._head] if self._head < len(self._seqs) else 0

    def __iter__(self) -> Iterator[int]:
        return self.iter_from(0)

    @property
    def first(self) -> int:
        return self._seqs[self._head]

    @property
    def last(self) -> int:
        if self._pos is None:
            return self._seqs[-1]
        return self._seqs[-1] + self._end - self._pos[-1] - 1

    # -- changes --------------------------------------------------------------------------

    def append(self, seq: int) -> None:
        pos = self._pos
        if pos is not None and self._head < len(pos) and seq == self._seqs[-1] + self._end - pos[-1]:
            # The next sequence of the last run (a stream on one subject, every message): the run grows
            # and nothing else changes. Runs were at most half the count plus the slack before (every
            # change ends in `_maybe_to_flat`), so they still are.
            self._end += 1
            return
        if len(self):
            last = self.last
            if seq <= last:
                raise ValueError(f"sequence {seq} is not after {last}")
            consecutive = seq == last + 1
        else:
            self._reset()
            consecutive = False
        if self._pos is None:
            self._seqs.append(seq)
            if len(self) > 1 and not consecutive:
                self._breaks += 1
            self._maybe_to_runs()
            return
        if not consecutive:
            self._seqs.append(seq)
            self._pos.append(self._end)
        self._end += 1
        self._maybe_to_flat()

    def remove(self, seq: int) -> bool:
        removed = self._remove_flat(seq) if self._pos is None else self._remove_from_runs(seq)
        if removed:
            if self._pos is None:
                self._maybe_to_runs()
            else:
                self._maybe_to_flat()
        return removed

    def _remove_flat(self, seq: int) -> bool:
        seqs = self._seqs
        index = bisect_left(seqs, seq, self._head)
        if index == len(seqs) or seqs[index] != seq:
            return False
        has_before = index > self._head
        has_after = index + 1 < len(seqs)
        # the sequences around it now neighbour each other, with a gap (seq was between them)
        self._breaks += (
            (has_before and has_after)
            - (has_before and seqs[index - 1] + 1 != seq)
            - (has_after and seqs[index + 1] != seq + 1)
        )
        if index == self._head:
            self._head += 1
            self._compact()
        elif index == len(seqs) - 1:
            seqs.pop()
        else:
            del seqs[index]
        return True

    def _remove_from_runs(self, seq: int) -> bool:
        starts, pos = self._seqs, self._pos
        assert pos is not None
        run = bisect_right(starts, seq, self._head) - 1
        if run < self._head:
            return False
        start = starts[run]
        end = self._run_end(run)
        if seq > end:
            return False
        is_head = run == self._head
        if start == end:  # the run goes
            if is_head:
                self._head += 1
                self._compact()
                return True
            del starts[run]
            del pos[run]
            self._shift_down(run)
            return True
        if seq == start and is_head:
            starts[run] = seq + 1
            pos[run] += 1
            return True
        if seq == start:
            starts[run] = seq + 1
        elif seq != end:  # split: the second half starts after seq, at the position seq had
            starts.insert(run + 1, seq + 1)
            pos.insert(run + 1, pos[run] + seq - start)
            run += 1
        self._shift_down(run + 1)
        return True

    def _shift_down(self, from_run: int) -> None:
        """One sequence left before run `from_run`: the positions from there on move back by one."""
        pos = self._pos
        assert pos is not None
        if from_run < len(pos):
            pos[from_run:] = array("Q", map((-1).__add__, pos[from_run:]))
        self._end -= 1

    def _compact(self) -> None:
        if self._head >= _MIN_COMPACT and self._head * 2 >= len(self._seqs):
            del self._seqs[: self._head]
            if self._pos is not None:
                del self._pos[: self._head]
            self._head = 0

    def _reset(self) -> None:
        del self._seqs[:]
        if self._pos is not None:
            del self._pos[:]
        self._head = self._end = self._breaks = 0

    # -- the representation ---------------------------------------------------------------

    def _run_end(self, run: int) -> int:
        """The last sequence of run `run`."""
        pos = self._pos
        assert pos is not None
        following = pos[run + 1] if run + 1 < len(pos) else self._end
        return self._seqs[run] + following - pos[run] - 1

    def _run_list(self, from_run: int) -> list[tuple[int, int]]:
        pos = self._pos
        assert pos is not None
        ends = chain(pos[from_run + 1 :], (self._end,))
        starts = self._seqs[from_run:]
        return [
            (start, following - at) for start, at, following in zip(starts, pos[from_run:], ends, strict=True)
        ]

    def _maybe_to_runs(self) -> None:
        count = len(self)
        if count >= _MIN_RUNS_LEN and (self._breaks + 1) * 4 <= count:
            runs = list(self.runs())
            self._seqs = array("Q", (start for start, _ in runs))
            self._pos = array("Q")
            position = 0
            for _, length in runs:
                self._pos.append(position)
                position += length
            self._end = position
            self._head = 0
            self._breaks = 0

    def _maybe_to_flat(self) -> None:
        count = len(self)
        runs = len(self._seqs) - self._head
        if runs * 2 > count + _RUNS_SLACK:
            flat = self.as_array()
            self._pos = None
            self._seqs = flat
            self._head = 0
            self._end = 0
            self._breaks = runs - 1

    # -- questions ------------------------------------------------------------------------

    def next_at_or_after(self, seq: int) -> int | None:
        if self._pos is None:
            index = bisect_left(self._seqs, seq, self._head)
            return self._seqs[index] if index < len(self._seqs) else None
        run = bisect_right(self._seqs, seq, self._head) - 1
        if run >= self._head and seq <= self._run_end(run):
            return seq
        run = max(run + 1, self._head)
        return self._seqs[run] if run < len(self._seqs) else None

    def last_at_or_before(self, seq: int) -> int | None:
        if self._pos is None:
            index = bisect_right(self._seqs, seq, self._head)
            return self._seqs[index - 1] if index > self._head else None
        run = bisect_right(self._seqs, seq, self._head) - 1
        return min(seq, self._run_end(run)) if run >= self._head else None

    def count_at_or_after(self, seq: int) -> int:
        if self._pos is None:
            return len(self._seqs) - bisect_left(self._seqs, seq, self._head)
        pos = self._pos
        run = bisect_right(self._seqs, seq, self._head) - 1
        if run < self._head:
            return len(self)
        # the position of seq (or of the first sequence after its run)
        at = pos[run] + min(seq - self._seqs[run], self._run_end(run) - self._seqs[run] + 1)
        return self._end - at

    def iter_from(self, seq: int) -> Iterator[int]:
        """Ascending sequences >= seq, as a copy: the list may change while it is walked."""
        if self._pos is None:
            start = bisect_left(self._seqs, seq, self._head)
            return iter(self._seqs[start:].tolist())
        run = max(bisect_right(self._seqs, seq, self._head) - 1, self._head)
        runs = self._run_list(run) if run < len(self._seqs) else []
        return chain.from_iterable(range(max(start, seq), start + length) for start, length in runs)


def _runs_of(seqs: array) -> Iterator[tuple[int, int]]:
    """(first, length) of each run of consecutive sequences in the ascending `seqs`."""
    start = previous = None
    for seq in seqs:
        if previous is not None and seq == previous + 1:
            previous = seq
            continue
        if start is not None and previous is not None:
            yield start, previous - start + 1
        start = previous = seq
    if start is not None and previous is not None:
        yield start, previous - start + 1
