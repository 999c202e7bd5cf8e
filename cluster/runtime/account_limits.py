"""What the JetStream account may use (nats-server's `JetStreamAccountLimits`), from the config file.

Every node reads the same file, so every node holds the same limits: the meta leader checks creates
against them, a stream's leader checks publishes. -1 is no limit, as nats-server writes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

NO_LIMIT = -1


@dataclass(frozen=True, slots=True)
class JetStreamAccountLimits:
    max_memory: int = NO_LIMIT
    max_storage: int = NO_LIMIT
    max_streams: int = NO_LIMIT
    max_consumers: int = NO_LIMIT
    max_ack_pending: int = NO_LIMIT
    memory_max_stream_bytes: int = NO_LIMIT
    storage_max_stream_bytes: int = NO_LIMIT
    max_bytes_required: bool = False

    def max_stream_bytes(self, in_memory: bool) -> int:
        """The largest max_bytes a stream of this storage type may ask for (0 or less: no limit)."""
        return self.memory_max_stream_bytes if in_memory else self.storage_max_stream_bytes

    def to_json(self) -> dict[str, Any]:
        """ACCOUNT INFO's `limits`, in nats-server's field order."""
        return {
            "max_memory": self.max_memory,
            "max_storage": self.max_storage,
            "max_streams": self.max_streams,
            "max_consumers": self.max_consumers,
            "max_ack_pending": self.max_ack_pending,
            "memory_max_stream_bytes": self.memory_max_stream_bytes,
            "storage_max_stream_bytes": self.storage_max_stream_bytes,
            "max_bytes_required": self.max_bytes_required,
        }


UNLIMITED = JetStreamAccountLimits()
