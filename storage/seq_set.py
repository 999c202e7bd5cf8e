"""The set of live sequences of a stream, as a bitmap cut into chunks.

One bit per sequence between the first and last live message, in chunks of
4096 sequences kept as Python ints (one per chunk that holds anything), so a
million messages cost about 128 KiB and long runs of deleted sequences cost
nothing. Finding the next or previous live sequence and counting live
sequences from a point are bit operations on a few chunks.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator

CHUNK_BITS = 4096


def _lowest_bit(mask: int) -> int:
    return (mask & -mask).bit_length() - 1


class SeqSet:
    __slots__ = ("_chunks", "_count", "_keys")

    def __init__(self) -> None:
        self._chunks: dict[int, int] = {}
        # Chunk numbers in ascending order, for the walks that cross chunks.
        self._keys: list[int] = []
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __contains__(self, seq: int) -> bool:
        chunk, offset = divmod(seq, CHUNK_BITS)
        return bool(self._chunks.get(chunk, 0) >> offset & 1)

    @classmethod
    def from_chunks(cls, keys: list[int], masks: list[int]) -> SeqSet:
        """A set from what `chunks()` returned (keys ascending, masks non-zero)."""
        made = cls()
        made._keys = list(keys)
        made._chunks = dict(zip(keys, masks, strict=True))
        made._count = sum(mask.bit_count() for mask in masks)
        return made

    def chunks(self) -> tuple[list[int], list[int]]:
        """(chunk numbers ascending, their bitmaps): the whole set, for saving it."""
        return list(self._keys), [self._chunks[key] for key in self._keys]

    def copy(self) -> SeqSet:
        """An independent copy (chunks are immutable ints, so this is cheap)."""
        clone = SeqSet()
        clone._chunks = dict(self._chunks)
        clone._keys = list(self._keys)
        clone._count = self._count
        return clone

    def add(self, seq: int) -> None:
        chunk, offset = divmod(seq, CHUNK_BITS)
        mask = self._chunks.get(chunk)
        if mask is None:
            if not self._keys or chunk > self._keys[-1]:
                self._keys.append(chunk)
            else:
                insort(self._keys, chunk)
            mask = 0
        bit = 1 << offset
        if not mask & bit:
            self._chunks[chunk] = mask | bit
            self._count += 1

    def discard(self, seq: int) -> bool:
        chunk, offset = divmod(seq, CHUNK_BITS)
        mask = self._chunks.get(chunk, 0)
        bit = 1 << offset
        if not mask & bit:
            return False
        mask ^= bit
        self._count -= 1
        if mask:
            self._chunks[chunk] = mask
        else:
            del self._chunks[chunk]
            del self._keys[bisect_left(self._keys, chunk)]
        return True

    def clear(self) -> None:
        self._chunks.clear()
        self._keys.clear()
        self._count = 0

    def first(self) -> int | None:
        if not self._keys:
            return None
        chunk = self._keys[0]
        return chunk * CHUNK_BITS + _lowest_bit(self._chunks[chunk])

    def last(self) -> int | None:
        if not self._keys:
            return None
        chunk = self._keys[-1]
        return chunk * CHUNK_BITS + self._chunks[chunk].bit_length() - 1

    def next_at_or_after(self, seq: int) -> int | None:
        chunk, offset = divmod(max(seq, 0), CHUNK_BITS)
        index = bisect_left(self._keys, chunk)
        if index < len(self._keys) and self._keys[index] == chunk:
            rest = self._chunks[chunk] >> offset
            if rest:
                return chunk * CHUNK_BITS + offset + _lowest_bit(rest)
            index += 1
        if index < len(self._keys):
            chunk = self._keys[index]
            return chunk * CHUNK_BITS + _lowest_bit(self._chunks[chunk])
        return None

    def prev_at_or_before(self, seq: int) -> int | None:
        if seq < 0:
            return None
        chunk, offset = divmod(seq, CHUNK_BITS)
        index = bisect_right(self._keys, chunk) - 1
        if index >= 0 and self._keys[index] == chunk:
            head = self._chunks[chunk] & ((2 << offset) - 1)
            if head:
                return chunk * CHUNK_BITS + head.bit_length() - 1
            index -= 1
        if index >= 0:
            chunk = self._keys[index]
            return chunk * CHUNK_BITS + self._chunks[chunk].bit_length() - 1
        return None

    def count_at_or_after(self, seq: int) -> int:
        chunk, offset = divmod(max(seq, 0), CHUNK_BITS)
        index = bisect_left(self._keys, chunk)
        total = 0
        if index < len(self._keys) and self._keys[index] == chunk:
            total += (self._chunks[chunk] >> offset).bit_count()
            index += 1
        chunks = self._chunks
        for key in self._keys[index:]:
            total += chunks[key].bit_count()
        return total

    def iter_from(self, seq: int) -> Iterator[int]:
        """Ascending live sequences >= seq. The set must not change while this is consumed."""
        chunk, offset = divmod(max(seq, 0), CHUNK_BITS)
        for key in self._keys[bisect_left(self._keys, chunk) :]:
            mask = self._chunks[key]
            base = key * CHUNK_BITS
            if key == chunk:
                mask = mask >> offset << offset
            while mask:
                low = mask & -mask
                yield base + low.bit_length() - 1
                mask ^= low

    def iter_range(self, low: int, high: int) -> Iterator[int]:
        """Ascending live sequences in [low, high]."""
        for seq in self.iter_from(low):
            if seq > high:
                return
            yield seq

    def missing_in(self, low: int, high: int) -> Iterator[int]:
        """Ascending sequences in [low, high] that are not in the set."""
        expected = low
        for seq in self.iter_range(low, high):
            yield from range(expected, seq)
            expected = seq + 1
        yield from range(expected, high + 1)
