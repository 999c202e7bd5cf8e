"""Plain data exchanged between the Raft core, its host and the network.

Everything here is an immutable value. The core never does I/O: the host
persists what a `Ready` asks it to, sends its messages, applies its committed
entries, and then calls `RaftCore.advance(ready)`. Protobuf exists only at
the gRPC edge (`raft/codec.py`); inside the process messages are these
dataclasses.

Node ids are strings (node names such as "n1"). Term 0 and index 0 mean
"none": the first real entry has index 1 and term >= 1.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field

NodeId = str


class EntryType(enum.IntEnum):
    NORMAL = 0
    CONF_CHANGE = 1


# Not frozen: one is built per entry on every node, and a frozen dataclass's __init__ costs several
# times a plain one's. Entries are never changed after building.
@dataclass(slots=True)
class Entry:
    """One log entry. `data` of a CONF_CHANGE entry is an encoded `ConfChangeRecord`."""

    term: int
    index: int
    type: EntryType = EntryType.NORMAL
    data: bytes = b""


@dataclass(frozen=True, slots=True)
class HardState:
    """What must be on stable storage before any message of the same Ready is sent."""

    term: int = 0
    vote: NodeId | None = None
    commit: int = 0


class Role(enum.Enum):
    FOLLOWER = "follower"
    PRE_CANDIDATE = "pre-candidate"
    CANDIDATE = "candidate"
    LEADER = "leader"


@dataclass(frozen=True, slots=True)
class SoftState:
    """Volatile state worth telling the host about; never persisted."""

    leader_id: NodeId | None
    role: Role


@dataclass(frozen=True, slots=True)
class ConfState:
    """Group membership. Both tuples are sorted so equal memberships compare equal."""

    voters: tuple[NodeId, ...] = ()
    learners: tuple[NodeId, ...] = ()

    def __post_init__(self) -> None:
        if tuple(sorted(self.voters)) != self.voters or tuple(sorted(self.learners)) != self.learners:
            object.__setattr__(self, "voters", tuple(sorted(self.voters)))
            object.__setattr__(self, "learners", tuple(sorted(self.learners)))
        if set(self.voters) & set(self.learners):
            raise ValueError(f"nodes both voter and learner: {sorted(set(self.voters) & set(self.learners))}")

    def contains(self, node_id: NodeId) -> bool:
        return node_id in self.voters or node_id in self.learners

    def members(self) -> tuple[NodeId, ...]:
        return tuple(sorted(self.voters + self.learners))


@dataclass(frozen=True, slots=True)
class SnapshotMetadata:
    index: int = 0
    term: int = 0
    conf_state: ConfState = field(default_factory=ConfState)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """State-machine image at `metadata.index`; `data` is opaque to Raft."""

    metadata: SnapshotMetadata = field(default_factory=SnapshotMetadata)
    data: bytes = b""

    @property
    def index(self) -> int:
        return self.metadata.index

    @property
    def term(self) -> int:
        return self.metadata.term


class ConfChangeType(enum.IntEnum):
    ADD_VOTER = 0  # also promotes an existing learner
    REMOVE_NODE = 1  # a voter or a learner
    ADD_LEARNER = 2


@dataclass(frozen=True, slots=True)
class ConfChange:
    """A single-server membership change; at most one is in flight at a time."""

    type: ConfChangeType
    node_id: NodeId
    context: bytes = b""

    def apply_to(self, conf: ConfState) -> ConfState:
        """The membership after this change, or ValueError if it makes no sense."""
        voters, learners = set(conf.voters), set(conf.learners)
        node = self.node_id
        if self.type is ConfChangeType.ADD_VOTER:
            if node in voters:
                raise ValueError(f"{node} is already a voter")
            learners.discard(node)
            voters.add(node)
        elif self.type is ConfChangeType.ADD_LEARNER:
            if node in voters or node in learners:
                raise ValueError(f"{node} is already a member")
            learners.add(node)
        else:
            if node not in voters and node not in learners:
                raise ValueError(f"{node} is not a member")
            voters.discard(node)
            learners.discard(node)
            if not voters:
                raise ValueError("cannot remove the last voter")
        return ConfState(voters=tuple(sorted(voters)), learners=tuple(sorted(learners)))


@dataclass(frozen=True, slots=True)
class ConfChangeRecord:
    """The payload of a CONF_CHANGE entry: the change and the membership it results in.

    Carrying the full resulting membership lets a node that joins with an empty
    log learn the configuration from the entry alone.
    """

    change: ConfChange
    conf_state: ConfState

    def encode(self) -> bytes:
        parts = [
            struct.pack(">B", self.change.type),
            _encode_str(self.change.node_id),
            _encode_bytes(self.change.context),
            struct.pack(">H", len(self.conf_state.voters)),
            *(_encode_str(v) for v in self.conf_state.voters),
            struct.pack(">H", len(self.conf_state.learners)),
            *(_encode_str(v) for v in self.conf_state.learners),
        ]
        return b"".join(parts)

    @classmethod
    def decode(cls, data: bytes) -> ConfChangeRecord:
        try:
            reader = _Reader(data)
            change_type = ConfChangeType(reader.unpack(">B"))
            node_id = reader.string()
            context = reader.bytes_()
            voters = tuple(reader.string() for _ in range(reader.unpack(">H")))
            learners = tuple(reader.string() for _ in range(reader.unpack(">H")))
            reader.finish()
        except (struct.error, ValueError, UnicodeDecodeError) as exc:
            raise ValueError(f"malformed conf change entry: {exc}") from exc
        return cls(ConfChange(change_type, node_id, context), ConfState(voters, learners))


class MessageType(enum.IntEnum):
    PRE_VOTE = 0
    PRE_VOTE_RESP = 1
    VOTE = 2
    VOTE_RESP = 3
    APPEND = 4
    APPEND_RESP = 5
    HEARTBEAT = 6
    HEARTBEAT_RESP = 7
    SNAPSHOT = 8
    TIMEOUT_NOW = 9
    READ_INDEX = 10  # follower -> leader: context is the request ctx
    READ_INDEX_RESP = 11  # leader -> follower: index is the read index, context the request ctx
    TRANSFER_LEADER = 12  # follower -> leader: context is the target node id (utf-8)
    # leader -> follower: the leader's `commit`, valid for the follower up to `index` if its entry
    # there has term `log_term`; no answer. Sent instead of an empty APPEND when the commit index
    # moves and no entries are going out, which would cost an APPEND_RESP per follower for nothing.
    COMMIT = 13


# Context of a VOTE sent because of TIMEOUT_NOW: voters grant it even inside
# their leader lease, since the current leader asked for the transfer.
CAMPAIGN_TRANSFER = b"transfer"

# Context of a HEARTBEAT by which a leader with nothing left to send asks its follower to quiesce
# (stop its election timer): `index`/`log_term` name the leader's last entry, which the follower must
# hold. The follower's HEARTBEAT_RESP carries it back, with `reject` if it did not quiesce.
QUIESCE = b"quiesce"

# Context of a rejecting APPEND_RESP from a member that lost entries it had acknowledged (RaftConfig.
# recovering): `reject_hint` is its real last index, below the match index its leader holds for it.
LOST_ENTRIES = b"lost-entries"


@dataclass(frozen=True, slots=True)
class Message:
    """A Raft message between two members of one group.

    APPEND: `index`/`log_term` identify the entry preceding `entries`.
    APPEND_RESP: `index` is the last index the follower now matches, or on
    `reject` the rejected `index`, with `reject_hint` the follower's guess of
    the last index that could match and `log_term` that entry's term.
    HEARTBEAT/HEARTBEAT_RESP: `context` carries a ReadIndex request ctx, if any.
    VOTE/PRE_VOTE: `index`/`log_term` are the candidate's last entry.
    """

    type: MessageType
    from_: NodeId
    to: NodeId
    term: int = 0
    log_term: int = 0
    index: int = 0
    entries: tuple[Entry, ...] = ()
    commit: int = 0
    reject: bool = False
    reject_hint: int = 0
    snapshot: Snapshot | None = None
    context: bytes = b""


@dataclass(frozen=True, slots=True)
class ReadState:
    """A ReadIndex answer: once `index` is applied, a read for `request_ctx` is linearizable."""

    index: int
    request_ctx: bytes


@dataclass(frozen=True, slots=True)
class Ready:
    """Work the host owes the core, consumed in this order:

    1. persist `snapshot` (if any), then append `entries` and store `hard_state`
       (if not None); fsync when `must_sync`;
    2. send `messages` (only now: a vote or an append ack must never be sent
       for state that is not yet durable). A leader's APPEND and HEARTBEAT
       messages are the exception: they may leave before step 1 completes,
       because the leader counts its own entries towards the commit quorum
       only after `advance()` confirms them durable;
    3. restore the state machine from `snapshot` (if any), then apply
       `committed_entries` in order and serve `read_states` once applied;
    4. call `RaftCore.advance(ready)`.
    """

    soft_state: SoftState | None = None
    hard_state: HardState | None = None
    entries: tuple[Entry, ...] = ()
    snapshot: Snapshot | None = None
    committed_entries: tuple[Entry, ...] = ()
    messages: tuple[Message, ...] = ()
    read_states: tuple[ReadState, ...] = ()
    must_sync: bool = False


def _encode_str(value: str) -> bytes:
    return _encode_bytes(value.encode())


def _encode_bytes(value: bytes) -> bytes:
    return struct.pack(">H", len(value)) + value


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def unpack(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self._data, self._pos)
        self._pos += struct.calcsize(fmt)
        return int(value)

    def bytes_(self) -> bytes:
        length = self.unpack(">H")
        if self._pos + length > len(self._data):
            raise ValueError("truncated field")
        value = self._data[self._pos : self._pos + length]
        self._pos += length
        return value

    def string(self) -> str:
        return self.bytes_().decode()

    def finish(self) -> None:
        if self._pos != len(self._data):
            raise ValueError(f"{len(self._data) - self._pos} trailing bytes")
