"""Typed errors of the stream store, one per condition the stream layer maps to a JetStream error.

The names follow nats-server's sentinel errors in `server/store.go`
(`ErrStoreMsgNotFound`, `ErrStoreEOF`, `ErrMaxMsgs`, ...).
"""

from __future__ import annotations

from enum import StrEnum


class StoreError(Exception):
    """Base of every error the store raises on purpose."""


class StoreClosedError(StoreError):
    """The store was closed (or failed a disk write and refuses further work)."""


class MsgNotFoundError(StoreError):
    """No message at that sequence, or none matching the request (nats: ErrStoreMsgNotFound)."""


class StoreEOFError(MsgNotFoundError):
    """Nothing at or after the start sequence matches (nats: ErrStoreEOF)."""


class Limit(StrEnum):
    """The stream limit a discard-new write ran into."""

    MAX_MSGS = "max_msgs"
    MAX_BYTES = "max_bytes"
    MAX_MSGS_PER_SUBJECT = "max_msgs_per_subject"


class LimitExceededError(StoreError):
    """A discard-new stream is full: the write was refused and nothing was stored."""

    def __init__(self, limit: Limit) -> None:
        self.limit = limit
        super().__init__(f"maximum {_LIMIT_WORDS[limit]} exceeded")


_LIMIT_WORDS = {
    Limit.MAX_MSGS: "messages",
    Limit.MAX_BYTES: "bytes",
    Limit.MAX_MSGS_PER_SUBJECT: "messages per subject",
}


class MsgTooBigError(StoreError):
    """Headers plus payload are larger than the stream's max_msg_size."""

    def __init__(self, size: int, max_size: int) -> None:
        self.size = size
        self.max_size = max_size
        super().__init__(f"message size {size} exceeds maximum allowed {max_size}")


class InvalidSubjectError(StoreError, ValueError):
    """A stored subject that is not a literal subject, or a filter that is not a valid filter."""


class InvalidHeadersError(StoreError, ValueError):
    """A header block that is not a NATS/1.0 block ending in an empty line."""


class SequenceMismatchError(StoreError):
    """A raw or skip write named a sequence the store cannot take (nats: ErrSequenceMismatch)."""


class TooManyResultsError(StoreError):
    """A multi-subject read matched more subjects than allowed (Direct Get answers 413)."""


class InvalidRequestError(StoreError, ValueError):
    """Arguments that make no sense together (negative counts, seq with keep, ...)."""


class InvalidConfigError(StoreError, ValueError):
    """A store configuration value out of range."""


class CorruptStoreError(StoreError):
    """Stored or shipped bytes fail their checksum or do not parse."""
