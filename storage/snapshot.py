"""The snapshot byte stream: a whole store as chunks, for Raft InstallSnapshot.

    magic "JRSNAP" version:1  header_len:4  header (JSON)
    record*            (the message records of storage/record.py, ascending seq)
    end:4 = 0          (a record length can never be 0)
    count:8  bytes:8   (how many records and their total size: catches a cut stream)

Integers are little-endian. The header carries everything that is not a
message: the limits, first/last sequence and last timestamp (which survive
purges and skips), and the group metadata (the Raft applied index). Each
record keeps its own checksum, so a reader validates as it goes and never
needs the whole snapshot in memory.
"""

from __future__ import annotations

import builtins
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import orjson

from storage.config import StoreConfig
from storage.errors import CorruptStoreError, InvalidConfigError

_MAGIC = b"JRSNAP\x01"
_U32 = struct.Struct("<I")
_TRAILER = struct.Struct("<QQ")
_LENGTH_MASK = 0x7FFF_FFFF
_MAX_HEADER_BYTES = 1 << 20
CHUNK_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class SnapshotHeader:
    config: StoreConfig
    first_seq: int
    last_seq: int
    last_ts_ns: int
    messages: int
    bytes: int
    # builtins.bytes: in this class body `bytes` is the field above (mypyc compiles callers by these types)
    metadata: builtins.bytes | None

    def encode(self) -> builtins.bytes:
        return orjson.dumps(
            {
                "config": self.config.to_json_dict(),
                "first_seq": self.first_seq,
                "last_seq": self.last_seq,
                "last_ts": self.last_ts_ns,
                "messages": self.messages,
                "bytes": self.bytes,
                "metadata": None if self.metadata is None else self.metadata.hex(),
            }
        )

    @classmethod
    def decode(cls, data: builtins.bytes) -> SnapshotHeader:
        try:
            fields = orjson.loads(data)
            metadata = fields["metadata"]
            header = cls(
                config=StoreConfig.from_json_dict(fields["config"]),
                first_seq=int(fields["first_seq"]),
                last_seq=int(fields["last_seq"]),
                last_ts_ns=int(fields["last_ts"]),
                messages=int(fields["messages"]),
                bytes=int(fields["bytes"]),
                metadata=None if metadata is None else bytes.fromhex(metadata),
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, InvalidConfigError) as exc:
            raise CorruptStoreError(f"snapshot header does not parse: {exc}") from None
        if header.messages and not 1 <= header.first_seq <= header.last_seq:
            raise CorruptStoreError("snapshot header has messages outside its sequence range")
        if not header.messages and header.first_seq != header.last_seq + 1:
            raise CorruptStoreError("snapshot header of an empty store must have first_seq = last_seq + 1")
        return header


def encode_snapshot(header: SnapshotHeader, records: Iterable[bytes]) -> Iterator[bytes]:
    """Chunks of about CHUNK_BYTES holding the header, the records and the trailer."""
    encoded_header = header.encode()
    buffer = bytearray(_MAGIC)
    buffer += _U32.pack(len(encoded_header))
    buffer += encoded_header
    count = total = 0
    for record in records:
        buffer += record
        count += 1
        total += len(record)
        if len(buffer) >= CHUNK_BYTES:
            yield bytes(buffer)
            buffer.clear()
    if count != header.messages or total != header.bytes:
        raise CorruptStoreError(
            f"store changed while it was snapshotted: {count} records of {total} bytes, "
            f"header says {header.messages} of {header.bytes}"
        )
    buffer += _U32.pack(0)
    buffer += _TRAILER.pack(count, total)
    yield bytes(buffer)


class SnapshotReader:
    """Parses a chunk stream: `header` first, then `records()` yields each raw record once."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = iter(chunks)
        self._buffer = bytearray()
        self._offset = 0
        if self._take(len(_MAGIC)) != _MAGIC:
            raise CorruptStoreError("not a jetraft stream snapshot (bad magic)")
        (header_len,) = _U32.unpack(self._take(_U32.size))
        if header_len > _MAX_HEADER_BYTES:
            raise CorruptStoreError(f"snapshot header of {header_len} bytes is too large")
        self.header = SnapshotHeader.decode(self._take(header_len))

    def records(self) -> Iterator[bytes]:
        count = total = 0
        while True:
            (length,) = _U32.unpack(self._take(_U32.size))
            length &= _LENGTH_MASK
            if length == 0:
                break
            if length < _U32.size:
                raise CorruptStoreError(f"record length {length} in snapshot is too small")
            # The length field is part of the record it measures.
            self._offset -= _U32.size
            record = self._take(length)
            count += 1
            total += len(record)
            yield record
        expected_count, expected_total = _TRAILER.unpack(self._take(_TRAILER.size))
        if (count, total) != (expected_count, expected_total) or (count, total) != (
            self.header.messages,
            self.header.bytes,
        ):
            raise CorruptStoreError(
                f"snapshot holds {count} records of {total} bytes, trailer says "
                f"{expected_count} of {expected_total}, header {self.header.messages} of {self.header.bytes}"
            )
        if self._offset != len(self._buffer) or any(self._chunks):
            raise CorruptStoreError("unexpected bytes after the end of the snapshot")

    def _take(self, size: int) -> bytes:
        while len(self._buffer) - self._offset < size:
            chunk = next(self._chunks, None)
            if chunk is None:
                raise CorruptStoreError("snapshot stream ended early")
            if self._offset:
                del self._buffer[: self._offset]
                self._offset = 0
            self._buffer += chunk
        data = bytes(self._buffer[self._offset : self._offset + size])
        self._offset += size
        return data
