"""The stream leader's expiry timer on a real event loop, with the wall clock and the log faked."""

from __future__ import annotations

import asyncio
from typing import Any

from cluster.stream.entries import Expire, decode_entry
from cluster.stream.expiry import EXPIRE_BATCH, MIN_GAP_NS, RETRY_NS, ExpiryTimer
from cluster.stream.machine import Expired
from raft.driver import NotLeaderError

SECOND = 1_000_000_000
T0 = 1_800_000_000 * SECOND


class Stream:
    """What the timer sees of a stream: its next expiry, a clock, and a log taking proposals."""

    def __init__(self) -> None:
        self.now = T0
        self.next: int | None = None
        self.proposed: list[Expire] = []
        self.pending: list[asyncio.Future[Any]] = []
        self.refuse = False
        self.fired = asyncio.Event()

    def propose(self, data: bytes) -> asyncio.Future[Any]:
        if self.refuse:
            raise NotLeaderError("S", None)
        entry = decode_entry(data)
        assert isinstance(entry, Expire)
        self.proposed.append(entry)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending.append(future)
        self.fired.set()
        return future

    def timer(self) -> ExpiryTimer:
        return ExpiryTimer("S", lambda: self.next, self.propose, lambda: self.now)


async def settle(stream: Stream, result: object) -> None:
    stream.pending.pop(0).set_result(result)
    await asyncio.sleep(0)  # the done callback


async def test_nothing_to_expire_arms_nothing() -> None:
    stream = Stream()
    timer = stream.timer()
    timer.poke()
    assert timer.armed_for_ns is None
    await asyncio.sleep(0.01)
    assert stream.proposed == []


async def test_armed_for_the_next_expiry_and_moved_only_earlier() -> None:
    stream = Stream()
    timer = stream.timer()
    stream.next = T0 + 3600 * SECOND
    timer.poke()
    assert timer.armed_for_ns == T0 + 3600 * SECOND
    stream.next = T0 + 60 * SECOND  # a message with a short TTL arrived
    timer.poke()
    assert timer.armed_for_ns == T0 + 60 * SECOND
    stream.next = T0 + 120 * SECOND  # later: firing early only looks again
    timer.poke()
    assert timer.armed_for_ns == T0 + 60 * SECOND
    timer.close()
    assert timer.armed_for_ns is None


async def test_fires_when_due_once_in_flight_then_waits_the_gap() -> None:
    stream = Stream()
    timer = stream.timer()
    stream.next = T0  # due now: fires on the loop's next turn
    timer.poke()
    await asyncio.wait_for(stream.fired.wait(), 1)
    assert stream.proposed == [Expire(T0, EXPIRE_BATCH)]
    timer.poke()  # applies while the entry is in flight change nothing
    assert timer.armed_for_ns is None and len(stream.proposed) == 1
    stream.now = T0 + 10
    await settle(stream, Expired((1,)))
    # more is due at once, but a new entry waits the minimum gap
    assert timer.armed_for_ns == T0 + 10 + MIN_GAP_NS
    timer.close()


async def test_an_entry_that_hit_its_limit_is_followed_at_once() -> None:
    stream = Stream()
    timer = stream.timer()
    stream.next = T0
    timer.poke()
    await asyncio.wait_for(stream.fired.wait(), 1)
    stream.fired.clear()
    await settle(stream, Expired(tuple(range(1, EXPIRE_BATCH + 1)), more=True))
    await asyncio.wait_for(stream.fired.wait(), 1)
    assert len(stream.proposed) == 2
    timer.close()


async def test_a_refused_proposal_is_retried_later() -> None:
    stream = Stream()
    timer = stream.timer()
    stream.refuse = True
    stream.next = T0
    timer.poke()
    await asyncio.sleep(0.01)
    assert stream.proposed == []
    assert timer.armed_for_ns == T0 + RETRY_NS
    timer.close()


async def test_firing_early_looks_again() -> None:
    stream = Stream()
    timer = stream.timer()
    stream.next = T0
    timer.poke()
    stream.next = T0 + 5 * SECOND  # the due message went another way before the timer fired
    await asyncio.sleep(0.01)
    assert stream.proposed == []
    assert timer.armed_for_ns == T0 + 5 * SECOND
    timer.close()
