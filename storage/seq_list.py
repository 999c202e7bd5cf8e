"""The ascending sequences of one subject, packed in an array of 8-byte integers.

Appends go at the end; removals may hit any position but mostly the front
(limits and max_age remove oldest first), so the front is dropped by moving
a head offset and the array is compacted only once half of it is dead.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator

# Do not bother compacting tiny arrays: moving the head is enough.
_MIN_COMPACT = 32


class SeqList:
    __slots__ = ("_head", "_seqs")

    def __init__(self, seqs: tuple[int, ...] = ()) -> None:
        self._seqs = array("Q", seqs)
        self._head = 0

    @classmethod
    def from_array(cls, seqs: array) -> SeqList:
        """A list that takes `seqs` (ascending, not shared with anyone) as its storage."""
        made = cls.__new__(cls)
        made._seqs = seqs
        made._head = 0
        return made

    def as_array(self) -> array:
        """The sequences as a new array."""
        return self._seqs[self._head :]

    def __len__(self) -> int:
        return len(self._seqs) - self._head

    def __iter__(self) -> Iterator[int]:
        return self.iter_from(0)

    @property
    def first(self) -> int:
        return self._seqs[self._head]

    @property
    def last(self) -> int:
        return self._seqs[-1]

    def append(self, seq: int) -> None:
        seqs = self._seqs
        if len(seqs) > self._head and seq <= seqs[-1]:
            raise ValueError(f"sequence {seq} is not after {seqs[-1]}")
        seqs.append(seq)

    def remove(self, seq: int) -> bool:
        seqs = self._seqs
        index = bisect_left(seqs, seq, self._head)
        if index == len(seqs) or seqs[index] != seq:
            return False
        if index == self._head:
            self._head += 1
            if self._head >= _MIN_COMPACT and self._head * 2 >= len(seqs):
                del seqs[: self._head]
                self._head = 0
        elif index == len(seqs) - 1:
            seqs.pop()
        else:
            del seqs[index]
        return True

    def next_at_or_after(self, seq: int) -> int | None:
        index = bisect_left(self._seqs, seq, self._head)
        return self._seqs[index] if index < len(self._seqs) else None

    def last_at_or_before(self, seq: int) -> int | None:
        index = bisect_right(self._seqs, seq, self._head)
        return self._seqs[index - 1] if index > self._head else None

    def count_at_or_after(self, seq: int) -> int:
        return len(self._seqs) - bisect_left(self._seqs, seq, self._head)

    def iter_from(self, seq: int) -> Iterator[int]:
        """Ascending sequences >= seq, as a copy: the list may change while it is walked."""
        start = bisect_left(self._seqs, seq, self._head)
        return iter(self._seqs[start:].tolist())
