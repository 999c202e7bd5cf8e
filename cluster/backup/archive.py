"""jetraft's stream archive: what STREAM.SNAPSHOT sends and STREAM.RESTORE takes back (sans-IO).

The bytes travel in the Snappy framing format, which the S2 reader of nats-server's clients accepts:
the nats CLI (`nats backup stream`) decompresses a snapshot as it arrives to show its progress, and a
stream that is not S2 or Snappy framed fails the backup. Inside, the archive is jetraft's own, not
nats-server's tar of filestore blocks: a jetraft node cannot restore a nats-server archive, nor the other
way round, and each says so rather than storing something else.

Uncompressed, an archive is `MAGIC` followed by records, each `kind (1 byte) | length (4, little endian) |
body`: one HEADER (JSON: the stream's config and state when the snapshot began, and the sequences it
covers), a MESSAGE per stored message (sequence, timestamp, subject, headers, payload), a CONSUMER per
consumer asked for (JSON: its config, creation time and replicated state), and one END (JSON: how many
messages and consumers came and a BLAKE2b digest of everything before it), so a truncated or altered
archive is refused as a whole before anything is restored.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import cramjam
import orjson

MAGIC = b"JRARC001"
NATS_SERVER_ARCHIVE = b"NATSARC1"  # the magic inside nats-server 2.15's S2 stream

HEADER, MESSAGE, END, CONSUMER = 1, 2, 3, 4
_RECORD_HEAD = struct.Struct("<BI")
_MESSAGE_HEAD = struct.Struct("<QqII")  # seq, ts_ns, subject length, headers length; the payload is the rest
FORMAT_VERSION = 1

# Snappy framing (https://github.com/google/snappy/blob/main/framing_format.txt)
_STREAM_IDENTIFIER = b"\xff\x06\x00\x00sNaPpY"
_S2_IDENTIFIER = b"\xff\x06\x00\x00S2sTwO"
_COMPRESSED, _UNCOMPRESSED, _PADDING, _IDENTIFIER = 0x00, 0x01, 0xFE, 0xFF
MAX_RECORD_BYTES = 256 * 1024 * 1024  # a message is at most max_payload (64 MB at most) plus its subject


class ArchiveError(ValueError):
    """Not a whole, intact jetraft archive; the message says what is wrong, for the restore's error."""


@dataclass(frozen=True, slots=True)
class ArchivedMessage:
    seq: int
    ts_ns: int
    subject: str
    headers: bytes
    payload: bytes


@dataclass(frozen=True, slots=True)
class ArchivedConsumer:
    """A consumer of the stream: its config as stored, when it was made, and its whole replicated state
    (ConsumerState.snapshot(), JSON) as its leader had it."""

    name: str
    config: dict[str, Any]
    created_ns: int
    state: bytes

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "config": self.config, "created_ns": self.created_ns, "state": self.state.decode()}

    @classmethod
    def from_json(cls, value: Any) -> ArchivedConsumer:
        try:
            return cls(str(value["name"]), dict(value["config"]), int(value["created_ns"]), value["state"].encode())
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ArchiveError("a malformed consumer record") from None


@dataclass(frozen=True, slots=True)
class ArchiveHeader:
    stream: str
    config: dict[str, Any]
    state: dict[str, Any]
    first_seq: int
    last_seq: int


class ArchiveWriter:
    """Builds an archive record by record; `take()` hands over the compressed bytes made so far."""

    def __init__(self) -> None:
        self._compressor = cramjam.snappy.Compressor()
        self._digest = hashlib.blake2b(digest_size=32)
        self._messages = 0
        self._consumers = 0
        self._pending = 0
        self._write(MAGIC)

    def header(self, header: ArchiveHeader) -> None:
        body = {
            "format": FORMAT_VERSION,
            "stream": header.stream,
            "config": header.config,
            "state": header.state,
            "first_seq": header.first_seq,
            "last_seq": header.last_seq,
        }
        self._record(HEADER, orjson.dumps(body))

    def message(self, seq: int, ts_ns: int, subject: str, headers: bytes | None, payload: bytes) -> None:
        subject_bytes = subject.encode()
        head = _MESSAGE_HEAD.pack(seq, ts_ns, len(subject_bytes), len(headers or b""))
        self._record(MESSAGE, b"".join((head, subject_bytes, headers or b"", payload)))
        self._messages += 1

    def consumer(self, consumer: ArchivedConsumer) -> None:
        self._record(CONSUMER, orjson.dumps(consumer.to_json()))
        self._consumers += 1

    def end(self) -> None:
        digest = self._digest.hexdigest()
        body = {"messages": self._messages, "consumers": self._consumers, "digest": digest}
        self._record(END, orjson.dumps(body))

    @property
    def pending_bytes(self) -> int:
        """Uncompressed bytes written since the last `take()`."""
        return self._pending

    def take(self, final: bool = False) -> bytes:
        """The compressed bytes of everything written so far and not yet taken (the whole tail with
        `final`, after `end()`)."""
        self._pending = 0
        return bytes(self._compressor.finish() if final else self._compressor.flush())

    def _record(self, kind: int, body: bytes) -> None:
        self._write(_RECORD_HEAD.pack(kind, len(body)))
        self._write(body)

    def _write(self, data: bytes) -> None:
        self._digest.update(data)
        self._compressor.compress(data)
        self._pending += len(data)


