"""The memory store as an oracle for the file store."""

from __future__ import annotations

from storage.memory import MemoryStreamStore
from storage.model import msg_size


class FileCountingMemoryStore(MemoryStreamStore):
    """A memory store that counts state.bytes as the file store does (its record's length), so its
    state compares field by field with a file store's; nats-server's memory store counts less."""

    counted_size = staticmethod(msg_size)
