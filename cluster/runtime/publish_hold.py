"""An option, off by default: a client's publish on a stream's subject that finds no stream leader yet
waits for one, briefly (`jetraft node --publish-hold SECONDS`; docs/config-fields.md).

A stream's subjects are served by its leader alone (`StreamLeader` subscribes to them), and the
client's node learns of that subscription over the route mesh. Where the client's last answer came
from the same leader, the interest came first on the same link (docs/architecture.md, "Route
mesh"). Where it did not, a publish can reach the client's node before the interest it needs: a
leader that changed just after answering (a stepdown, the hand-over to the preferred leader, an
election), or the client's node not counting the leader's interest for a moment (its own call to
that node redialling). nats-server has these windows too, but a client cannot tell "the leader's
interest is still on its way" from "the stream has no leader": both get 503 no responders, and
nats-py does not try again.

With the option on (a node builds no PublishHold without it, and nats-server's immediate 503 is the
default), the client's node, which knows every stream's subjects from its copy of the meta assignments
(each account's meta service says them here, `expect`), holds a client's publish that reached
nobody on such a subject (`Router.on_unmatched_publish`) until someone there subscribes, at most
`wait` seconds, then publishes it as it came; if nobody came, the client gets the 503 it
would have got at once (a publish without a reply is dropped, as before). Held messages go out in
the order they came, and a message is either published or answered 503, never both. A subject of
no known stream is answered at once, as before; so is everything beyond `MAX_HELD_MESSAGES` /
`MAX_HELD_BYTES` held at once.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

from cluster.runtime.metrics import NodeMetrics
from gateway.router import ClientSink, InterestWatch, Router
from gateway.sublist import Sublist

MAX_HELD_MESSAGES = 10_000
MAX_HELD_BYTES = 16 * 1024 * 1024


class _Expected:
    """One owner's interest-to-come in one filter: a sublist entry (never a queue member)."""

    __slots__ = ("owner",)
    queue = None

    def __init__(self, owner: Hashable) -> None:
        self.owner = owner


@dataclass(slots=True)
class _Held:
    subject: str
    reply: str | None
    headers: bytes | None
    payload: bytes
    origin: ClientSink
    deadline: float
    size: int
    done: bool = False


