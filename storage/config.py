"""The part of a stream's configuration the store enforces: its limits and discard policy."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from storage.errors import InvalidConfigError

UNLIMITED = -1


class DiscardPolicy(StrEnum):
    """What a full stream does with a new message: drop the oldest ones, or refuse it."""

    OLD = "old"
    NEW = "new"


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """Limits as JetStream defines them; -1 (or 0, as nats-server normalises it) means no limit.

    `max_age_ns` is nanoseconds like the `max_age` field of the JetStream API;
    0 means messages never age out.

    `allow_msg_ttl` honours each message's `Nats-TTL` header (ADR-43). With
    `subject_delete_marker_ttl_ns` set the store removes nothing by age on its
    own (not on writes, not on config changes): its owner expires through
    `expiry_due`, since a message that was the last of its subject is to be
    replaced by a delete marker (cluster/stream/markers.py), not just dropped.
    """

    max_msgs: int = UNLIMITED
    max_bytes: int = UNLIMITED
    max_age_ns: int = 0
    max_msg_size: int = UNLIMITED
    max_msgs_per_subject: int = UNLIMITED
    discard: DiscardPolicy = DiscardPolicy.OLD
    discard_new_per_subject: bool = False
    allow_msg_ttl: bool = False
    subject_delete_marker_ttl_ns: int = 0

    def __post_init__(self) -> None:
        for name in ("max_msgs", "max_bytes", "max_msg_size", "max_msgs_per_subject"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < UNLIMITED:
                raise InvalidConfigError(f"{name} must be an integer >= -1, got {value!r}")
            if value == 0:
                # nats-server stores 0 as "unset", which it turns into -1.
                object.__setattr__(self, name, UNLIMITED)
        if not isinstance(self.max_age_ns, int) or isinstance(self.max_age_ns, bool) or self.max_age_ns < 0:
            raise InvalidConfigError(f"max_age_ns must be an integer >= 0, got {self.max_age_ns!r}")
        marker_ttl = self.subject_delete_marker_ttl_ns
        if not isinstance(marker_ttl, int) or isinstance(marker_ttl, bool) or marker_ttl < 0:
            raise InvalidConfigError(
                f"subject_delete_marker_ttl_ns must be an integer >= 0, got {marker_ttl!r}"
            )
        try:
            object.__setattr__(self, "discard", DiscardPolicy(self.discard))
        except ValueError:
            raise InvalidConfigError(f"discard must be 'old' or 'new', got {self.discard!r}") from None

    @classmethod
    def from_stream_config(cls, config: Mapping[str, Any]) -> StoreConfig:
        """Pick the store's fields out of a JetStream stream configuration (its JSON field names)."""
        return cls(
            max_msgs=config.get("max_msgs", UNLIMITED),
            max_bytes=config.get("max_bytes", UNLIMITED),
            max_age_ns=config.get("max_age", 0),
            max_msg_size=config.get("max_msg_size", UNLIMITED),
            max_msgs_per_subject=config.get("max_msgs_per_subject", UNLIMITED),
            discard=config.get("discard", DiscardPolicy.OLD),
            discard_new_per_subject=bool(config.get("discard_new_per_subject", False)),
            allow_msg_ttl=bool(config.get("allow_msg_ttl", False)),
            subject_delete_marker_ttl_ns=config.get("subject_delete_marker_ttl", 0),
        )

    @property
    def expires_on_writes(self) -> bool:
        """Whether writes and config changes remove what is due themselves (no delete markers to place)."""
        return self.subject_delete_marker_ttl_ns == 0

    def to_json_dict(self) -> dict[str, Any]:
        # field by field, not dataclasses.asdict, which deep-copies each value (a stream create writes
        # this twice: asdict took 0.3 ms of it under cProfile); tests/storage check every field is here
        return {
            "max_msgs": self.max_msgs,
            "max_bytes": self.max_bytes,
            "max_age_ns": self.max_age_ns,
            "max_msg_size": self.max_msg_size,
            "max_msgs_per_subject": self.max_msgs_per_subject,
            "discard": str(self.discard),
            "discard_new_per_subject": self.discard_new_per_subject,
            "allow_msg_ttl": self.allow_msg_ttl,
            "subject_delete_marker_ttl_ns": self.subject_delete_marker_ttl_ns,
        }

    @classmethod
    def from_json_dict(cls, fields: Mapping[str, Any]) -> StoreConfig:
        try:
            return cls(**fields)
        except TypeError as exc:
            raise InvalidConfigError(f"bad store configuration: {exc}") from None
