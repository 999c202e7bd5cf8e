from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Frame(_message.Message):
    __slots__ = ("hello", "interest", "messages", "ping", "pong")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    INTEREST_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    PING_FIELD_NUMBER: _ClassVar[int]
    PONG_FIELD_NUMBER: _ClassVar[int]
    hello: Hello
    interest: _containers.RepeatedCompositeFieldContainer[Interest]
    messages: _containers.RepeatedCompositeFieldContainer[RoutedMessage]
    ping: int
    pong: int
    def __init__(self, hello: _Optional[_Union[Hello, _Mapping]] = ..., interest: _Optional[_Iterable[_Union[Interest, _Mapping]]] = ..., messages: _Optional[_Iterable[_Union[RoutedMessage, _Mapping]]] = ..., ping: _Optional[int] = ..., pong: _Optional[int] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ("node", "client_url", "session", "labels")
    NODE_FIELD_NUMBER: _ClassVar[int]
    CLIENT_URL_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    node: str
    client_url: str
    session: str
    labels: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, node: _Optional[str] = ..., client_url: _Optional[str] = ..., session: _Optional[str] = ..., labels: _Optional[_Iterable[str]] = ...) -> None: ...

class Interest(_message.Message):
    __slots__ = ("subject", "queue", "weight")
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    subject: bytes
    queue: bytes
    weight: int
    def __init__(self, subject: _Optional[bytes] = ..., queue: _Optional[bytes] = ..., weight: _Optional[int] = ...) -> None: ...

class RoutedMessage(_message.Message):
    __slots__ = ("subject", "reply", "headers", "payload", "queues", "deliver_as", "reply_via", "rerouted")
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    REPLY_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    DELIVER_AS_FIELD_NUMBER: _ClassVar[int]
    REPLY_VIA_FIELD_NUMBER: _ClassVar[int]
    REROUTED_FIELD_NUMBER: _ClassVar[int]
    subject: bytes
    reply: bytes
    headers: bytes
    payload: bytes
    queues: _containers.RepeatedScalarFieldContainer[bytes]
    deliver_as: bytes
    reply_via: str
    rerouted: bool
    def __init__(self, subject: _Optional[bytes] = ..., reply: _Optional[bytes] = ..., headers: _Optional[bytes] = ..., payload: _Optional[bytes] = ..., queues: _Optional[_Iterable[bytes]] = ..., deliver_as: _Optional[bytes] = ..., reply_via: _Optional[str] = ..., rerouted: _Optional[bool] = ...) -> None: ...
