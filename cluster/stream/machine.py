"""The stream state machine: committed entries applied to a StreamStore, the same on every replica.

Shaped for the Raft driver (hashicorp's FSM / etcd's apply step): `apply`
takes committed entries in log order and returns one result per entry (the
leader turns them into PubAcks and API responses), `snapshot` and `restore`
move the whole state. Every decision reads only the entry and the state
before it (no clock, no randomness), so replicas that apply the same log
hold the same messages, sequences, timestamps and duplicate window.

What is replicated state, and where it lives:
- the messages: the store;
- the applied Raft index, the stream config as of that index, and the msg id
  of the last stored message: the store's metadata value, written in the
  same atomic write group as the entries' writes, so a crash never splits
  them (entries at or below the applied index are skipped on replay);
- the duplicate window: derived from the store (see cluster/stream/dedup.py),
  rebuilt after start and restore, when first needed;
- RePublish's position (the sequence up to which leaders have republished,
  see cluster/stream/republish.py), and whether the stream has never had a
  sequence (nats-server then reports first_seq 0): the metadata value.

Timestamps: a message is stored at max(leader's timestamp, previous message's
timestamp), so time never runs backwards in a stream across leader changes.

Expiry: writes remove what is due at their own timestamp (in the store), and
the leader proposes `Expire` entries carrying its clock when something falls
due between writes (cluster/stream/expiry.py). Applying one removes the same
messages on every replica; with subject delete markers it also stores a
marker (cluster/stream/markers.py) wherever the removed message was the last
of its subject, stamped with the entry's time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

import orjson
import structlog

from cluster.api.errors import ApiError, JSErrors
from cluster.stream.atomic_batch import BatchChecks
from cluster.stream.config import StorageType, StreamConfig, stream_config_from_json
from cluster.stream.dedup import DedupWindow
from cluster.stream.entries import (
    DeleteMsg,
    EntryDecodeError,
    Expire,
    Purge,
    Republished,
    Rollup,
    SkipMsgs,
    StoreAtSeq,
    StoreAtSeqs,
    StoreBatch,
    StoreMsg,
    UpdateConfig,
    decode_entry,
)
from cluster.stream.markers import (
    is_delete_marker,
    marker_headers,
    marker_ttl_seconds,
    ttl_at_least_marker_ttl,
)
from cluster.stream.publish import HDR_MSG_ID, HDR_STREAM_SOURCE, Duplicate, Rejected, check_store
from cluster.stream.republish import StoredForRepublish, republish_subject, republish_transform
from cluster.stream.schedules import HDR_NEXT as _SCHEDULE_NEXT
from cluster.stream.schedules import scheduler_to_purge
from gateway.headers import HeaderError, decode_headers
from raft.types import Entry, EntryType
from storage.config import StoreConfig
from storage.errors import (
    InvalidHeadersError,
    InvalidSubjectError,
    LimitExceededError,
    MsgNotFoundError,
    MsgTooBigError,
    SequenceMismatchError,
    TooManyResultsError,
)
from storage.group import StoreInGroup
from storage.interface import StreamStore
from storage.model import Rollup as StoreRollup
from storage.model import StoreResult, StreamState

log = structlog.get_logger(__name__)

_STORE_ROLLUP = {Rollup.NONE: None, Rollup.SUBJECT: StoreRollup.SUBJECT, Rollup.ALL: StoreRollup.ALL}
# a module name, not `EntryType.NORMAL`: the enum class's attribute lookup costs ~0.2 us per entry
_NORMAL = EntryType.NORMAL


# Not frozen: built once per applied message (see StoreMsg).
@dataclass(slots=True)
class Stored:
    """A message was stored at `seq`; `removed` are the sequences limits or a rollup took out with it.

    `republish`: on a leader (`report_republish`), what RePublish needs of it, when its mapping takes it."""

    seq: int
    ts_ns: int
    removed: tuple[int, ...] = ()
    republish: StoredForRepublish | None = None


@dataclass(frozen=True, slots=True)
class BatchStored:
    """An atomic batch was stored: one `Stored` per message, in order."""

    batch_id: str
    stored: tuple[Stored, ...]


@dataclass(frozen=True, slots=True)
class Purged:
    count: int


@dataclass(frozen=True, slots=True)
class PurgeDone:
    """A purge as the stream's consumers need it (nats-server moves each one's positions past it): its
    subject filter ("" for all) and, right after it, the stream's first and last sequences and the first
    sequence left on the filter (0: none)."""

    filter: str
    first_seq: int
    last_seq: int
    filter_first_seq: int


@dataclass(frozen=True, slots=True)
class Deleted:
    seq: int


@dataclass(frozen=True, slots=True)
class ConfigApplied:
    config: StreamConfig
    removed: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Skipped:
    last_seq: int


@dataclass(frozen=True, slots=True)
class Expired:
    """What an Expire entry removed, the delete markers it stored (each with the sequence of the
    message it took the place of), and `more`: it stopped at its limit."""

    removed: tuple[int, ...]
    markers: tuple[tuple[int, int], ...] = ()
    more: bool = False


@dataclass(frozen=True, slots=True)
class NoOp:
    """An entry with nothing to do for the stream: the leader's empty entry, a membership change, a replay."""