class PublishHold:
    """The node's held publishes; one per router, shared by every account's services."""

    def __init__(
        self,
        router: Router,
        *,
        # seconds: 2 is long enough for an interest frame on a loaded link and for a leadership
        # hand-over, and short next to nats-py's JetStream timeout (5 s), so a stream that really
        # has no leader is still answered 503 before the client gives up
        wait: float,
        max_messages: int = MAX_HELD_MESSAGES,
        max_bytes: int = MAX_HELD_BYTES,
        clock: Callable[[], float] = time.monotonic,
        metrics: NodeMetrics | None = None,
    ) -> None:
        if not wait > 0:
            raise ValueError(f"a publish hold waits a positive number of seconds, not {wait!r}")
        self.router = router
        self.wait = wait
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self._clock = clock
        self._expected: Sublist[_Expected] = Sublist()
        self._filters: dict[Hashable, tuple[str, ...]] = {}
        self._entries: dict[Hashable, _Expected] = {}
        self._held: deque[_Held] = deque()
        self._held_bytes = 0
        # literal subject -> (the router's watch on it, how many held messages wait on it)
        self._watches: dict[str, tuple[InterestWatch, int]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._releasing = False
        self._release_again = False
        # published after waiting, and answered (or dropped) after waiting in vain
        self.released = 0
        self.expired = 0
        self._released_metric = self._expired_metric = None
        if metrics is not None:
            self._released_metric = metrics.held_publishes.labels(metrics.node, "released")
            self._expired_metric = metrics.held_publishes.labels(metrics.node, "expired")
        router.on_unmatched_publish(self.take)

    # -- which subjects are about to be served ---------------------------------------------------

    def expect(self, owner: Hashable, filters: Iterable[str]) -> None:
        """`owner` (a stream) will be served on `filters` (router subjects), replacing what it had."""
        wanted = tuple(filters)
        if self._filters.get(owner) == wanted:
            return
        self.forget(owner)
        if not wanted:
            return
        entry = _Expected(owner)
        for filter_ in wanted:
            self._expected.insert(filter_, entry)
        self._filters[owner] = wanted
        self._entries[owner] = entry

    def forget(self, owner: Hashable) -> None:
        filters = self._filters.pop(owner, ())
        entry = self._entries.pop(owner, None)
        for filter_ in filters:
            self._expected.remove(filter_, entry)  # type: ignore[arg-type]

    @property
    def held(self) -> int:
        return len(self._held)

    # -- holding and letting go ---------------------------------------------------------------

    def take(
        self, subject: str, reply: str | None, headers: bytes | None, payload: bytes, origin: ClientSink
    ) -> bool:
        """The router's `on_unmatched_publish` handler: hold a publish on an expected subject."""
        if not self._filters or not self._expected.match(subject).plain:
            return False
        # someone listens and just did not take it (the publisher itself, without echo): as before
        if self.router.has_interest(subject):
            return False
        size = len(subject) + len(payload) + (len(headers) if headers else 0)
        if len(self._held) >= self.max_messages or self._held_bytes + size > self.max_bytes:
            return False
        self._held.append(_Held(subject, reply, headers, payload, origin, self._clock() + self.wait, size))
        self._held_bytes += size
        watched = self._watches.get(subject)
        if watched is None:
            self._watches[subject] = (self.router.watch_interest(subject, self._interest_changed), 1)
        else:
            self._watches[subject] = (watched[0], watched[1] + 1)
        if self._timer is None:
            self._arm()
        return True

    def _interest_changed(self) -> None:
        # Runs inside the router's interest change (a subscription here, a peer's interest arriving),
        # before the router handles anything else: a publish made after it finds what is held gone out.
        # Publishing may change interest again (a callback subscribing): that asks for one more pass.
        if self._releasing:
            self._release_again = True
            return
        self._releasing = True
        try:
            self._release_again = True
            while self._release_again:
                self._release_again = False
                self._release_served()
        finally:
            self._releasing = False

    def _release_served(self) -> None:
        router = self.router
        for held in list(self._held):
            if held.done or not router.has_interest(held.subject):
                continue
            self._finish(held)
            self.released += 1
            if self._released_metric is not None:
                self._released_metric.inc()
            router.publish(held.subject, held.payload, held.reply, held.headers, origin=held.origin, may_hold=False)
        self._drop_finished()

    def expire_due(self) -> None:
        """Answer (or drop) what waited its whole time for a receiver; the timer calls this."""
        self._timer = None
        now = self._clock()
        router = self.router
        while self._held and (self._held[0].done or self._held[0].deadline <= now):
            held = self._held.popleft()
            if held.done:
                continue
            self._finish(held)
            self.expired += 1
            if self._expired_metric is not None:
                self._expired_metric.inc()
            if held.reply and held.origin.no_responders:
                router.no_responders_to_client(held.origin, held.subject, held.reply)
        if self._held:
            self._arm()

    def _finish(self, held: _Held) -> None:
        held.done = True
        self._held_bytes -= held.size
        watch, waiting = self._watches[held.subject]
        if waiting > 1:
            self._watches[held.subject] = (watch, waiting - 1)
        else:
            del self._watches[held.subject]
            self.router.unwatch_interest(watch)

    def _drop_finished(self) -> None:
        if any(held.done for held in self._held):
            self._held = deque(held for held in self._held if not held.done)
        if not self._held and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self) -> None:
        loop = asyncio.get_running_loop()
        delay = max(0.0, self._held[0].deadline - self._clock())
        self._timer = loop.call_later(delay, self.expire_due)
