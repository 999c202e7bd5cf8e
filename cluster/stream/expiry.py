"""The stream leader's expiry timer: an `Expire` entry proposed when something falls due, and only then.

Every replica must remove the same messages at the same point of the log,
so no replica expires by its own clock: the leader alone watches the time
and proposes `Expire(now)` (cluster/stream/entries.py); applying it removes
what is due as of that `now` everywhere (and places delete markers). Writes
remove what is due at their own timestamp as they apply, so a busy stream
rarely needs an entry; a quiet one gets one when its oldest message ages
out or a message's own TTL runs out.

Cost: one timer handle while something can expire, none otherwise (a
stream without max_age and without TTLs never has one). The store answers
"when next" from its indexes (`StreamStore.next_expiry_ns`). The timer is
re-armed after each apply, only ever moved earlier, and fires no more than
every `MIN_GAP_NS` (nats-server checks ages no more often than every 250
ms either) unless the previous entry stopped at its `EXPIRE_BATCH` limit.
A new leader arms it when it takes over (after a restart too), so expiry
carries on from whatever the store holds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import structlog

from cluster.stream.entries import Expire
from cluster.stream.machine import Expired
from raft.driver import RaftHostError

log = structlog.get_logger(__name__)

MIN_GAP_NS = 250_000_000
# Messages one Expire entry removes at most: applying it holds the event loop.
EXPIRE_BATCH = 4096
# After a proposal fails (leadership moving, no quorum), how long before trying again.
RETRY_NS = 1_000_000_000


class ExpiryTimer:
    def __init__(
        self,
        stream: str,
        next_expiry_ns: Callable[[], int | None],
        propose: Callable[[bytes], asyncio.Future[Any]],
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        """`next_expiry_ns`: when the store next has something to expire (None: nothing can);
        `propose`: put an entry in the stream's log (may raise, as RaftHost.propose_nowait does).
        The leader republishes the delete markers an applied entry stored with everything else it
        applied (StreamLeader.applied), in log order."""
        self._stream = stream
        self._next_expiry_ns = next_expiry_ns
        self._propose = propose
        self._clock_ns = clock_ns
        self._handle: asyncio.TimerHandle | None = None
        self._armed_for_ns = 0
        self._not_before_ns = 0
        self._in_flight = False
        self._closed = False

    @property
    def armed_for_ns(self) -> int | None:
        """When the timer fires (wall clock, ns), or None when it is not armed."""
        return self._armed_for_ns if self._handle is not None else None

    def poke(self) -> None:
        """The store may have changed (an apply, a new leader): arm for the next expiry."""
        if self._closed or self._in_flight:
            return
        due = self._next_expiry_ns()
        if due is None:
            self._disarm()
            return
        at = max(due, self._not_before_ns)
        if self._handle is not None and self._armed_for_ns <= at:
            return  # armed already for then or sooner; firing early only looks again
        self._disarm()
        delay = max(at - self._clock_ns(), 0) / 1e9
        self._handle = asyncio.get_running_loop().call_later(delay, self._fire)
        self._armed_for_ns = at

    def close(self) -> None:
        self._closed = True
        self._disarm()

    def _disarm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _fire(self) -> None:
        self._handle = None
        if self._closed or self._in_flight:
            return
        now = self._clock_ns()
        due = self._next_expiry_ns()
        if due is None or due > now:
            self.poke()
            return
        try:
            future = self._propose(Expire(now, EXPIRE_BATCH).encode())
        except RaftHostError as exc:  # not leader any more, group gone, host closed
            log.info("expire_not_proposed", stream=self._stream, error=str(exc))
            self._not_before_ns = now + RETRY_NS
            self.poke()
            return
        self._in_flight = True
        future.add_done_callback(self._settled)

    def _settled(self, future: asyncio.Future[Any]) -> None:
        self._in_flight = False
        now = self._clock_ns()
        if future.cancelled() or future.exception() is not None:
            self._not_before_ns = now + RETRY_NS
        else:
            result = future.result()
            more = isinstance(result, Expired) and result.more
            self._not_before_ns = now if more else now + MIN_GAP_NS
        self.poke()
