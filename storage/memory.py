"""MemoryStreamStore: the "memory" storage type, and the oracle the RocksDB store is tested against.

Deliberately plain, in the manner of nats-server's memstore: a dict from
sequence to message, per-subject (count, first, last) kept up to date by
scanning when a subject's first or last message goes, and linear walks over
the sequence range for filtered reads. Every answer is easy to check by
reading the code, which is what an oracle needs; reads over sparse filters
cost a walk over the sequence range.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

from storage.config import DiscardPolicy, StoreConfig
from storage.errors import (
    CorruptStoreError,
    InvalidRequestError,
    Limit,
    LimitExceededError,
    MsgNotFoundError,
    MsgTooBigError,
    SequenceMismatchError,
    StoreClosedError,
    StoreEOFError,
    TooManyResultsError,
)
from storage.group import WriteGroup
from storage.model import (
    MsgBatch,
    Rollup,
    SimpleState,
    StoredMsg,
    StoreResult,
    StreamState,
    memory_msg_size,
    rolled_up_subjects,
)
from storage.msg_ttl import stored_ttl
from storage.record import decode_record, encode_record
from storage.snapshot import SnapshotHeader, SnapshotReader, encode_snapshot
from storage.ttl_index import TtlIndex
from storage.validation import (
    ALL_SUBJECTS,
    check_count,
    check_filter,
    check_headers,
    check_payload,
    check_seq,
    check_subject,
    check_ts,
    is_literal,
)
from subjects.grammar import subject_matches

MAX_MULTI_LAST = 1024


class _SubjectInfo:
    __slots__ = ("count", "first", "last")

    def __init__(self, seq: int) -> None:
        self.count = 1
        self.first = seq
        self.last = seq


class MemoryStreamStore:
    """A stream store held in a dict; see storage/interface.py for the contract."""

    storage_type = "memory"
    # What a message counts towards state.bytes and max_bytes: nats-server's memory store's measure
    # (a test oracle for the file store swaps in the file record's).
    counted_size = staticmethod(memory_msg_size)

    def __init__(self, config: StoreConfig | None = None) -> None:
        self._config = config or StoreConfig()
        self._lock = threading.RLock()
        self._msgs: dict[int, StoredMsg] = {}
        self._subjects: dict[str, _SubjectInfo] = {}
        self._first_seq = 1
        self._last_seq = 0
        self._last_ts = 0
        self._bytes = 0
        self._meta: bytes | None = None
        self._closed = False
        self._ttl = TtlIndex(self._config.allow_msg_ttl)

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def config(self) -> StoreConfig:
        return self._config

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def metadata(self) -> bytes | None:
        with self._open():
            return self._meta

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._msgs = {}
            self._subjects = {}
            self._ttl.clear()

    @contextmanager
    def write_group(self, *, sync: bool = False) -> Iterator[WriteGroup]:
        """Holds the lock for the group; memory has nothing to sync, so `sync` changes nothing."""
        group = WriteGroup(sync=sync)
        with self._open():
            try:
                yield group
            finally:
                if group.meta is not None:
                    self._meta = bytes(group.meta)

    def sync(self) -> None:
        with self._open():
            pass

    # -- writes ------------------------------------------------------------------------

    def store_msg(
        self,
        subject: str,
        headers: bytes | None,
        payload: bytes,
        ts_ns: int | None = None,
        *,
        rollup: Rollup | None = None,
    ) -> StoreResult:
        with self._open():
            return self._store(subject, headers, payload, 0, ts_ns, rollup)

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
        with self._open():
            check_seq(seq)
            if seq <= self._last_seq:
                raise SequenceMismatchError(f"sequence {seq} is not after last sequence {self._last_seq}")
            return self._store(subject, headers, payload, seq, ts_ns, rollup)

    def skip_msg(self, seq: int = 0) -> int:
        with self._open():
            seq = self._next_seq_or_mismatch(seq)
            self._skip_to(seq)
            return seq

    def skip_msgs(self, seq: int, num: int) -> None:
        with self._open():
            seq = self._next_seq_or_mismatch(seq)
            if check_count(num, "num") == 0:
                raise InvalidRequestError("num must be at least 1")
            self._skip_to(check_seq(seq + num - 1))

    def remove_msg(self, seq: int) -> bool:
        with self._open():
            return self._remove(check_seq(seq))

    def erase_msg(self, seq: int) -> bool:
        # Payload bytes objects are immutable and freed with the message.
        return self.remove_msg(seq)

    def purge(self) -> int:
        with self._open():
            return self._purge_all(self._last_seq + 1)

    def purge_ex(self, subject: str = "", seq: int = 0, keep: int = 0) -> int:
        with self._open():
            filter_ = check_filter(subject)
            check_seq(seq)
            check_count(keep, "keep")
            if seq == 1:
                return 0
            if filter_ == ALL_SUBJECTS:
                if keep == 0 and seq == 0:
                    return self._purge_all(self._last_seq + 1)
                if seq > 1:
                    return self._compact(seq)
            matching = self._filtered_state(1, filter_)
            if matching.msgs == 0:
                return 0
            to_purge = 0
            if keep > 0:
                if keep >= matching.msgs:
                    return 0
                to_purge = matching.msgs - keep
            last = matching.last if seq == 0 else seq - 1
            purged = 0
            for candidate in range(matching.first, last + 1):
                msg = self._msgs.get(candidate)
                if msg is not None and _matches(filter_, msg.subject):
                    self._remove(candidate)
                    purged += 1
                    if to_purge and purged >= to_purge:
                        break
            return purged

    def compact(self, seq: int) -> int:
        with self._open():
            return self._compact(check_seq(seq))

    def truncate(self, seq: int) -> None:
        with self._open():
            check_seq(seq)
            if seq > self._last_seq:
                raise InvalidRequestError(
                    f"cannot truncate to {seq}, past the last sequence {self._last_seq}"
                )
            if seq == 0:
                self._purge_all(1)
                self._last_ts = 0
                return
            for candidate in range(self._last_seq, seq, -1):
                if candidate in self._msgs:
                    self._remove(candidate)
            kept = self._msgs.get(seq)
            if kept is not None:
                self._last_ts = kept.ts_ns
            self._last_seq = seq
            if not self._msgs:
                self._first_seq = seq + 1
            self._ttl.reset_age_cursor()

    def expiry_due(self, now_ns: int, limit: int = 0) -> tuple[int, ...]:
        with self._open():
            return tuple(self._due(check_ts(now_ns), check_count(limit, "limit")))

    def expire(self, now_ns: int, limit: int = 0) -> tuple[int, ...]:
        with self._open():
            due = self._due(check_ts(now_ns), check_count(limit, "limit"))
            for seq in due:
                self._remove(seq)
            return tuple(due)

    def next_expiry_ns(self) -> int | None:
        with self._open():
            next_ttl = self._ttl.next_deadline()
            max_age = self._config.max_age_ns
            aging = self._first_aging() if max_age > 0 else None
            if aging is None:
                return next_ttl
            by_age = self._msgs[aging].ts_ns + max_age
            return by_age if next_ttl is None else min(by_age, next_ttl)

    def update_config(self, config: StoreConfig, now_ns: int | None = None) -> tuple[int, ...]:
        with self._open():
            self._config = config
            self._ttl.set_active(config.allow_msg_ttl)
            removed: list[int] = []
            self._enforce_msg_and_byte_limits(removed)
            if config.max_msgs_per_subject > 0:
                for subject in list(self._subjects):
                    self._enforce_subject_limit(subject, removed)
            if now_ns is not None and config.expires_on_writes:
                self._expire(check_ts(now_ns), removed)
            return tuple(sorted(removed))

    # -- reads -------------------------------------------------------------------------

    def load_msg(self, seq: int) -> StoredMsg:
        with self._open():
            msg = self._msgs.get(check_seq(seq))
            if msg is None:
                raise MsgNotFoundError(f"no message at sequence {seq}")
            return msg

    def load_next_msg(self, filter_: str, start_seq: int) -> StoredMsg:
        with self._open():
            msg = self._next_match(check_filter(filter_), check_seq(start_seq, "start sequence"))
            if msg is None:
                raise StoreEOFError(f"no message matching {filter_!r} at or after sequence {start_seq}")
            return msg

    def load_last_msg(self, filter_: str) -> StoredMsg:
        with self._open():
            seq = self._last_match_seq(check_filter(filter_), self._last_seq)
            if seq == 0:
                raise MsgNotFoundError(f"no message matching {filter_!r}")
            return self._msgs[seq]

    def load_batch(self, filter_: str, start_seq: int, max_msgs: int, max_bytes: int = 0) -> MsgBatch:
        with self._open():
            filter_ = check_filter(filter_)
            seq = check_seq(start_seq, "start sequence")
            if check_count(max_msgs, "max_msgs") == 0:
                raise InvalidRequestError("max_msgs must be at least 1")
            check_count(max_bytes, "max_bytes")
            found: list[StoredMsg] = []
            sent_bytes = 0
            while len(found) < max_msgs:
                msg = self._next_match(filter_, seq)
                if msg is None:
                    break
                found.append(msg)
                seq = msg.seq + 1
                sent_bytes += len(msg.subject) + len(msg.headers or b"") + len(msg.payload)
                if max_bytes and sent_bytes >= max_bytes:
                    break
            return MsgBatch(tuple(found), self._filtered_state(seq, filter_).msgs)

    def headers_from(self, start_seq: int) -> list[tuple[int, int, bytes]]:
        with self._open():
            seq = check_seq(start_seq, "start sequence")
            return sorted(
                (m.seq, m.ts_ns, m.headers) for m in self._msgs.values() if m.seq >= seq and m.headers
            )

    def subject_for_seq(self, seq: int) -> str:
        return self.load_msg(seq).subject

    def get_seq_from_time(self, ts_ns: int) -> int:
        with self._open():
            return self._seq_from_time(check_ts(ts_ns))

    def multi_last_seqs(
        self,
        filters: Sequence[str],
        up_to_seq: int = 0,
        *,
        up_to_ts_ns: int | None = None,
        max_allowed: int = MAX_MULTI_LAST,
    ) -> list[int]:
        with self._open():
            checked = [check_filter(f) for f in filters]
            check_seq(up_to_seq, "up_to_seq")
            if up_to_ts_ns is not None and up_to_seq:
                raise InvalidRequestError("give up_to_seq or up_to_ts_ns, not both")
            if not self._msgs:
                return []
            if up_to_ts_ns is not None:
                from_time = self._seq_from_time(check_ts(up_to_ts_ns))
                if from_time <= self._first_seq:
                    return []
                up_to_seq = from_time - 1
            if up_to_seq == 0:
                up_to_seq = self._last_seq
            seqs: set[int] = set()
            for filter_ in checked:
                for subject in self._matching_subjects(filter_):
                    seq = self._last_match_seq(subject, up_to_seq)
                    if seq:
                        seqs.add(seq)
                if max_allowed > 0 and len(seqs) > max_allowed:
                    raise TooManyResultsError(f"more than {max_allowed} subjects match")
            return sorted(seqs)

    def num_pending(self, start_seq: int, filter_: str, last_per_subject: bool = False) -> int:
        with self._open():
            filter_ = check_filter(filter_)
            start = check_seq(start_seq, "start sequence")
            if last_per_subject:
                return sum(1 for s in self._matching_subjects(filter_) if self._subjects[s].last >= start)
            return self._filtered_state(start, filter_).msgs

    def filtered_state(self, start_seq: int, filter_: str) -> SimpleState:
        with self._open():
            return self._filtered_state(check_seq(start_seq, "start sequence"), check_filter(filter_))

    def subjects_state(self, filter_: str) -> dict[str, SimpleState]:
        with self._open():
            return {
                subject: SimpleState(info.count, info.first, info.last)
                for subject in self._matching_subjects(check_filter(filter_))
                for info in (self._subjects[subject],)
            }

    def subjects_totals(self, filter_: str) -> dict[str, int]:
        with self._open():
            return {s: self._subjects[s].count for s in self._matching_subjects(check_filter(filter_))}

    def state(self, include_deleted: bool = False) -> StreamState:
        with self._open():
            messages = len(self._msgs)
            span = self._last_seq - self._first_seq + 1 if messages else 0
            deleted: tuple[int, ...] | None = None
            if include_deleted:
                deleted = tuple(
                    seq for seq in range(self._first_seq, self._last_seq + 1) if seq not in self._msgs
                )
            return StreamState(
                messages=messages,
                bytes=self._bytes,
                first_seq=self._first_seq,
                first_ts_ns=self._msgs[self._first_seq].ts_ns if messages else 0,
                last_seq=self._last_seq,
                last_ts_ns=self._last_ts,
                num_subjects=len(self._subjects),
                num_deleted=span - messages,
                deleted=deleted,
            )

    # -- snapshots ---------------------------------------------------------------------

    def snapshot(self) -> Iterator[bytes]:
        with self._open():
            # Messages are immutable, so a copy of the references is a consistent view.
            msgs = list(self._msgs.values())
            header = SnapshotHeader(
                config=self._config,
                first_seq=self._first_seq,
                last_seq=self._last_seq,
                last_ts_ns=self._last_ts,
                messages=len(msgs),
                # the snapshot's check sums its records' lengths, not what the memory store counts
                bytes=sum(m.size for m in msgs),
                metadata=self._meta,
            )
        records = (encode_record(m.subject.encode(), m.headers, m.payload, m.seq, m.ts_ns) for m in msgs)
        return encode_snapshot(header, records)

    def restore(self, chunks: Iterable[bytes]) -> None:
        """Replace the whole store with a snapshot's contents; on a bad snapshot nothing changes."""
        with self._open():
            reader = SnapshotReader(chunks)
            header = reader.header
            msgs: dict[int, StoredMsg] = {}
            subjects: dict[str, _SubjectInfo] = {}
            ttl = TtlIndex(header.config.allow_msg_ttl)
            total = 0
            previous = header.first_seq - 1
            for record in reader.records():
                msg = decode_record(record)
                _check_restored_seq(msg.seq, previous, header.last_seq)
                previous = msg.seq
                msgs[msg.seq] = msg
                total += self._size_of(msg)
                if msg.headers:
                    ttl.add(msg.seq, msg.ts_ns, stored_ttl(msg.headers))
                info = subjects.get(msg.subject)
                if info is None:
                    subjects[msg.subject] = _SubjectInfo(msg.seq)
                else:
                    info.count += 1
                    info.last = msg.seq
            if msgs and next(iter(msgs)) != header.first_seq:
                raise CorruptStoreError("snapshot's first record is not at its first_seq")
            self._config = header.config
            self._msgs = msgs
            self._subjects = subjects
            self._ttl = ttl
            self._first_seq = header.first_seq
            self._last_seq = header.last_seq
            self._last_ts = header.last_ts_ns
            self._bytes = total
            self._meta = header.metadata

    # -- internals ---------------------------------------------------------------------

    def _size_of(self, msg: StoredMsg) -> int:
        headers = msg.headers
        return self.counted_size(
            len(msg.subject.encode()), None if headers is None else len(headers), len(msg.payload)
        )

    @contextmanager
    def _open(self) -> Iterator[None]:
        with self._lock:
            if self._closed:
                raise StoreClosedError("stream store is closed")
            yield

    def _store(
        self,
        subject: str,
        headers: bytes | None,
        payload: bytes,
        seq: int,
        ts_ns: int | None,
        rollup: Rollup | None,
    ) -> StoreResult:
        subject_bytes = check_subject(subject)
        headers = check_headers(headers)
        payload = check_payload(payload)
        ts = time.time_ns() if ts_ns is None else check_ts(ts_ns)
        rollup = None if rollup is None else Rollup(rollup)
        config = self._config
        body_size = len(headers or b"") + len(payload)
        if 0 < config.max_msg_size < body_size:
            raise MsgTooBigError(body_size, config.max_msg_size)
        size = self.counted_size(len(subject_bytes), None if headers is None else len(headers), len(payload))
        self._check_discard_new(subject, size, rollup)

        if seq == 0:
            seq = self._last_seq + 1
        msg = StoredMsg(subject, headers, payload, seq, ts)
        if not self._msgs:
            self._first_seq = seq
        self._msgs[seq] = msg
        self._bytes += size
        self._last_seq = seq
        self._last_ts = ts
        info = self._subjects.get(subject)
        if info is None:
            self._subjects[subject] = _SubjectInfo(seq)
        else:
            info.count += 1
            info.last = seq
        if headers:
            self._ttl.add(seq, ts, stored_ttl(headers))

        removed: list[int] = []
        self._enforce_subject_limit(subject, removed)
        self._enforce_msg_and_byte_limits(removed)
        if rollup is Rollup.SUBJECT:
            for rolled in rolled_up_subjects(subject, self._subjects):
                info = self._subjects.get(rolled)
                if info is None:
                    continue
                for candidate in range(info.first, seq):
                    msg_at = self._msgs.get(candidate)
                    if msg_at is not None and msg_at.subject == rolled:
                        self._remove(candidate)
                        removed.append(candidate)
        elif rollup is Rollup.ALL:
            for candidate in range(self._first_seq, seq):
                if self._remove(candidate):
                    removed.append(candidate)
        if config.expires_on_writes:
            # A write's own timestamp is a clock every replica agrees on.
            self._expire(ts, removed)
        return StoreResult(seq, ts, tuple(sorted(removed)))

    def _check_discard_new(self, subject: str, size: int, rollup: Rollup | None) -> None:
        config = self._config
        if config.discard is not DiscardPolicy.NEW:
            return
        info = self._subjects.get(subject)
        at_subject_limit = (
            info is not None and config.max_msgs_per_subject > 0 and info.count >= config.max_msgs_per_subject
        )
        if at_subject_limit and config.discard_new_per_subject and rollup is None:
            raise LimitExceededError(Limit.MAX_MSGS_PER_SUBJECT)
        # At the per-subject limit the write replaces the subject's oldest message.
        if config.max_msgs > 0 and len(self._msgs) >= config.max_msgs and not at_subject_limit:
            raise LimitExceededError(Limit.MAX_MSGS)
        if config.max_bytes > 0 and self._bytes + size > config.max_bytes:
            if not at_subject_limit:
                raise LimitExceededError(Limit.MAX_BYTES)
            assert info is not None
            if self._size_of(self._msgs[info.first]) < size:
                raise LimitExceededError(Limit.MAX_BYTES)

    def _enforce_subject_limit(self, subject: str, removed: list[int]) -> None:
        limit = self._config.max_msgs_per_subject
        if limit <= 0:
            return
        info = self._subjects.get(subject)
        while info is not None and info.count > limit:
            first = info.first
            self._remove(first)
            removed.append(first)
            info = self._subjects.get(subject)

    def _enforce_msg_and_byte_limits(self, removed: list[int]) -> None:
        config = self._config
        if config.discard is not DiscardPolicy.OLD:
            return
        while config.max_msgs > 0 and len(self._msgs) > config.max_msgs:
            removed.append(self._first_seq)
            self._remove(self._first_seq)
        while config.max_bytes > 0 and self._bytes > config.max_bytes:
            removed.append(self._first_seq)
            self._remove(self._first_seq)

    def _expire(self, now_ns: int, removed: list[int]) -> None:
        for seq in self._due(now_ns, 0):
            self._remove(seq)
            removed.append(seq)

    def _due(self, now_ns: int, limit: int) -> list[int]:
        """Ascending sequences past max_age (never-messages skipped) or past their own TTL."""
        due = self._ttl.due(now_ns)
        max_age = self._config.max_age_ns
        if max_age > 0:
            cutoff = now_ns - max_age
            seq = self._first_aging()
            aged: list[int] = []
            # Timestamps never decrease along the sequence, so the walk stops at the first young message.
            while seq is not None and self._msgs[seq].ts_ns <= cutoff and not (limit and len(aged) >= limit):
                if seq not in self._ttl.never:
                    aged.append(seq)
                seq = self._live_after(seq)
            due.extend(aged)
        ordered = sorted(set(due))
        return ordered[:limit] if limit else ordered

    def _first_aging(self) -> int | None:
        first = self._first_seq if self._msgs else None
        return self._ttl.first_aging(first, self._live_at_or_after)

    def _live_at_or_after(self, seq: int) -> int | None:
        candidates = range(max(seq, self._first_seq), self._last_seq + 1)
        return next((s for s in candidates if s in self._msgs), None)

    def _live_after(self, seq: int) -> int | None:
        return self._live_at_or_after(seq + 1)

    def _remove(self, seq: int) -> bool:
        msg = self._msgs.pop(seq, None)
        if msg is None:
            return False
        if self._ttl:
            self._ttl.discard(seq)
        self._bytes -= self._size_of(msg)
        info = self._subjects[msg.subject]
        info.count -= 1
        if info.count == 0:
            del self._subjects[msg.subject]
        elif info.count == 1:
            # one left: the other end (a KV bucket with history 1 lands here on every put)
            info.first = info.last = info.last if seq == info.first else info.first
        elif seq == info.first:
            info.first = next(s for s in range(seq + 1, info.last + 1) if self._is_subject_at(s, msg.subject))
        elif seq == info.last:
            info.last = next(
                s for s in range(seq - 1, info.first - 1, -1) if self._is_subject_at(s, msg.subject)
            )
        if not self._msgs:
            self._first_seq = self._last_seq + 1
        elif seq == self._first_seq:
            self._first_seq = next(s for s in range(seq + 1, self._last_seq + 1) if s in self._msgs)
        return True

    def _is_subject_at(self, seq: int, subject: str) -> bool:
        msg = self._msgs.get(seq)
        return msg is not None and msg.subject == subject

    def _purge_all(self, first_seq: int) -> int:
        purged = len(self._msgs)
        self._msgs = {}
        self._subjects = {}
        self._ttl.clear()
        self._bytes = 0
        self._first_seq = first_seq
        self._last_seq = first_seq - 1
        return purged

    def _compact(self, seq: int) -> int:
        if seq == 0:
            return self._purge_all(self._last_seq + 1)
        if self._first_seq > seq:
            return 0
        if seq > self._last_seq:
            return self._purge_all(seq)
        purged = 0
        for candidate in range(self._first_seq, seq):
            if self._remove(candidate):
                purged += 1
        return purged

    def _skip_to(self, last: int) -> None:
        self._last_seq = last
        if not self._msgs:
            self._first_seq = last + 1

    def _next_seq_or_mismatch(self, seq: int) -> int:
        check_seq(seq)
        if seq == 0:
            return self._last_seq + 1
        if seq != self._last_seq + 1:
            raise SequenceMismatchError(f"sequence {seq} is not the next sequence {self._last_seq + 1}")
        return seq

    def _matching_subjects(self, filter_: str) -> list[str]:
        if filter_ == ALL_SUBJECTS:
            return list(self._subjects)
        if is_literal(filter_):
            return [filter_] if filter_ in self._subjects else []
        return [s for s in self._subjects if subject_matches(filter_, s)]

    def _seq_range(self, filter_: str, start: int, end: int) -> range:
        """Sequences in [start, end] that can hold `filter_`: a literal subject's own span."""
        low, high = max(start, self._first_seq), min(end, self._last_seq)
        if is_literal(filter_):
            info = self._subjects.get(filter_)
            if info is None:
                return range(0)
            low, high = max(low, info.first), min(high, info.last)
        return range(low, high + 1)

    def _next_match(self, filter_: str, start: int) -> StoredMsg | None:
        for seq in self._seq_range(filter_, start, self._last_seq):
            msg = self._msgs.get(seq)
            if msg is not None and _matches(filter_, msg.subject):
                return msg
        return None

    def _last_match_seq(self, filter_: str, up_to: int) -> int:
        if is_literal(filter_):
            info = self._subjects.get(filter_)
            if info is not None and info.last <= up_to:
                return info.last
        for seq in reversed(self._seq_range(filter_, 0, up_to)):
            msg = self._msgs.get(seq)
            if msg is not None and _matches(filter_, msg.subject):
                return seq
        return 0

    def _filtered_state(self, start: int, filter_: str) -> SimpleState:
        count = first = last = 0
        for seq in self._seq_range(filter_, start, self._last_seq):
            msg = self._msgs.get(seq)
            if msg is not None and _matches(filter_, msg.subject):
                count += 1
                first = first or seq
                last = seq
        return SimpleState(count, first, last)

    def _next_live(self, seq: int) -> int:
        return next(s for s in range(seq, self._last_seq + 1) if s in self._msgs)

    def _seq_from_time(self, ts_ns: int) -> int:
        """First sequence whose timestamp is at or after `ts_ns`; last_seq + 1 if none.

        A binary search over sequence numbers x for the first x whose next live
        message is at or after the time; with non-decreasing timestamps that is
        the exact answer, and with any timestamps every store gives the same one.
        """
        if not self._msgs:
            return self._last_seq + 1
        low = self._first_seq
        if ts_ns <= self._msgs[low].ts_ns:
            return low
        high = next(s for s in range(self._last_seq, low - 1, -1) if s in self._msgs)
        if ts_ns > self._msgs[high].ts_ns:
            return self._last_seq + 1
        while high - low > 1:
            mid = (low + high) // 2
            if self._msgs[self._next_live(mid)].ts_ns >= ts_ns:
                high = mid
            else:
                low = mid
        return self._next_live(high)


def _matches(filter_: str, subject: str) -> bool:
    return filter_ in (ALL_SUBJECTS, subject) or subject_matches(filter_, subject)


def _check_restored_seq(seq: int, previous: int, last_seq: int) -> None:
    if not previous < seq <= last_seq:
        raise CorruptStoreError(f"snapshot record {seq} is out of order or outside the sequence range")
