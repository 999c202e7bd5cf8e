"""Random operation sequences against a MemoryStreamStore counting bytes as files do (the oracle) and RocksStreamStore.

Every write's result (or error type) and, after every step, a sweep of reads
over several filters and starting points must agree between the two. The
RocksDB store is also closed and reopened, snapshotted into a fresh store and
restored from the oracle's snapshot along the way.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from storage.config import DiscardPolicy, StoreConfig
from storage.errors import LimitExceededError, StoreError
from storage.interface import StreamStore
from storage.model import Rollup
from storage.rocks import RocksStreamStore
from tests.storage.conftest import fast_temp_dir
from tests.storage.oracle import FileCountingMemoryStore

SUBJECTS = ["a", "a.b", "a.c", "a.b.c", "b.x", "b.y", "c"]
FILTERS = ["", ">", "a", "a.*", "a.>", "*.x", "b.*", "*", "c", "zz"]
HDR = b"NATS/1.0\r\nK: v\r\n\r\n"
SEC = 1_000_000_000


def ttl_header(value: str) -> bytes:
    return f"NATS/1.0\r\nNats-TTL: {value}\r\n\r\n".encode()


configs = st.builds(
    StoreConfig,
    max_msgs=st.sampled_from([-1, 3, 8]),
    max_bytes=st.sampled_from([-1, 250, 700]),
    max_age_ns=st.sampled_from([0, 6]),
    max_msg_size=st.sampled_from([-1, 40]),
    max_msgs_per_subject=st.sampled_from([-1, 1, 2]),
    discard=st.sampled_from([DiscardPolicy.OLD, DiscardPolicy.NEW]),
    discard_new_per_subject=st.booleans(),
    allow_msg_ttl=st.booleans(),
    subject_delete_marker_ttl_ns=st.sampled_from([0, 0, SEC]),
)
headers = st.sampled_from([None, HDR, ttl_header("1"), ttl_header("2"), ttl_header("never"), ttl_header("x")])
payloads = st.binary(max_size=30)
rollups = st.sampled_from([None, None, None, Rollup.SUBJECT, Rollup.ALL])


def outcome(call: Callable[[StreamStore], Any], store: StreamStore) -> Any:
    """A call's result, or the type (and limit) of the store error it raised."""
    try:
        return ("ok", call(store))
    except LimitExceededError as exc:
        return ("error", LimitExceededError, exc.limit)
    except StoreError as exc:
        return ("error", type(exc))


