"""The Raft snapshot of a stream whose store is RocksDB: a marker, not a copy of the data.

The store is synced before the marker is taken, so it durably holds everything up to the marker's index
and the Raft log can be compacted behind it. A follower that needs a snapshot is sent an image of the
leader's store built at that moment (`StreamReplica.snapshot_image`); the marker itself never leaves
the node that took it.
"""

from __future__ import annotations

import struct

_MAGIC = b"JRSTREAM-MARKER1"
_INDEX = struct.Struct("<Q")


def store_marker(applied_index: int) -> bytes:
    return _MAGIC + _INDEX.pack(applied_index)


def is_store_marker(data: bytes) -> bool:
    # A store image begins with the snapshot codec's own magic, never with this one.
    return len(data) == len(_MAGIC) + _INDEX.size and data.startswith(_MAGIC)
