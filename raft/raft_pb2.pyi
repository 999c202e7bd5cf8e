from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MessageType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PRE_VOTE: _ClassVar[MessageType]
    PRE_VOTE_RESP: _ClassVar[MessageType]
    VOTE: _ClassVar[MessageType]
    VOTE_RESP: _ClassVar[MessageType]
    APPEND: _ClassVar[MessageType]
    APPEND_RESP: _ClassVar[MessageType]
    HEARTBEAT: _ClassVar[MessageType]
    HEARTBEAT_RESP: _ClassVar[MessageType]
    SNAPSHOT: _ClassVar[MessageType]
    TIMEOUT_NOW: _ClassVar[MessageType]
    READ_INDEX: _ClassVar[MessageType]
    READ_INDEX_RESP: _ClassVar[MessageType]
    TRANSFER_LEADER: _ClassVar[MessageType]
    COMMIT: _ClassVar[MessageType]

class EntryType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NORMAL: _ClassVar[EntryType]
    CONF_CHANGE: _ClassVar[EntryType]
PRE_VOTE: MessageType
PRE_VOTE_RESP: MessageType
VOTE: MessageType
VOTE_RESP: MessageType
APPEND: MessageType
APPEND_RESP: MessageType
HEARTBEAT: MessageType
HEARTBEAT_RESP: MessageType
SNAPSHOT: MessageType
TIMEOUT_NOW: MessageType
READ_INDEX: MessageType
READ_INDEX_RESP: MessageType
TRANSFER_LEADER: MessageType
COMMIT: MessageType
NORMAL: EntryType
CONF_CHANGE: EntryType

class Frame(_message.Message):
    __slots__ = ("from_node", "messages", "incarnation")
    FROM_NODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    from_node: str
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    incarnation: int
    def __init__(self, from_node: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., incarnation: _Optional[int] = ...) -> None: ...

class SendSummary(_message.Message):
    __slots__ = ("frames", "messages")
    FRAMES_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    frames: int
    messages: int
    def __init__(self, frames: _Optional[int] = ..., messages: _Optional[int] = ...) -> None: ...

class Entry(_message.Message):
    __slots__ = ("term", "index", "type", "data")
    TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    term: int
    index: int
    type: EntryType
    data: bytes
    def __init__(self, term: _Optional[int] = ..., index: _Optional[int] = ..., type: _Optional[_Union[EntryType, str]] = ..., data: _Optional[bytes] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ("group", "type", "from_node", "to_node", "term", "log_term", "index", "entries", "commit", "reject", "reject_hint", "context")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    FROM_NODE_FIELD_NUMBER: _ClassVar[int]
    TO_NODE_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    LOG_TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    REJECT_FIELD_NUMBER: _ClassVar[int]
    REJECT_HINT_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    group: str
    type: MessageType
    from_node: str
    to_node: str
    term: int
    log_term: int
    index: int
    entries: _containers.RepeatedCompositeFieldContainer[Entry]
    commit: int
    reject: bool
    reject_hint: int
    context: bytes
    def __init__(self, group: _Optional[str] = ..., type: _Optional[_Union[MessageType, str]] = ..., from_node: _Optional[str] = ..., to_node: _Optional[str] = ..., term: _Optional[int] = ..., log_term: _Optional[int] = ..., index: _Optional[int] = ..., entries: _Optional[_Iterable[_Union[Entry, _Mapping]]] = ..., commit: _Optional[int] = ..., reject: _Optional[bool] = ..., reject_hint: _Optional[int] = ..., context: _Optional[bytes] = ...) -> None: ...

class ConfState(_message.Message):
    __slots__ = ("voters", "learners")
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    LEARNERS_FIELD_NUMBER: _ClassVar[int]
    voters: _containers.RepeatedScalarFieldContainer[str]
    learners: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, voters: _Optional[_Iterable[str]] = ..., learners: _Optional[_Iterable[str]] = ...) -> None: ...

class SnapshotMetadata(_message.Message):
    __slots__ = ("index", "term", "conf_state")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    CONF_STATE_FIELD_NUMBER: _ClassVar[int]
    index: int
    term: int
    conf_state: ConfState
    def __init__(self, index: _Optional[int] = ..., term: _Optional[int] = ..., conf_state: _Optional[_Union[ConfState, _Mapping]] = ...) -> None: ...

class SnapshotChunk(_message.Message):
    __slots__ = ("message", "metadata", "total_bytes", "data")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    message: Message
    metadata: SnapshotMetadata
    total_bytes: int
    data: bytes
    def __init__(self, message: _Optional[_Union[Message, _Mapping]] = ..., metadata: _Optional[_Union[SnapshotMetadata, _Mapping]] = ..., total_bytes: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class SnapshotResult(_message.Message):
    __slots__ = ("accepted", "error")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    error: str
    def __init__(self, accepted: _Optional[bool] = ..., error: _Optional[str] = ...) -> None: ...
