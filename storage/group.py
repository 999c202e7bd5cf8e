"""Write groups: many writes that reach disk together, with one opaque metadata value.

A group is opened with `store.write_group(sync=...)`. Every write made while
it is open (on any thread: the store's lock is held for the group's whole
duration, so other threads wait) is applied to the store's in-memory view at
once, readable by the group's own thread, and staged in one RocksDB
WriteBatch. When the outermost group closes, the batch is written, then, if
any group in the nest asked for `sync`, the write-ahead log is fsynced after
the lock is released, so readers on other threads are not held up by the
fsync.

`meta` is written in the same batch: the stream layer puts the Raft applied
index there, so after a crash the store's messages and the index it reached
always agree.

`store_msg`, when a store gives one, is its `store_msg` for the group's own
thread while the group is open: it skips what the open group already holds
(the store's lock, its open check, the commit at the end of a write), which
is most of what a message costs beyond the storing on the apply path. It
refuses to run once the group has closed.

Writes are applied as they are called, so an exception raised inside the
`with` block does not undo the writes that already completed; they are still
committed together when the block exits (the alternative, a store whose
memory and disk disagree, is worse). A failing write itself changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from storage.model import Rollup, StoreResult

# store_msg(subject, headers, payload, ts_ns, rollup), as the store's own with `rollup` positional
StoreInGroup = Callable[[str, bytes | None, bytes, int | None, Rollup | None], StoreResult]


@dataclass(slots=True)
class WriteGroup:
    """Handle of an open group: set `meta` at any point before it closes; `store_msg`, if not None,
    stores a message in the group (see the module's docstring)."""

    sync: bool = False
    meta: bytes | None = None
    store_msg: StoreInGroup | None = None
