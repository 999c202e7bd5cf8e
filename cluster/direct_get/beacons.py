"""The node's one beacon task: sends this node's positions, takes its peers' in, watches bounded streams.

One task per node whatever the number of streams (positions.py says what a beacon carries): every
0.5 s, or every 50 ms while a stream here has a staleness bound (`jetraft.max_direct_lag`), it sends
the beacon and checks each bounded replica here against its bound, so a follower whose leader went
silent leaves `_sys_` in time. Replicas without a bound are never woken: their staleness is computed
when asked (a scrape of `jetraft_replica_lag_seconds`).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Callable
from typing import Any

import structlog

from cluster.direct_get.positions import (
    BEACON_SUBJECT,
    RESYNC_SUBJECT,
    LedStream,
    PositionBoard,
    PositionSender,
    decode_beacon,
    encode_beacon,
)
from cluster.direct_get.staleness import FAST_INTERVAL, SLOW_INTERVAL, WINDOW_NS
from cluster.runtime.context import NodeContext
from gateway.router import Message, Subscription

log = structlog.get_logger(__name__)

# how often a receiver that missed beacons asks again for a full one, at most
RESYNC_EVERY_NS = 1_000_000_000


class PositionBeacons:
    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx
        self.sender = PositionSender(ctx.name, secrets.randbits(63))
        self.board = PositionBoard(ctx.name)
        # replicas here with a staleness bound: each one's check, run every FAST_INTERVAL
        self._bound_checks: dict[str, Callable[[], None]] = {}
        self._subs: list[Subscription] = []
        self._task: asyncio.Task[Any] | None = None
        self._woken = asyncio.Event()
        self._resync_asked_ns: dict[str, int] = {}
        self._swept_ns = 0
        self.sent = 0

    def open(self) -> None:
        router = self.ctx.router
        self._subs = [
            router.subscribe(BEACON_SUBJECT, self._on_beacon),
            router.subscribe(RESYNC_SUBJECT, self._on_resync),
        ]
        self._task = self.ctx.spawn(self._run(), "position-beacons")

    def close(self) -> None:
        for sub in self._subs:
            self.ctx.router.unsubscribe(sub)
        self._subs = []
        if self._task is not None:
            self._task.cancel()
            self._task = None

    # -- what replicas here tell it ---------------------------------------------------------

    def lead(self, stream: str, led: LedStream) -> None:
        self.sender.lead(stream, led)
        if led.bounded:
            self._woken.set()

    def unlead(self, stream: str) -> None:
        self.sender.unlead(stream)

    def moved(self, stream: str) -> None:
        self.sender.moved(stream)

    def watch_bound(self, stream: str, check: Callable[[], None]) -> None:
        self._bound_checks[stream] = check
        self._woken.set()

    def unwatch_bound(self, stream: str) -> None:
        self._bound_checks.pop(stream, None)

    def staleness_ns(self, stream: str, applied_seq: int, started_ns: int) -> int:
        return self.board.staleness_ns(stream, applied_seq, time.time_ns(), started_ns)

    # -- the task ---------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            now_ns = time.time_ns()
            self.ctx.router.publish(BEACON_SUBJECT, encode_beacon(self.sender.next_beacon(now_ns)))
            self.sent += 1
            for check in list(self._bound_checks.values()):
                check()
            if now_ns - self._swept_ns > WINDOW_NS:
                self._swept_ns = now_ns
                self.board.sweep(now_ns)
            self._woken.clear()
            fast = self.sender.bounded() or bool(self._bound_checks)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), FAST_INTERVAL if fast else SLOW_INTERVAL)

    def _on_beacon(self, msg: Message) -> None:
        beacon = decode_beacon(msg.payload)
        if beacon is None or beacon.sender == self.ctx.name:
            return
        if self.board.receive(beacon):
            now_ns = time.time_ns()
            if now_ns - self._resync_asked_ns.get(beacon.sender, 0) >= RESYNC_EVERY_NS:
                self._resync_asked_ns[beacon.sender] = now_ns
                log.info("position_beacons_missed", node=self.ctx.name, sender=beacon.sender)
                self.ctx.router.publish(RESYNC_SUBJECT, beacon.sender.encode())

    def _on_resync(self, msg: Message) -> None:
        if msg.payload == self.ctx.name.encode():
            self.sender.resync()
