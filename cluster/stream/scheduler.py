"""The stream leader's side of message schedules (rules and table in cluster/stream/schedules.py).

While this node leads a stream with `allow_msg_schedules`, it keeps a table
of the stored schedules and one timer for the earliest. When a schedule is
due, the leader proposes the produced message; what every replica applies
then decides the rest: a produced message announces the schedule's next
firing, or purges a one-off schedule with it. The table is rebuilt from the
store when leadership arrives: each schedule's next firing is the one its
last produced message announced (the target's last message, when a newer
message did not replace it since), else computed from the schedule as
stored. A firing that was due while no leader ran happens once, at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable
from typing import Any

import structlog

from cluster.stream.entries import Rollup, StoreMsg
from cluster.stream.machine import Stored
from cluster.stream.schedules import (
    HDR_SCHEDULE,
    HDR_SCHEDULER,
    SECOND_NS,
    Schedule,
    ScheduleTable,
    announced_next_ns,
    next_fire,
    produced_header,
    read_schedule,
)
from raft.driver import RaftHostError
from storage.errors import MsgNotFoundError
from storage.interface import StreamStore
from storage.msg_ttl import slice_header

log = structlog.get_logger(__name__)

# nats-server's floor on its schedule timer: a burst of due schedules is taken in one pass
MIN_TIMER_S = 0.25
# a produced message that could not be proposed (leadership moving) is tried again this much later
RETRY_NS = SECOND_NS


class MessageScheduler:
    def __init__(self, stream: str, store: StreamStore, propose: Callable[[bytes], asyncio.Future[Any]]) -> None:
        self._stream = stream
        self._store = store
        self._propose = propose
        self._table = ScheduleTable()
        self._timer: asyncio.TimerHandle | None = None
        self._running = False

    def __len__(self) -> int:
        return len(self._table)

    def start(self) -> None:
        """Leadership arrived with schedules allowed (or they were just allowed): load and arm."""
        if self._running:
            return
        self._running = True
        now = time.time_ns()
        for subject in self._store.subjects_totals(">"):
            try:
                msg = self._store.load_last_msg(subject)
            except MsgNotFoundError:
                continue
            schedule = read_schedule(subject, msg.seq, msg.headers)
            if schedule is None:
                continue
            at = self._resume_at(schedule, msg.ts_ns, now)
            if at is not None:
                self._table.put(subject, msg.seq, at)
        self._arm()

    def stop(self) -> None:
        self._running = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._table = ScheduleTable()

    def _resume_at(self, schedule: Schedule, ts_ns: int, now_ns: int) -> int | None:
        """When a stored schedule fires next: as its last produced message announced, when that is
        still the target's last message, else as computed from the schedule (set at `ts_ns`)."""
        try:
            last = self._store.load_last_msg(schedule.target)
        except MsgNotFoundError:
            last = None
        produced_by_it = slice_header(HDR_SCHEDULER, last.headers if last else None) == schedule.subject.encode()
        if last is not None and last.seq > schedule.seq and produced_by_it:
            announced = announced_next_ns(last.headers)
            if announced is not None:
                return announced
        fire = next_fire(schedule.pattern, schedule.zone, ts_ns, now_ns)
        return None if fire is None else fire.at_ns

    def stored(self, seqs: Iterable[int]) -> None:
        """Messages just applied: new schedules join the table, produced or stopping messages move it."""
        if not self._running:
            return
        now = time.time_ns()
        for seq in seqs:
            try:
                msg = self._store.load_msg(seq)
            except MsgNotFoundError:
                continue  # removed again by the same apply (limits)
            header = msg.headers
            if not header or HDR_SCHEDULE not in header:
                continue
            schedule = read_schedule(msg.subject, seq, header)
            if schedule is not None:
                fire = next_fire(schedule.pattern, schedule.zone, msg.ts_ns, now)
                if fire is not None:
                    self._table.put(msg.subject, seq, fire.at_ns)
            scheduler = slice_header(HDR_SCHEDULER, header)
            if scheduler:
                self._table.fired(scheduler.decode(errors="replace"), announced_next_ns(header))
        self._arm()

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadline = self._table.next_deadline_ns()
        if deadline is None or not self._running:
            return
        delay = max(MIN_TIMER_S, (deadline - time.time_ns()) / 1e9)
        self._timer = asyncio.get_running_loop().call_later(delay, self._fire)

    def _fire(self) -> None:
        self._timer = None
        now = time.time_ns()
        for subject, seq, at in self._table.take_due(now):
            entry = self._produce(subject, seq, at, now)
            if entry is None:
                self._table.remove(subject)
                continue
            try:
                future = self._propose(entry.encode())
            except RaftHostError:
                self._table.retry(subject, now + RETRY_NS)
                continue
            future.add_done_callback(lambda done, subject=subject: self._settled(subject, done))
        self._arm()

    def _produce(self, subject: str, seq: int, at_ns: int, now_ns: int) -> StoreMsg | None:
        """The message schedule `seq` stores on its target now; None when it is gone or no longer valid."""
        try:
            msg = self._store.load_msg(seq)
        except MsgNotFoundError:
            return None
        schedule = read_schedule(subject, seq, msg.headers)
        if msg.subject != subject or schedule is None:
            return None
        fire = next_fire(schedule.pattern, schedule.zone, at_ns, now_ns)
        if fire is None:
            return None
        body = msg
        if schedule.source:
            # nothing to sample yet: the schedule's own body and headers, as nats-server
            with contextlib.suppress(MsgNotFoundError):
                body = self._store.load_last_msg(schedule.source)
        header = produced_header(schedule, body.headers, fire if fire.repeat else None)
        rollup = Rollup.SUBJECT if schedule.rollup else Rollup.NONE
        return StoreMsg(schedule.target, header, bytes(body.payload), now_ns, rollup=rollup)

    def _settled(self, subject: str, done: asyncio.Future[Any]) -> None:
        """A produced message's proposal ended; stored, `stored` already moved the table."""
        if not self._running:
            return
        if done.cancelled() or done.exception() is not None or not isinstance(done.result(), Stored):
            log.warning("schedule_not_stored", stream=self._stream, schedule=subject)
            self._table.retry(subject, time.time_ns() + RETRY_NS)
            self._arm()
