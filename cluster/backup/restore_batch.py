"""A batch of a restore's stream entries, as the meta leader sends them to the stream leader: each
entry's bytes behind its length (4 bytes, little endian)."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator

_LENGTH = struct.Struct("<I")


def join_restore_batch(entries: Iterable[bytes]) -> bytes:
    return b"".join(_LENGTH.pack(len(entry)) + entry for entry in entries)


def split_restore_batch(batch: bytes) -> Iterator[bytes]:
    """The entries of `batch`; ValueError if it is cut short."""
    offset = 0
    while offset < len(batch):
        if offset + _LENGTH.size > len(batch):
            raise ValueError("a restore batch cut short")
        (length,) = _LENGTH.unpack_from(batch, offset)
        offset += _LENGTH.size
        if offset + length > len(batch):
            raise ValueError("a restore batch cut short")
        yield batch[offset : offset + length]
        offset += length