def archive_kind(first_bytes: bytes) -> str:
    """What a restore's first bytes say the archive is: "jetraft", "nats-server" (S2 framing, which only
    nats-server writes) or "unknown"."""
    if first_bytes.startswith(_STREAM_IDENTIFIER):
        return "jetraft"
    if first_bytes.startswith(_S2_IDENTIFIER):
        return "nats-server"
    return "unknown"


def unframe(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The uncompressed bytes of a Snappy-framed stream given in pieces of any size. Checks the framing,
    not the chunks' CRCs: the archive's own digest (END) covers every byte."""
    buffer = bytearray()
    seen_identifier = False
    for piece in chunks:
        buffer += piece
        offset = 0
        while len(buffer) - offset >= 4:
            kind = buffer[offset]
            length = int.from_bytes(buffer[offset + 1 : offset + 4], "little")
            if len(buffer) - offset - 4 < length:
                break
            body = bytes(buffer[offset + 4 : offset + 4 + length])
            offset += 4 + length
            if kind == _IDENTIFIER:
                if body != _STREAM_IDENTIFIER[4:]:
                    raise ArchiveError("not a Snappy stream (is it a nats-server archive?)")
                seen_identifier = True
                continue
            if not seen_identifier:
                raise ArchiveError("the archive does not start with a Snappy stream identifier")
            if kind == _COMPRESSED:
                try:
                    yield bytes(cramjam.snappy.decompress_raw(body[4:]))
                except Exception as exc:  # cramjam raises its own DecompressionError
                    raise ArchiveError(f"a compressed chunk does not decompress: {exc}") from None
            elif kind == _UNCOMPRESSED:
                yield body[4:]
            elif kind < 0x80:
                raise ArchiveError(f"unknown unskippable chunk type {kind:#x}")
            # 0x80-0xfd: skippable; 0xfe: padding
        del buffer[:offset]
    if buffer:
        raise ArchiveError("the archive ends inside a chunk")


def read_archive(data: Iterable[bytes]) -> Iterator[ArchiveHeader | ArchivedMessage | ArchivedConsumer]:
    """The header, then every message and consumer, of an archive's uncompressed bytes; raises
    ArchiveError (after the records it could read) for a bad magic, a malformed or missing record, or a
    digest that does not match. Read it to its end before acting on what it yielded."""
    reader = _RecordReader(data)
    if reader.read_exactly(len(MAGIC)) != MAGIC:
        raise ArchiveError("not a jetraft stream archive")
    kind, body = reader.record()
    if kind != HEADER:
        raise ArchiveError("the archive does not start with its header")
    yield _header(body)
    messages = consumers = 0
    while True:
        digest = reader.digest.hexdigest()  # of everything before the record about to be read
        kind, body = reader.record()
        if kind == MESSAGE:
            messages += 1
            yield _message(body)
            continue
        if kind == CONSUMER:
            consumers += 1
            yield ArchivedConsumer.from_json(_json(body))
            continue
        if kind != END:
            raise ArchiveError(f"unknown record kind {kind}")
        end = _json(body)
        counts = (end.get("messages"), end.get("consumers", 0))
        if counts != (messages, consumers) or end.get("digest") != digest:
            raise ArchiveError("the archive is incomplete or altered (its digest or count does not match)")
        if reader.read_exactly(1, allow_eof=True):
            raise ArchiveError("bytes after the archive's end")
        return


class _RecordReader:
    def __init__(self, data: Iterable[bytes]) -> None:
        self._pieces = iter(data)
        self._buffer = bytearray()
        self.digest = hashlib.blake2b(digest_size=32)

    def read_exactly(self, count: int, allow_eof: bool = False) -> bytes:
        while len(self._buffer) < count:
            piece = next(self._pieces, None)
            if piece is None:
                if allow_eof and not self._buffer:
                    return b""
                raise ArchiveError("the archive ends early")
            self._buffer += piece
        out = bytes(self._buffer[:count])
        del self._buffer[:count]
        self.digest.update(out)
        return out

    def record(self) -> tuple[int, bytes]:
        kind, length = _RECORD_HEAD.unpack(self.read_exactly(_RECORD_HEAD.size))
        if length > MAX_RECORD_BYTES:
            raise ArchiveError(f"a record of {length} bytes")
        return kind, self.read_exactly(length)


def _json(body: bytes) -> dict[str, Any]:
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ArchiveError(f"a malformed record: {exc}") from None
    if not isinstance(value, dict):
        raise ArchiveError("a malformed record")
    return value


def _header(body: bytes) -> ArchiveHeader:
    value = _json(body)
    if value.get("format") != FORMAT_VERSION:
        raise ArchiveError(f"archive format {value.get('format')!r}: this jetraft reads {FORMAT_VERSION}")
    try:
        header = ArchiveHeader(
            str(value["stream"]), dict(value["config"]), dict(value["state"]),
            int(value["first_seq"]), int(value["last_seq"]),
        )  # fmt: skip
    except (KeyError, TypeError, ValueError):
        raise ArchiveError("a malformed header") from None
    return header


def _message(body: bytes) -> ArchivedMessage:
    if len(body) < _MESSAGE_HEAD.size:
        raise ArchiveError("a malformed message record")
    seq, ts_ns, subject_len, headers_len = _MESSAGE_HEAD.unpack_from(body)
    start = _MESSAGE_HEAD.size
    if start + subject_len + headers_len > len(body):
        raise ArchiveError("a malformed message record")
    subject = body[start : start + subject_len].decode(errors="replace")
    headers = body[start + subject_len : start + subject_len + headers_len]
    return ArchivedMessage(seq, ts_ns, subject, headers, body[start + subject_len + headers_len :])
