"""The StreamStore contract: nats-server's StreamStore (server/store.go) in snake_case.

Both `MemoryStreamStore` and `RocksStreamStore` satisfy it and pass the same
contract tests. Conventions:

- Sequences start at 1 and only grow; a sequence is never reused except after
  `truncate`. `first_seq` is the first stored message, or last_seq + 1 when
  the store is empty (also after a purge), as nats-server reports it.
- Filters may use `*` and `>`; `""` and `">"` both mean every subject.
- Timestamps are Unix nanoseconds. Writes from Raft replicas pass `ts_ns`
  so every replica stores the same value; `store_msg` takes the wall clock
  only when it is omitted.
- Reads that find nothing raise `MsgNotFoundError` (`StoreEOFError`, a
  subclass, when reading forward past the end); other errors are typed in
  storage/errors.py.

Threads: every method takes the store's lock, so calls from different
threads are serialised and each sees a consistent store. The lock is held
for in-memory work and the (unsynced) RocksDB write only; `sync()` and a
`write_group(sync=True)` fsync after releasing it. So a writer may run in
`asyncio.to_thread` while the event loop keeps reading: the loop waits at
most for one write's in-memory work, never for an fsync. A write group holds
the lock from enter to exit: keep its body short and do not await in it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable

from storage.config import StoreConfig
from storage.group import WriteGroup
from storage.model import MsgBatch, Rollup, SimpleState, StoredMsg, StoreResult, StreamState


@runtime_checkable
class StreamStore(Protocol):
    # -- lifecycle ----------------------------------------------------------------------
    @property
    def storage_type(self) -> str:
        """ "memory" or "file", the JetStream `storage` value."""
        ...

    @property
    def config(self) -> StoreConfig: ...

    @property
    def closed(self) -> bool: ...

    @property
    def metadata(self) -> bytes | None:
        """The value the last write group set (the Raft applied index); survives reopen."""
        ...

    def close(self) -> None: ...

    def write_group(self, *, sync: bool = False) -> AbstractContextManager[WriteGroup]:
        """Writes inside reach disk in one atomic batch with `group.meta`; see storage/group.py."""
        ...

    def sync(self) -> None:
        """Make every write so far durable (fsync of the write-ahead log)."""
        ...

    # -- writes -------------------------------------------------------------------------
    def store_msg(
        self,
        subject: str,
        headers: bytes | None,
        payload: bytes,
        ts_ns: int | None = None,
        *,
        rollup: Rollup | None = None,
    ) -> StoreResult:
        """Store at last_seq + 1, then enforce limits, rollup and expiry (with `ts_ns` as now; not with
        subject delete markers, see StoreConfig). A valid `Nats-TTL` header gives the message its TTL.

        Raises InvalidSubjectError, InvalidHeadersError, MsgTooBigError, or
        LimitExceededError (discard new); nothing is stored then.
        """
        ...

    def store_raw_msg(
        self,
        subject: str,
        headers: bytes | None,
        payload: bytes,
        seq: int,
        ts_ns: int,
        *,
        rollup: Rollup | None = None,
    ) -> StoreResult:
        """Store at a given sequence (mirrors keep the origin's); `seq` must be past last_seq.

        Sequences skipped over count as deleted (or, in an empty store, move first_seq).
        """
        ...

    def skip_msg(self, seq: int = 0) -> int:
        """Use up the next sequence (`seq` must be it, or 0) without storing; returns it."""
        ...

    def skip_msgs(self, seq: int, num: int) -> None:
        """Use up `num` sequences from `seq`, which must be last_seq + 1."""
        ...

    def remove_msg(self, seq: int) -> bool:
        """Remove one message; False if there was none."""
        ...

    def erase_msg(self, seq: int) -> bool:
        """Remove one message and make its bytes unreadable from the store's files."""
        ...

    def purge(self) -> int:
        """Remove every message; first_seq becomes last_seq + 1. Returns how many went."""
        ...

    def purge_ex(self, subject: str = "", seq: int = 0, keep: int = 0) -> int:
        """JetStream's purge request: messages matching `subject` below `seq`, or all but the newest `keep`."""
        ...

    def compact(self, seq: int) -> int:
        """Remove every message below `seq`; past the end, the next message gets `seq`."""
        ...

    def truncate(self, seq: int) -> None:
        """Remove every message above `seq`, which becomes last_seq (0 resets the store)."""
        ...

    def expiry_due(self, now_ns: int, limit: int = 0) -> tuple[int, ...]:
        """What `expire(now_ns, limit)` would remove, ascending, without removing it: messages
        older than max_age (except `Nats-TTL: never` ones) and, with `allow_msg_ttl`, messages
        past their own TTL; the lowest `limit` of them (0: all)."""
        ...

    def expire(self, now_ns: int, limit: int = 0) -> tuple[int, ...]:
        """Remove `expiry_due(now_ns, limit)`; returns their sequences."""
        ...

    def next_expiry_ns(self) -> int | None:
        """When `expire` next has work, or None (no max_age, no TTL): the host schedules the call."""
        ...

    def update_config(self, config: StoreConfig, now_ns: int | None = None) -> tuple[int, ...]:
        """New limits, enforced at once (expiry too when `now_ns` is given, unless the config places
        subject delete markers); returns removed sequences."""
        ...

    # -- reads --------------------------------------------------------------------------
    def load_msg(self, seq: int) -> StoredMsg: ...

    def load_next_msg(self, filter_: str, start_seq: int) -> StoredMsg:
        """First message matching `filter_` at or after `start_seq`."""
        ...

    def load_last_msg(self, filter_: str) -> StoredMsg: ...

    def load_batch(self, filter_: str, start_seq: int, max_msgs: int, max_bytes: int = 0) -> MsgBatch:
        """Up to `max_msgs` matching messages from `start_seq`; stops after the message whose
        subject + headers + payload bytes reach `max_bytes` (0: no byte bound), like Direct Get."""
        ...

    def headers_from(self, start_seq: int) -> list[tuple[int, int, bytes]]:
        """(seq, timestamp, headers) of every message at or after `start_seq` that has headers, ascending:
        what the duplicate window is read from, without reading subjects and payloads."""
        ...

    def subject_for_seq(self, seq: int) -> str: ...

    def get_seq_from_time(self, ts_ns: int) -> int:
        """First sequence stored at or after `ts_ns` (last_seq + 1 if none)."""
        ...

    def multi_last_seqs(
        self,
        filters: Sequence[str],
        up_to_seq: int = 0,
        *,
        up_to_ts_ns: int | None = None,
        max_allowed: int = 1024,
    ) -> list[int]:
        """Ascending last sequence of every subject matching any filter, at or below `up_to_seq`
        (or stored before `up_to_ts_ns`); TooManyResultsError past `max_allowed` subjects."""
        ...

    def num_pending(self, start_seq: int, filter_: str, last_per_subject: bool = False) -> int:
        """Matching messages at or after `start_seq` (Nats-Num-Pending); with
        `last_per_subject`, matching subjects whose last message is there."""
        ...

    def filtered_state(self, start_seq: int, filter_: str) -> SimpleState: ...

    def subjects_state(self, filter_: str) -> dict[str, SimpleState]: ...

    def subjects_totals(self, filter_: str) -> dict[str, int]: ...

    def state(self, include_deleted: bool = False) -> StreamState: ...

    # -- snapshots ----------------------------------------------------------------------
    def snapshot(self) -> Iterator[bytes]:
        """The whole store (messages, limits, sequences, metadata) as a chunk stream."""
        ...

    def restore(self, chunks: Iterable[bytes]) -> None:
        """Replace the whole store with a snapshot's contents."""
        ...


__all__ = ["StreamStore"]