EntryResult = (
    Stored | BatchStored | Duplicate | Rejected | Purged | Deleted | ConfigApplied | Skipped | Expired | NoOp
)


def applied_in_metadata(meta: bytes) -> int | None:
    """The log index a stream store's metadata (StreamMachine's own, written with what it applied) says
    was applied; None when it cannot be read."""
    try:
        return int(orjson.loads(meta)["applied"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


def store_config_for(cfg: StreamConfig) -> StoreConfig:
    """The limits the store enforces, from a (normalized) stream config."""
    return StoreConfig.from_stream_config(cfg.to_json())


def _window_for(cfg: StreamConfig) -> int:
    # mirrors copy the origin verbatim and never dedup on their own (as nats-server)
    return 0 if cfg.mirror is not None else cfg.duplicate_window


class StreamStateMachine:
    """One stream's replicated state over its store; also the `StreamView` the publish checks read."""

    def __init__(self, store: StreamStore, config: StreamConfig, *, sync_writes: bool = True) -> None:
        """`config` is the assignment's config, used when the store holds no state of ours yet.

        `sync_writes` makes each apply batch durable before `apply` returns. Nodes run
        with it off: the Raft log is the durable record, a lost write group takes its
        applied index with it and replays (see docs/architecture.md, Durability).
        """
        self.store = store
        self.sync_writes = sync_writes
        self._config = config
        self._applied = 0
        self._last_msg_id = ""
        # source key ("<stream> <filter> <dest>") -> last origin sequence copied from it
        self._sources: dict[str, int] = {}
        self._last_seq = 0
        self._last_ts = 0
        self._dedup = DedupWindow(_window_for(config))
        self._config_json: dict[str, Any] = config.to_json()
        # the config as the metadata value carries it, encoded once per config rather than per apply
        self._config_bytes = orjson.dumps(self._config_json)
        # every stored message up to here was republished (-1 until known: a store written before
        # this was kept counts as republished up to its last sequence)
        self._republished = 0
        # set while this replica leads: stored results then carry what RePublish needs (only the
        # leader republishes; followers skip the lookups)
        self.report_republish = False
        # no sequence used or set yet: nats-server reports first_seq 0 for such a stream
        self._pristine = False
        # purges applied since the replica last took them (`take_purges`), for its consumers
        self.purges: list[PurgeDone] = []
        # how _store_checked stores a message: through the open write group while `apply` runs
        self._write: StoreInGroup = self._store_outside_group
        if store.metadata is not None:
            self._load_meta(store.metadata)
            self._align_store_config()
        else:
            # a new store opened with the stream's limits already (open_store) needs no second write of them
            store_config = StoreConfig.from_stream_config(self._config_json)
            if store.config != store_config:
                store.update_config(store_config)
            if config.first_seq > 0:
                # a new stream starts at first_seq, as nats-server's stores are created
                store.compact(config.first_seq)
            else:
                self._pristine = store.state().last_seq == 0
        self._reload()

    # -- what other parts read ----------------------------------------------------------

    @property
    def applied_index(self) -> int:
        return self._applied

    @property
    def config(self) -> StreamConfig:
        return self._config

    @property
    def last_seq(self) -> int:
        return self._last_seq

    @property
    def last_msg_id(self) -> str:
        return self._last_msg_id

    @property
    def dedup_window(self) -> DedupWindow:
        return self._dedup

    @property
    def republished_through(self) -> int:
        """The replicated RePublish position (cluster/stream/republish.py)."""
        return self._republished

    def stream_state(self, include_deleted: bool = False) -> StreamState:
        """The store's state as nats-server reports it: first_seq 0 while the stream never had a sequence
        (nothing stored, purged or skipped, no first_seq configured), last_seq + 1 once it has."""
        state = self.store.state(include_deleted=include_deleted)
        return dataclasses.replace(state, first_seq=0) if self._pristine else state

    def source_position(self, key: str) -> int:
        """The last origin sequence copied from the source `key` (see `source_header`), 0 if none."""
        return self._sources.get(key, 0)

    def last_seq_for_subject(self, subject: str) -> int:
        try:
            return self.store.load_last_msg(subject).seq
        except MsgNotFoundError:
            return 0

    def duplicate_of(self, msg_id: str, now_ns: int) -> int | None:
        return self._dedup.lookup(msg_id, now_ns)

    def last_header_on(self, subject: str) -> bytes | None:
        try:
            return self.store.load_last_msg(subject).headers or b""
        except MsgNotFoundError:
            return None

    # -- the Raft driver's side -----------------------------------------------------------

    def apply(self, entries: Sequence[Entry]) -> list[EntryResult]:
        """Apply committed entries in order, in one durable write group; one result per entry."""
        results: list[EntryResult] = []
        with self.store.write_group(sync=self.sync_writes) as group:
            # messages go through the open group, which spares each of them the store's lock and checks
            self._write = group.store_msg or self._store_outside_group
            try:
                for entry in entries:
                    if entry.index <= self._applied:
                        results.append(NoOp())
                        continue
                    results.append(self._apply_one(entry))
                    self._applied = entry.index
            finally:
                self._write = self._store_outside_group
            group.meta = self._meta_bytes()
        return results

    def _store_outside_group(
        self, subject: str, headers: bytes | None, payload: bytes, ts_ns: int | None, rollup: StoreRollup | None
    ) -> StoreResult:
        return self.store.store_msg(subject, headers, payload, ts_ns, rollup=rollup)

    def snapshot_chunks(self) -> Iterator[bytes]:
        """The whole replicated state (the store, whose metadata carries ours) as a chunk stream."""
        return self.store.snapshot()

    def snapshot(self) -> bytes:
        return b"".join(self.snapshot_chunks())

    def restore(self, data: bytes | Iterable[bytes]) -> None:
        """Replace everything with a snapshot taken by `snapshot` on any replica."""
        # a bytearray or memoryview is one chunk too: restore reads chunks through the buffer protocol
        chunks = cast("Iterable[bytes]", [data] if isinstance(data, bytes | bytearray | memoryview) else data)
        self.store.restore(chunks)
        meta = self.store.metadata
        if meta is None:
            raise ValueError("snapshot carries no stream state machine metadata")
        self._load_meta(meta)
        self._align_store_config()
        self._reload()

    # -- applying -------------------------------------------------------------------------

    def _apply_one(self, entry: Entry) -> EntryResult:
        if entry.type is not _NORMAL or not entry.data:
            return NoOp()
        try:
            op = decode_entry(entry.data)
        except EntryDecodeError as exc:
            # a newer version's op: every replica of this version skips it the same way
            log.warning(
                "stream_entry_undecodable", stream=self._config.name, index=entry.index, error=str(exc)
            )
            return Rejected(JSErrors.STREAM_GENERAL(err=f"undecodable stream entry: {exc}"))
        if isinstance(op, StoreMsg):
            return self._store_msg(op)
        if isinstance(op, StoreAtSeq):
            return self._store_at_seq(op)
        if isinstance(op, StoreAtSeqs):
            return self._store_at_seqs(op)
        if isinstance(op, StoreBatch):
            return self._store_batch(op)
        if isinstance(op, Purge):
            return self._purge(op)
        if isinstance(op, DeleteMsg):
            return self._delete(op)
        if isinstance(op, UpdateConfig):
            return self._update_config(op.config)
        if isinstance(op, SkipMsgs):
            return self._skip(op)
        if isinstance(op, Republished):
            self._republished = max(self._republished, op.seq)
            return NoOp()
        return self._expire(op)

    def _store_msg(self, op: StoreMsg) -> EntryResult:
        ts = max(op.timestamp_ns, self._last_ts)
        if ts != op.timestamp_ns:
            op = dataclasses.replace(op, timestamp_ns=ts)
        verdict = check_store(self._config, op, self)
        if verdict is not None:
            return verdict
        return self._store_checked(op)

    def _store_batch(self, op: StoreBatch) -> EntryResult:
        """All of an atomic batch or none of it: every message is checked against the stream plus the
        batch's earlier messages before the first is stored, all under one timestamp."""
        if not self._config.allow_atomic:
            return Rejected(JSErrors.ATOMIC_PUBLISH_DISABLED())
        if not op.messages:
            return Rejected(JSErrors.ATOMIC_PUBLISH_INCOMPLETE_BATCH())
        ts = max(op.messages[0].timestamp_ns, self._last_ts)
        messages = [
            m if m.timestamp_ns == ts else dataclasses.replace(m, timestamp_ns=ts) for m in op.messages
        ]
        checks = BatchChecks(self._config, self)
        for message in messages:
            verdict = checks.check(message)
            if verdict is not None:
                return verdict
        stored: list[Stored] = []
        for message in messages:
            result = self._store_checked(message)
            if not isinstance(result, Stored):
                # The checks above cover every refusal a store makes (size, limits, subject): reaching
                # this is a bug, and the batch is then only partly stored, on every replica alike.
                log.error("atomic_batch_partly_stored", stream=self._config.name, batch=op.batch_id)
                return result
            stored.append(result)
        return BatchStored(op.batch_id, tuple(stored))

    def totals(self) -> tuple[int, int]:
        state = self.store.state()
        return state.messages, state.bytes

    def subject_total(self, subject: str) -> int:
        return self.store.subjects_totals(subject).get(subject, 0)

    def _store_checked(self, op: StoreMsg) -> EntryResult:
        if op.header and _SCHEDULE_NEXT in op.header:
            self._stop_schedule(op.header)
        if op.header:
            # here, not on the leader: sourced copies get the floor too, as nats-server applies it
            header = ttl_at_least_marker_ttl(self._config, op.header)
            if header is not op.header:
                op = dataclasses.replace(op, header=header)
        # every replica applies every message: the calls that have nothing to do are skipped here
        republish = self._for_republish(op.subject, op.header, op.payload) if self.report_republish else None
        try:
            result = self._write(
                op.subject, op.header or None, op.payload, op.timestamp_ns, _STORE_ROLLUP[op.rollup]
            )
        except ApiError as error:
            return Rejected(error)
        except (LimitExceededError, MsgTooBigError, InvalidSubjectError, InvalidHeadersError) as exc:
            return Rejected(_store_error(exc))
        seq, ts_ns, removed = result.seq, result.ts_ns, result.removed
        self._last_seq, self._last_ts, self._last_msg_id = seq, ts_ns, op.msg_id
        self._pristine = False
        if op.header and _SOURCE_MARK in op.header:
            self._record_source(op.header)
        dedup = self._dedup
        if removed:
            dedup.forget_seqs(removed)
        if op.msg_id and seq not in removed:
            dedup.record(op.msg_id, seq, ts_ns)
        dedup.expire(ts_ns)
        return Stored(seq, ts_ns, removed, republish)

    def _stop_schedule(self, header: bytes) -> None:
        """`Nats-Schedule-Next: purge` with `Nats-Scheduler`: the schedule subject is purged with the
        write (a one-off schedule's produced message, or a client stopping a schedule), as nats-server."""
        subject = scheduler_to_purge(header)
        if subject is None:
            return
        try:
            if self.store.purge_ex(subject):
                self._forget_missing()
        except InvalidSubjectError:
            pass  # refused before proposing: only a log written by another version holds one

    def _store_at_seq(self, op: StoreAtSeq) -> EntryResult:
        if op.seq <= self._last_seq:
            # a copy re-sent after a reconnect: already here
            return Duplicate(op.seq)
        republish = self._for_republish(op.subject, op.header, op.payload)
        try:
            result = self.store.store_raw_msg(
                op.subject, op.header or None, op.payload, op.seq, op.timestamp_ns
            )
        except SequenceMismatchError:
            return Duplicate(op.seq)
        except (LimitExceededError, MsgTooBigError, InvalidSubjectError, InvalidHeadersError) as exc:
            return Rejected(_store_error(exc))
        self._last_seq, self._last_ts, self._last_msg_id = result.seq, result.ts_ns, ""
        self._pristine = False
        self._dedup.forget_seqs(result.removed)
        return Stored(result.seq, result.ts_ns, result.removed, republish)

    def _store_at_seqs(self, op: StoreAtSeqs) -> EntryResult:
        """Each message as a STORE_AT_SEQ of its own; the first that is not stored ends the entry with
        its result (a restore then fails, and deletes what it stored), else the last one's."""
        result: EntryResult = NoOp()
        for message in op.messages:
            result = self._store_at_seq(message)
            if not isinstance(result, Stored):
                return result
        return result

    def _for_republish(self, subject: str, header: bytes, payload: bytes) -> StoredForRepublish | None:
        """On a leader, before storing: where RePublish sends the message, and the subject's
        previous sequence (Nats-Last-Sequence), which limits may remove as the message is stored."""
        if not self.report_republish:
            return None
        transform = republish_transform(self._config.republish)
        dest = None if transform is None else republish_subject(transform, subject)
        if dest is None:
            return None
        return StoredForRepublish(dest, subject, header, payload, last_subject_seq(self.store, subject))

    def _purge(self, op: Purge) -> EntryResult:
        if self._config.sealed:
            return Rejected(JSErrors.STREAM_SEALED())
        if self._config.deny_purge:
            return Rejected(JSErrors.STREAM_PURGE_FAILED(err="stream purge not permitted"))
        try:
            count = self.store.purge_ex(op.filter, op.seq, op.keep)
        except InvalidSubjectError:
            return Purged(0)  # a filter that is no valid filter matches nothing, as in nats-server
        if (
            op.filter in ("", ">")
            and op.keep == 0
            and (op.seq > 1 or (op.seq == 0 and self._config.num_replicas <= 1))
        ):
            # As nats-server 2.15.1 reports it after a purge of an unused stream: below a sequence sets
            # first_seq there; everything sets it to 1 on R1 only (a replicated stream stays unused);
            # by subject, with keep or below sequence 1 leaves it unused.
            self._pristine = False
        self._forget_missing()
        state = self.store.state()
        self._last_seq = state.last_seq
        filter_first = state.first_seq
        if op.filter not in ("", ">"):
            filter_first = self.store.filtered_state(state.first_seq, op.filter).first
        self.purges.append(PurgeDone(op.filter, state.first_seq, state.last_seq, filter_first))
        return Purged(count)

    def take_purges(self) -> list[PurgeDone]:
        """The purges applied since the last call, oldest first."""
        purges, self.purges = self.purges, []
        return purges

    def _delete(self, op: DeleteMsg) -> EntryResult:
        if self._config.sealed:
            return Rejected(JSErrors.STREAM_SEALED())
        if self._config.deny_delete:
            return Rejected(JSErrors.STREAM_MSG_DELETE_FAILED(err="message delete not permitted"))
        removed = self.store.erase_msg(op.seq) if op.erase else self.store.remove_msg(op.seq)
        if not removed:
            return Rejected(self._not_deleted(op.seq))
        self._dedup.forget_seqs((op.seq,))
        return Deleted(op.seq)

    def _not_deleted(self, seq: int) -> ApiError:
        """Why `seq` could not be deleted, in nats-server's words: its file store looks a sequence up
        in its blocks only inside [first_seq, last_seq] of a stream holding messages, and fails the
        others (10057: `no message found`, or `stream store EOF` past the last); a sequence inside
        that was deleted already is `sequence N not found` (10043), as every sequence is in memory."""
        if self._config.storage is StorageType.FILE:
            state = self.store.state()
            if seq == 0 or state.messages == 0 or not state.first_seq <= seq <= state.last_seq:
                err = "stream store EOF" if seq > state.last_seq else "no message found"
                return JSErrors.STREAM_MSG_DELETE_FAILED(err=err)
        return JSErrors.SEQUENCE_NOT_FOUND(seq=seq)

    def _update_config(self, config: StreamConfig) -> EntryResult:
        previous_window = _window_for(self._config)
        if republish_transform(self._config.republish) is None:
            # RePublish starts with the next message, as in nats-server: nothing before it is owed
            self._republished = self._last_seq
        self._set_config(config)
        removed = self.store.update_config(store_config_for(config), self._last_ts or None)
        self._dedup.forget_seqs(removed)
        if _window_for(config) != previous_window:
            # a changed window must hold what a freshly started replica would rebuild
            self._rebuild_dedup()
        return ConfigApplied(config, removed)

    def _skip(self, op: SkipMsgs) -> EntryResult:
        if op.count > 0:
            self.store.skip_msgs(self._last_seq + 1, op.count)
            self._last_seq += op.count
            self._pristine = False
        return Skipped(self._last_seq)

    def _expire(self, op: Expire) -> EntryResult:
        now = max(op.now_ns, self._last_ts)
        marker_ttl = marker_ttl_seconds(self._config)
        if marker_ttl <= 0:
            removed = self.store.expire(now, op.limit)
            self._dedup.forget_seqs(removed)
            return Expired(removed, more=bool(op.limit) and len(removed) >= op.limit)
        due = self.store.expiry_due(now, op.limit)
        gone: list[int] = []
        markers: list[tuple[int, int]] = []
        for seq in due:
            try:
                msg = self.store.load_msg(seq)
            except MsgNotFoundError:
                continue  # taken out by a marker's limits a moment ago
            last_of_subject = self.store.subjects_totals(msg.subject).get(msg.subject) == 1
            self.store.remove_msg(seq)
            gone.append(seq)
            if last_of_subject and not is_delete_marker(msg.headers):
                stored = self._store_marker(msg.subject, marker_ttl, now)
                if stored is not None:
                    markers.append((stored.seq, seq))
                    gone.extend(stored.removed)
        self._dedup.forget_seqs(gone)
        return Expired(tuple(sorted(gone)), tuple(markers), more=bool(op.limit) and len(due) >= op.limit)

    def _store_marker(self, subject: str, ttl_seconds: int, now: int) -> Stored | None:
        """The marker that takes the place of `subject`'s last message (nats-server proposes it as a
        publish with a subject roll-up; here it is part of applying the Expire entry)."""
        try:
            result = self.store.store_msg(
                subject, marker_headers(ttl_seconds), b"", now, rollup=StoreRollup.SUBJECT
            )
        except (LimitExceededError, MsgTooBigError) as exc:
            # a full discard-new stream refuses the marker. nats-server's marker fails the same way,
            # but there the expired message stays until one fits; here it goes without a marker
            log.info("delete_marker_refused", stream=self._config.name, subject=subject, error=str(exc))
            return None
        self._last_seq, self._last_ts, self._last_msg_id = result.seq, result.ts_ns, ""
        return Stored(result.seq, result.ts_ns, result.removed)

    # -- state kept beside the store ------------------------------------------------------

    def _set_config(self, config: StreamConfig) -> None:
        self._config = config
        self._config_json = config.to_json()
        self._config_bytes = orjson.dumps(self._config_json)

    def _record_source(self, header: bytes) -> None:
        try:
            value = decode_headers(header).get(HDR_STREAM_SOURCE) or ""
        except HeaderError:
            return
        parsed = parse_source_header(value)
        if parsed is not None:
            key, seq = parsed
            self._sources[key] = max(seq, self._sources.get(key, 0))

    def _meta_bytes(self) -> bytes:
        """The JSON object {applied, last_msg_id, config, sources, republished, pristine}, byte for byte
        what orjson.dumps gives for it, with the config's part encoded once per config: written with
        every applied run, where encoding the whole config again cost more than the rest."""
        return b"".join(
            (
                b'{"applied":',
                b"%d" % self._applied,
                b',"last_msg_id":',
                orjson.dumps(self._last_msg_id),
                b',"config":',
                self._config_bytes,
                b',"sources":',
                orjson.dumps(self._sources),
                b',"republished":',
                b"%d" % self._republished,
                b',"pristine":',
                b"true" if self._pristine else b"false",
                b"}",
            )
        )

    def _load_meta(self, meta: bytes) -> None:
        body = orjson.loads(meta)
        self._applied = int(body["applied"])
        self._last_msg_id = str(body.get("last_msg_id", ""))
        self._sources = {str(k): int(v) for k, v in body.get("sources", {}).items()}
        self._set_config(stream_config_from_json(body["config"]))
        self._republished = int(body.get("republished", -1))
        pristine = body.get("pristine")
        if pristine is None:  # written before this was kept: a stream that never used a sequence
            state = self.store.state()
            pristine = state.last_seq == 0 and state.first_seq <= 1
        self._pristine = bool(pristine)

    def _align_store_config(self) -> None:
        """The store's limits are a function of the stream config; a store (or snapshot) written by a
        version whose StoreConfig had fewer fields (no allow_msg_ttl, no marker TTL) gets them here."""
        wanted = store_config_for(self._config)
        if self.store.config != wanted:
            self.store.update_config(wanted)

    def _reload(self) -> None:
        state = self.store.state()
        self._last_seq, self._last_ts = state.last_seq, state.last_ts_ns
        if self._republished < 0:
            self._republished = self._last_seq
        self._rebuild_dedup()

    def _forget_missing(self) -> None:
        if self._dedup.stale:
            return  # rebuilt from the store, without them, when first needed
        gone = []
        for seq in self._dedup.seqs():
            try:
                self.store.load_msg(seq)
            except MsgNotFoundError:
                gone.append(seq)
        self._dedup.forget_seqs(gone)

    def _rebuild_dedup(self) -> None:
        """The window a replica holds at this point of the log: read back from the store when first
        needed (cluster/stream/dedup.py), so that opening a stream does not wait for it."""
        self._dedup.rebuild_later(_window_for(self._config), self._window_items)

    def _window_items(self) -> Iterator[tuple[str, int, int]]:
        """(msg id, seq, timestamp) of the stored messages inside the window as of the last applied
        entry, oldest first."""
        window = _window_for(self._config)
        if window <= 0 or self._last_seq == 0:
            return
        start = self.store.get_seq_from_time(self._last_ts - window + 1)
        for seq, ts_ns, headers in self.store.headers_from(start):
            msg_id = _msg_id(headers)
            if msg_id:
                yield msg_id, seq, ts_ns


_SOURCE_MARK = HDR_STREAM_SOURCE.encode() + b":"


def source_header(key: str, seq: int, subject: str) -> str:
    """The `Nats-Stream-Source` value a sourced message carries, as nats-server writes it: the source's
    index name (`StreamSource.index_name`: origin, filters, destinations) around the origin sequence,
    then the subject the message had in the origin. (nats-server ends it with the origin stream's
    identity, which jetraft streams do not have.)"""
    name, _, filters_and_destinations = key.partition(" ")
    return f"{name} {seq} {filters_and_destinations} {subject}"


def parse_source_header(value: str) -> tuple[str, int] | None:
    """(source key, origin sequence) of a `Nats-Stream-Source` value."""
    parts = value.split(" ")
    if len(parts) < 2 or not parts[1].isdigit():
        return None
    filters_and_destinations = parts[2:4] if len(parts) >= 4 else [">", ">"]
    return " ".join([parts[0], *filters_and_destinations]), int(parts[1])


def last_subject_seq(store: StreamStore, subject: str, below: int = 0) -> int:
    """The last sequence stored on literal `subject` (before `below` when given), 0 if none is left."""
    if below == 1:
        return 0
    try:
        seqs = store.multi_last_seqs([subject], below - 1 if below else 0)
    except (InvalidSubjectError, TooManyResultsError):
        return 0
    return max(seqs, default=0)


def _msg_id(headers: bytes | None) -> str:
    if not headers:
        return ""
    try:
        return decode_headers(headers).get(HDR_MSG_ID) or ""
    except HeaderError:
        return ""


def _store_error(exc: Exception) -> ApiError:
    if isinstance(exc, MsgTooBigError):
        return JSErrors.STREAM_MESSAGE_EXCEEDS_MAXIMUM()
    if isinstance(exc, LimitExceededError):
        # nats-server answers a full discard-new stream with its store error text, e.g. "maximum messages exceeded"
        return JSErrors.STREAM_STORE_FAILED(err=str(exc))
    return JSErrors.STREAM_GENERAL(err=str(exc))
