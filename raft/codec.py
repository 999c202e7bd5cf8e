"""Core messages <-> protobuf, at the gRPC edge only.

Inside a process Raft messages are the dataclasses of `raft/types.py`; these
functions convert them for `raft/raft.proto`. What comes off the wire is
checked here, so a malformed frame from a peer becomes a `CodecError` for the
transport to log and drop, never an exception inside the core.
"""

from __future__ import annotations

from collections.abc import Iterator

from raft import raft_pb2
from raft.types import ConfState, Entry, EntryType, Message, MessageType, Snapshot, SnapshotMetadata

DEFAULT_SNAPSHOT_CHUNK_BYTES = 1 << 20
_MESSAGE_TYPES = {t.value: t for t in MessageType}
_ENTRY_TYPES = {t.value: t for t in EntryType}


class CodecError(ValueError):
    """A protobuf message from a peer that is not a valid Raft message."""


def message_to_pb(group: str, msg: Message) -> raft_pb2.Message:
    """The wire form of `msg` for `group`; a SNAPSHOT's image goes by `snapshot_chunks` instead."""
    # the IntEnum members go in as they are: `.value` is a Python-level property, and an APPEND asks
    # for it once per entry for every follower (half the cost of adding an entry)
    pb = raft_pb2.Message(
        group=group,
        type=msg.type,
        from_node=msg.from_,
        to_node=msg.to,
        term=msg.term,
        log_term=msg.log_term,
        index=msg.index,
        commit=msg.commit,
        reject=msg.reject,
        reject_hint=msg.reject_hint,
        context=msg.context,
    )
    if msg.entries:
        add = pb.entries.add
        for entry in msg.entries:
            add(term=entry.term, index=entry.index, type=entry.type, data=entry.data)
    return pb


def message_from_pb(pb: raft_pb2.Message) -> Message:
    """The core message `pb` carries (its group is `pb.group`); CodecError if it is malformed."""
    msg_type = _MESSAGE_TYPES.get(pb.type)
    if msg_type is None:
        raise CodecError(f"unknown raft message type {pb.type}")
    if msg_type is MessageType.SNAPSHOT:
        raise CodecError("a SNAPSHOT message must come by InstallSnapshot")
    return _decode(pb, msg_type, None)


def _decode(pb: raft_pb2.Message, msg_type: MessageType, snapshot: Snapshot | None) -> Message:
    if not pb.group:
        raise CodecError("raft message without a group")
    if not pb.from_node or not pb.to_node:
        raise CodecError("raft message without a sender or a receiver")
    entries: tuple[Entry, ...] = ()
    pb_entries = pb.entries
    if pb_entries:
        first = pb.index + 1
        fields = [(e.term, e.index, e.type, e.data) for e in pb_entries]
        if [f[1] for f in fields] != list(range(first, first + len(fields))):
            raise CodecError(f"raft entries not consecutive after index {pb.index}")
        types = _ENTRY_TYPES
        try:
            entries = tuple([Entry(term, index, types[kind], data) for term, index, kind, data in fields])
        except KeyError as exc:
            raise CodecError(f"unknown raft entry type {exc.args[0]}") from None
    return Message(
        type=msg_type,
        from_=pb.from_node,
        to=pb.to_node,
        term=pb.term,
        log_term=pb.log_term,
        index=pb.index,
        entries=entries,
        commit=pb.commit,
        reject=pb.reject,
        reject_hint=pb.reject_hint,
        snapshot=snapshot,
        context=pb.context,
    )


def snapshot_chunks(
    group: str, msg: Message, chunk_bytes: int = DEFAULT_SNAPSHOT_CHUNK_BYTES
) -> Iterator[raft_pb2.SnapshotChunk]:
    """A SNAPSHOT message as InstallSnapshot chunks: the header first, then the image in slices."""
    if msg.type is not MessageType.SNAPSHOT or msg.snapshot is None:
        raise ValueError("snapshot_chunks needs a SNAPSHOT message with a snapshot")
    if chunk_bytes <= 0:
        raise ValueError("chunk_bytes must be positive")
    snapshot = msg.snapshot
    meta = snapshot.metadata
    data = snapshot.data
    header = raft_pb2.SnapshotChunk(
        message=message_to_pb(group, msg),
        metadata=raft_pb2.SnapshotMetadata(
            index=meta.index,
            term=meta.term,
            conf_state=raft_pb2.ConfState(voters=meta.conf_state.voters, learners=meta.conf_state.learners),
        ),
        total_bytes=len(data),
        data=data[:chunk_bytes],
    )
    yield header
    view = memoryview(data)
    for start in range(chunk_bytes, len(data), chunk_bytes):
        yield raft_pb2.SnapshotChunk(data=bytes(view[start : start + chunk_bytes]))


class SnapshotAssembler:
    """Receives InstallSnapshot chunks and yields the SNAPSHOT message they carry."""

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._group: str | None = None
        self._header: raft_pb2.SnapshotChunk | None = None
        self._parts: list[bytes] = []
        self._received = 0

    @property
    def group(self) -> str | None:
        return self._group

    def add(self, chunk: raft_pb2.SnapshotChunk) -> None:
        if self._header is None:
            if not chunk.HasField("message") or not chunk.HasField("metadata"):
                raise CodecError("the first snapshot chunk must carry the message and the metadata")
            if chunk.message.type != MessageType.SNAPSHOT.value:
                raise CodecError(f"snapshot chunk carries a message of type {chunk.message.type}")
            if chunk.total_bytes > self._max_bytes:
                raise CodecError(f"snapshot of {chunk.total_bytes} bytes exceeds the limit {self._max_bytes}")
            if not chunk.message.group:
                raise CodecError("snapshot without a group")
            self._header = chunk
            self._group = chunk.message.group
        elif chunk.HasField("message") or chunk.HasField("metadata"):
            raise CodecError("only the first snapshot chunk may carry a header")
        self._received += len(chunk.data)
        if self._received > self._header.total_bytes:
            raise CodecError(f"snapshot chunks exceed the announced {self._header.total_bytes} bytes")
        self._parts.append(chunk.data)

    def finish(self) -> tuple[str, Message]:
        """(group, SNAPSHOT message) once every announced byte arrived."""
        header = self._header
        if header is None or self._group is None:
            raise CodecError("no snapshot chunks received")
        if self._received != header.total_bytes:
            raise CodecError(f"snapshot truncated: {self._received} of {header.total_bytes} bytes")
        pb_meta = header.metadata
        try:
            conf = ConfState(tuple(pb_meta.conf_state.voters), tuple(pb_meta.conf_state.learners))
        except ValueError as exc:
            raise CodecError(f"bad snapshot membership: {exc}") from exc
        snapshot = Snapshot(SnapshotMetadata(pb_meta.index, pb_meta.term, conf), b"".join(self._parts))
        return self._group, _decode(header.message, MessageType.SNAPSHOT, snapshot)
