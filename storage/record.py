"""The message record: the deep dive's file-store layout, used for RocksDB values and snapshots.

    length:4  seq:8  ts:8  subject_len:2  subject  [headers_len:4  headers]  payload  hash:8

Integers are little-endian. `length` counts the whole record; its top bit
says whether the headers part is present. `hash` is BLAKE2b-64 of everything
before it, so a record read back (or received in a snapshot) can be checked
on its own. A record is exactly `msg_size()` bytes long, which is what
`state.bytes` adds up.
"""

from __future__ import annotations

import struct
from hashlib import blake2b

from storage.errors import CorruptStoreError
from storage.model import StoredMsg

_FIXED = struct.Struct("<IQqH")
_HEADERS_LEN = struct.Struct("<I")
_HASH_LEN = 8
_HAS_HEADERS = 0x8000_0000
_LENGTH_MASK = 0x7FFF_FFFF
FIXED_SIZE = _FIXED.size
_FIXED_SIZE = _FIXED.size
_HEADERS_LEN_SIZE = _HEADERS_LEN.size
_MIN_RECORD = _FIXED.size + _HASH_LEN
MAX_RECORD_BYTES = _LENGTH_MASK


def encode_record(subject: bytes, headers: bytes | None, payload: bytes, seq: int, ts_ns: int) -> bytes:
    """One record; `subject` is the UTF-8 subject, already validated."""
    length = _FIXED.size + len(subject) + len(payload) + _HASH_LEN
    if headers is not None:
        length += _HEADERS_LEN.size + len(headers)
    if length > MAX_RECORD_BYTES:
        raise CorruptStoreError(f"a record of {length} bytes does not fit the 31-bit length field")
    flags = _HAS_HEADERS if headers is not None else 0
    parts = [_FIXED.pack(length | flags, seq, ts_ns, len(subject)), subject]
    if headers is not None:
        parts.append(_HEADERS_LEN.pack(len(headers)))
        parts.append(headers)
    parts.append(payload)
    body = b"".join(parts)
    return body + blake2b(body, digest_size=_HASH_LEN).digest()


def decode_record(record: bytes, *, verify_hash: bool = True) -> StoredMsg:
    """The message in a record, after checking its length, its fields and (unless told not to) its hash.

    RocksStreamStore reads with `verify_hash=False`: RocksDB checks its own block
    checksums on every read from disk, so the record hash there would check the
    same bytes twice; it stays checked wherever records arrive from outside (snapshots).
    """
    size = len(record)
    if size < _MIN_RECORD:
        raise CorruptStoreError(f"record of {size} bytes is shorter than its fixed part")
    length_and_flags, seq, ts_ns, subject_len = _FIXED.unpack_from(record)
    if length_and_flags & _LENGTH_MASK != size:
        raise CorruptStoreError(f"record length field {length_and_flags & _LENGTH_MASK} != {size}")
    end = size - _HASH_LEN
    if verify_hash and blake2b(memoryview(record)[:end], digest_size=_HASH_LEN).digest() != record[end:]:
        raise CorruptStoreError(f"record of sequence {seq} fails its checksum")
    offset = _FIXED_SIZE + subject_len
    subject = record[_FIXED_SIZE:offset]
    headers: bytes | None = None
    if length_and_flags & _HAS_HEADERS:
        if offset + _HEADERS_LEN_SIZE > end:
            raise CorruptStoreError(f"record of sequence {seq} is cut inside its headers")
        (headers_len,) = _HEADERS_LEN.unpack_from(record, offset)
        offset += _HEADERS_LEN_SIZE
        headers = record[offset : offset + headers_len]
        offset += headers_len
    if offset > end:
        raise CorruptStoreError(f"record of sequence {seq} is shorter than its fields")
    try:
        subject_text = subject.decode()
    except UnicodeDecodeError:
        raise CorruptStoreError(f"record of sequence {seq} has a subject that is not UTF-8") from None
    return StoredMsg(subject_text, headers, record[offset:end], seq, ts_ns)


def record_header(record: bytes) -> tuple[int, int, bytes]:
    """(seq, ts_ns, subject bytes) of a record, without checking the hash: for rebuilding indexes."""
    if len(record) < _FIXED.size:
        raise CorruptStoreError(f"record of {len(record)} bytes is shorter than its fixed part")
    _, seq, ts_ns, subject_len = _FIXED.unpack_from(record)
    return seq, ts_ns, record[_FIXED.size : _FIXED.size + subject_len]


def record_headers(record: bytes) -> tuple[int, bytes | None]:
    """(ts_ns, headers or None) of a record, without checking the hash or reading the payload."""
    if len(record) < _FIXED.size:
        raise CorruptStoreError(f"record of {len(record)} bytes is shorter than its fixed part")
    length_and_flags, seq, ts_ns, subject_len = _FIXED.unpack_from(record)
    if not length_and_flags & _HAS_HEADERS:
        return ts_ns, None
    offset = _FIXED.size + subject_len
    if offset + _HEADERS_LEN_SIZE > len(record) - _HASH_LEN:
        raise CorruptStoreError(f"record of sequence {seq} is cut inside its headers")
    (headers_len,) = _HEADERS_LEN.unpack_from(record, offset)
    offset += _HEADERS_LEN_SIZE
    if offset + headers_len > len(record) - _HASH_LEN:
        raise CorruptStoreError(f"record of sequence {seq} is shorter than its headers")
    return ts_ns, record[offset : offset + headers_len]


def record_ts(record: bytes) -> int:
    return _FIXED.unpack_from(record)[2]