class StoreComparison(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = fast_temp_dir()
        self.path = self.tmp / "rocks"
        self.config = StoreConfig()
        self.memory = FileCountingMemoryStore(self.config)
        self.rocks = RocksStreamStore.open_alone(self.path, self.config)
        self.clock = 1
        self.groups = 0

    def teardown(self) -> None:
        self.rocks.close()
        self.memory.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def both(self, call: Callable[[StreamStore], Any]) -> Any:
        expected = outcome(call, self.memory)
        actual = outcome(call, self.rocks)
        assert actual == expected, f"rocks {actual!r} != memory {expected!r}"
        return expected

    def tick(self, step: int) -> int:
        self.clock += step
        return self.clock

    @property
    def last_seq(self) -> int:
        return self.memory.state().last_seq

    # -- writes ------------------------------------------------------------------------

    @rule(
        subject=st.sampled_from(SUBJECTS),
        hdr=headers,
        payload=payloads,
        step=st.integers(-1, 3),
        rollup=rollups,
    )
    def store_msg(
        self, subject: str, hdr: bytes | None, payload: bytes, step: int, rollup: Rollup | None
    ) -> None:
        ts = self.tick(step)
        self.both(lambda s: s.store_msg(subject, hdr, payload, ts, rollup=rollup))

    @rule(subject=st.sampled_from(SUBJECTS), jump=st.integers(0, 4), step=st.integers(0, 3), hdr=headers)
    def store_raw_msg(self, subject: str, jump: int, step: int, hdr: bytes | None) -> None:
        seq, ts = self.last_seq + jump, self.tick(step)
        self.both(lambda s: s.store_raw_msg(subject, hdr, b"raw", seq, ts))

    @rule(num=st.integers(1, 3))
    def skip(self, num: int) -> None:
        seq = self.last_seq + 1
        self.both(lambda s: s.skip_msgs(seq, num))

    @rule(offset=st.integers(-1, 12), erase=st.booleans())
    def remove(self, offset: int, erase: bool) -> None:
        seq = max(self.memory.state().first_seq + offset, 0)
        self.both(lambda s: s.erase_msg(seq) if erase else s.remove_msg(seq))

    @rule(filter_=st.sampled_from(FILTERS), seq=st.integers(0, 20), keep=st.integers(0, 3))
    def purge_ex(self, filter_: str, seq: int, keep: int) -> None:
        self.both(lambda s: s.purge_ex(filter_, seq, keep))

    @rule()
    def purge(self) -> None:
        self.both(lambda s: s.purge())

    @rule(delta=st.integers(-2, 4))
    def compact(self, delta: int) -> None:
        seq = max(self.memory.state().first_seq + delta, 0)
        self.both(lambda s: s.compact(seq))

    @rule(back=st.integers(0, 4))
    def truncate(self, back: int) -> None:
        seq = max(self.last_seq - back, 0)
        self.both(lambda s: s.truncate(seq))

    @rule(ahead=st.integers(0, 8), limit=st.sampled_from([0, 0, 1, 2]))
    def expire(self, ahead: int, limit: int) -> None:
        now = self.clock + ahead
        self.both(lambda s: s.expire(now, limit))

    @rule(seconds=st.integers(1, 2))
    def leap(self, seconds: int) -> None:
        """Move the clock on by whole seconds, so per-message TTLs come due."""
        self.tick(seconds * SEC)

    @rule(config=configs, with_clock=st.booleans())
    def update_config(self, config: StoreConfig, with_clock: bool) -> None:
        now = self.clock if with_clock else None
        self.both(lambda s: s.update_config(config, now))

    @rule(
        writes=st.lists(st.tuples(st.sampled_from(SUBJECTS), payloads, rollups), min_size=1, max_size=5),
        remove_offset=st.integers(0, 6),
        sync=st.booleans(),
    )
    def write_group(
        self, writes: list[tuple[str, bytes, Rollup | None]], remove_offset: int, sync: bool
    ) -> None:
        self.groups += 1
        meta = self.groups.to_bytes(4, "big")
        results = []
        stamps = [self.tick(1) for _ in writes]
        for store in (self.memory, self.rocks):
            with store.write_group(sync=sync) as group:
                done = [
                    outcome(lambda s, w=w, ts=ts: s.store_msg(w[0], None, w[1], ts, rollup=w[2]), store)
                    for w, ts in zip(writes, stamps, strict=True)
                ]
                first = store.state().first_seq
                done.append(outcome(lambda s, first=first: s.remove_msg(first + remove_offset), store))
                # Reads inside the group see the group's own writes.
                done.append(outcome(lambda s: s.load_last_msg(">"), store))
                group.meta = meta
            results.append(done)
        assert results[0] == results[1]
        assert self.rocks.metadata == meta

    # -- lifecycle ---------------------------------------------------------------------

    @rule()
    def reopen(self) -> None:
        self.rocks.close()
        self.rocks = RocksStreamStore.open_alone(self.path)

    @rule()
    def snapshot_round_trip(self) -> None:
        copy = FileCountingMemoryStore()
        copy.restore(self.rocks.snapshot())
        assert copy.state(include_deleted=True) == self.memory.state(include_deleted=True)
        assert copy.metadata == self.memory.metadata
        self.rocks.restore(self.memory.snapshot())

    # -- reads -------------------------------------------------------------------------

    @invariant()
    def reads_agree(self) -> None:
        state = self.both(lambda s: s.state(include_deleted=True))
        assert self.rocks.config == self.memory.config
        first, last = state[1].first_seq, state[1].last_seq
        self.both(lambda s: s.next_expiry_ns())
        for ahead in (0, SEC, 2 * SEC):
            self.both(lambda s, a=ahead: s.expiry_due(self.clock + a))
        starts = sorted({0, 1, first, first + 1, (first + last) // 2, last, last + 1})
        for filter_ in FILTERS:
            self.both(lambda s, f=filter_: s.load_last_msg(f))
            self.both(lambda s, f=filter_: s.subjects_state(f))
            self.both(lambda s, f=filter_: s.multi_last_seqs([f], max(last - 2, 0)))
            self.both(lambda s, f=filter_: s.multi_last_seqs([f, "c"], max_allowed=2))
            for start in starts:
                self.both(lambda s, f=filter_, st_=start: s.load_next_msg(f, st_))
                self.both(lambda s, f=filter_, st_=start: s.filtered_state(st_, f))
                self.both(lambda s, f=filter_, st_=start: s.num_pending(st_, f, True))
            self.both(lambda s, f=filter_: s.load_batch(f, first, 3, 40))
        for ts in (0, self.clock - 5, self.clock - 2, self.clock, self.clock + 1):
            self.both(lambda s, t=ts: s.get_seq_from_time(t))
            self.both(lambda s, t=ts: s.multi_last_seqs([">"], up_to_ts_ns=t))
        for seq in range(max(first - 1, 0), last + 2):
            self.both(lambda s, q=seq: s.load_msg(q))

    @precondition(lambda self: self.memory.state().messages > 0)
    @invariant()
    def accounting_adds_up(self) -> None:
        msgs = []
        seq = 0
        while True:
            batch = self.memory.load_batch(">", seq, 50)
            msgs.extend(batch.messages)
            if not batch.num_pending:
                break
            seq = batch.messages[-1].seq + 1
        state = self.memory.state()
        assert len(msgs) == state.messages
        assert sum(m.size for m in msgs) == state.bytes
        assert msgs[0].seq == state.first_seq
        assert len({m.subject for m in msgs}) == state.num_subjects


StoreComparison.TestCase.settings = settings(
    max_examples=45,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestStoreComparison = StoreComparison.TestCase
