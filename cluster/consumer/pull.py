"""Pull requests (`$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>`): parsing, limits, the waiting queue.

Waiting requests are the leader's own business (nats-server does not
replicate them either): a new leader starts with none and clients re-issue
their pulls. Everything here is sans-IO; time comes in as `now_ns`. Status
texts and headers are nats-server 2.15's (trace 11 and a real server):
`404 No Messages`, `408 Request Timeout` with `Nats-Pending-Messages` /
`Nats-Pending-Bytes`, `408 Requests Pending`, `409 Exceeded MaxRequestBatch
of N`, `409 Exceeded MaxRequestExpires of 1s`, `409 Exceeded
MaxRequestMaxBytes of N`, `409 Message Size Exceeds MaxBytes`, `409 Batch
Completed`, `409 Exceeded MaxWaiting`, `409 Consumer is push based`,
`400 Bad Request - heartbeat value too large`; for priority groups (ADR-42)
`400 Bad Request - Priority Group missing` (and `- Invalid Priority Group`,
`- Not a Overflow Priority consumer`, `- Not a Pinned Client Priority
consumer`, `- Priority must be between 0 and 9`), `423 Nats-Pin-Id mismatch`
and `423 Nats-Wrong-Pin-Id`.

What happens to a request, as nats-server's consumer.go does it
(processNextMsgRequest, processWaiting, nextWaiting):

- `no_wait` is decided on arrival: with nothing to deliver and no `expires`
  the answer is 404 at once; with fewer messages to deliver than the
  requests already waiting still want, 408 Requests Pending; else it waits
  in the queue like any other.
- When the consumer runs out of messages (not when max_ack_pending holds it
  back), each `no_wait` request without `expires`, or one that got some
  messages already, is answered 404 No Messages; one with `expires` that got
  nothing waits for a message until it expires (408), as a plain one does.
  The same rule runs whenever a waiting request's expiry or idle heartbeat
  falls due (nats-server's wake-up timer), max_ack_pending or not: a
  `no_wait` request that got some messages and is held back by
  max_ack_pending ends with 404 at its next heartbeat instead of taking
  messages the client no longer waits for once acks free them.
- A request whose reply subject nobody subscribes to any more (here or on a
  peer) is dropped without an answer, before anything is delivered to it.
- A batch completed with `max_bytes` to spare is told so: 409 Batch Completed.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from cluster.consumer.config import PRIORITY_OVERFLOW, PRIORITY_PINNED_CLIENT, ConsumerConfig
from gateway.headers import encode_headers

HDR_PENDING_MESSAGES = "Nats-Pending-Messages"
HDR_PENDING_BYTES = "Nats-Pending-Bytes"


# -- status frames (header-only messages sent to the request's reply subject) -----------------


def no_messages() -> bytes:
    return encode_headers(status=404, description="No Messages")


def request_timeout(pending_msgs: int, pending_bytes: int) -> bytes:
    fields = [(HDR_PENDING_MESSAGES, str(pending_msgs)), (HDR_PENDING_BYTES, str(pending_bytes))]
    return encode_headers(fields, status=408, description="Request Timeout")


def requests_pending() -> bytes:
    return encode_headers(status=408, description="Requests Pending")


def batch_completed(pending_bytes: int) -> bytes:
    fields = [(HDR_PENDING_MESSAGES, "0"), (HDR_PENDING_BYTES, str(pending_bytes))]
    return encode_headers(fields, status=409, description="Batch Completed")


def max_bytes_exceeded(pending_msgs: int, pending_bytes: int) -> bytes:
    fields = [(HDR_PENDING_MESSAGES, str(pending_msgs)), (HDR_PENDING_BYTES, str(pending_bytes))]
    return encode_headers(fields, status=409, description="Message Size Exceeds MaxBytes")


def pin_id_mismatch() -> bytes:
    """A request naming a pin other than the consumer's (checked as it arrives)."""
    return encode_headers(status=423, description="Nats-Pin-Id mismatch")


def wrong_pin_id(pending_msgs: int, pending_bytes: int) -> bytes:
    """A waiting request naming a pin the consumer no longer has, when a message could go to it."""
    fields = [(HDR_PENDING_MESSAGES, str(pending_msgs)), (HDR_PENDING_BYTES, str(pending_bytes))]
    return encode_headers(fields, status=423, description="Nats-Wrong-Pin-Id")


def conflict(description: str) -> bytes:
    return encode_headers(status=409, description=description)


def bad_request(description: str = "Bad Request") -> bytes:
    return encode_headers(status=400, description=description)


def go_duration(ns: int) -> str:
    """Go's time.Duration.String() (as in `Exceeded MaxRequestExpires of 1s`)."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 1_000:
        return f"{sign}{ns}ns"
    if ns < 1_000_000:
        return sign + _trim(ns / 1_000) + "µs"
    if ns < 1_000_000_000:
        return sign + _trim(ns / 1_000_000) + "ms"
    hours, rest = divmod(ns, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    seconds = _trim(rest / 1_000_000_000) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{seconds}"
    if minutes:
        return f"{sign}{minutes}m{seconds}"
    return sign + seconds


def _trim(value: float) -> str:
    return f"{value:.9f}".rstrip("0").rstrip(".")


# -- requests -----------------------------------------------------------------------------------


# a request that is not JSON (so with no priority group at all) waits behind every JSON one, which
# has priority 0 unless it says otherwise (nats-server's insertAtPosition)
LOWEST_PRIORITY = 2**31 - 1


@dataclass(frozen=True, slots=True)
class PullRequest:
    batch: int = 1
    expires_ns: int = 0
    no_wait: bool = False
    max_bytes: int = 0
    idle_heartbeat_ns: int = 0
    # ADR-42's priority group fields, read from a JSON request only (None: a plain one, which
    # nats-server lets past every priority check)
    group: str | None = None
    min_pending: int = 0
    min_ack_pending: int = 0
    pin_id: str = ""
    priority: int = 0


class PullRequestError(ValueError):
    """A pull request the server answers with a status frame instead of messages."""

    def __init__(self, frame: bytes) -> None:
        super().__init__(frame.decode(errors="replace").strip())
        self.frame = frame


def parse_pull_request(payload: bytes) -> PullRequest:
    """The body of MSG.NEXT (or what follows `+NXT`): empty (one message), a batch number, or JSON."""
    body = bytes(payload).strip()
    if not body:
        return PullRequest()
    if body.isdigit():
        return PullRequest(batch=max(int(body), 1))
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise PullRequestError(bad_request()) from None
    if not isinstance(obj, dict):
        raise PullRequestError(bad_request())

    def number(key: str) -> int:
        value = obj.get(key)
        if value is None:
            return 0
        if isinstance(value, bool) or not isinstance(value, int):
            raise PullRequestError(bad_request())
        return value

    def text(key: str) -> str:
        value = obj.get(key)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise PullRequestError(bad_request())
        return value

    no_wait = obj.get("no_wait")
    request = PullRequest(
        batch=max(number("batch"), 1),
        expires_ns=max(number("expires"), 0),
        no_wait=no_wait is True,
        max_bytes=max(number("max_bytes"), 0),
        idle_heartbeat_ns=max(number("idle_heartbeat"), 0),
        group=text("group"),
        min_pending=number("min_pending"),
        min_ack_pending=number("min_ack_pending"),
        pin_id=text("id"),
        priority=number("priority"),
    )
    # nats-server finds this while it reads the request, before any of the consumer's limits
    if request.idle_heartbeat_ns and request.idle_heartbeat_ns * 2 > request.expires_ns:
        raise PullRequestError(bad_request("Bad Request - heartbeat value too large"))
    return request


def check_pull_request(config: ConsumerConfig, request: PullRequest) -> None:
    """The consumer's limits on a request, in nats-server's order (processNextMsgRequest); raises
    PullRequestError with the frame to answer. That the consumer pulls is checked before the request
    is read (`push_based`)."""
    if config.max_batch > 0 and request.batch > config.max_batch:
        raise PullRequestError(conflict(f"Exceeded MaxRequestBatch of {config.max_batch}"))
    if config.max_expires > 0 and request.expires_ns > config.max_expires:
        raise PullRequestError(conflict(f"Exceeded MaxRequestExpires of {go_duration(config.max_expires)}"))
    if config.max_bytes > 0 and request.max_bytes > config.max_bytes:
        raise PullRequestError(conflict(f"Exceeded MaxRequestMaxBytes of {config.max_bytes}"))
    if request.group is None:
        return
    policy = config.priority_policy
    if (request.min_pending or request.min_ack_pending) and policy != PRIORITY_OVERFLOW:
        raise PullRequestError(bad_request("Bad Request - Not a Overflow Priority consumer"))
    if request.pin_id and policy != PRIORITY_PINNED_CLIENT:
        raise PullRequestError(bad_request("Bad Request - Not a Pinned Client Priority consumer"))
    if not 0 <= request.priority <= 9:
        raise PullRequestError(bad_request("Bad Request - Priority must be between 0 and 9"))
    if policy:
        if not request.group:
            raise PullRequestError(bad_request("Bad Request - Priority Group missing"))
        if request.group not in config.priority_groups:
            raise PullRequestError(bad_request("Bad Request - Invalid Priority Group"))


def push_based() -> bytes:
    """A pull request to a push consumer (checked before its body is read, as nats-server does)."""
    return conflict("Consumer is push based")


def no_wait_answer(request: PullRequest, msgs_pending: int, batch_pending: int) -> bytes | None:
    """The status a `no_wait` request gets on arrival, or None when it joins the queue.

    `msgs_pending`: messages the consumer could deliver now (new ones and redeliveries due);
    `batch_pending`: messages the requests already waiting still want.
    """
    if not request.no_wait:
        return None
    if msgs_pending == 0 and not request.expires_ns:
        return no_messages()
    if 0 < msgs_pending < batch_pending:
        return requests_pending()
    return None


# -- the leader's queue of waiting requests ---------------------------------------------------


@dataclass(slots=True)
class WaitingRequest:
    reply: str
    batch_left: int
    bytes_left: int  # 0: no byte limit
    deadline_ns: int | None
    heartbeat_ns: int
    next_heartbeat_ns: int | None
    no_wait: bool
    max_bytes: int = 0
    delivered: int = 0  # messages sent to it so far
    # an overflow consumer serves it only while it has this many messages pending (or unacknowledged)
    min_pending: int = 0
    min_ack_pending: int = 0
    priority: int = LOWEST_PRIORITY  # a prioritized consumer serves the lowest first
    group: str | None = None  # None: not a JSON request
    pin_id: str = ""  # the pin it names, on a pinned_client consumer

    def overflows(self, num_pending: int, num_ack_pending: int) -> bool:
        """Whether an overflow consumer serves this request now: it asked for no minimum, or one of
        its minimums is reached (nats-server's nextWaiting)."""
        if not self.min_pending and not self.min_ack_pending:
            return True
        return (0 < self.min_pending <= num_pending) or (0 < self.min_ack_pending <= num_ack_pending)

    @property
    def pending_bytes(self) -> int:
        return self.bytes_left

    @property
    def completed_with_bytes_left(self) -> bool:
        """Its batch is done while its `max_bytes` had room left (the client is told: 409 Batch Completed)."""
        return self.batch_left <= 0 and self.max_bytes > 0 and self.bytes_left > 0


class WaitingQueue:
    """Pull requests waiting for messages. They take turns, as in nats-server's wait queue: the
    request at the head gets the next message and, if it wants more, goes to the back."""

    def __init__(self, max_waiting: int) -> None:
        self.max_waiting = max_waiting
        self._queue: deque[WaitingRequest] = deque()

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def full(self) -> bool:
        return self.max_waiting > 0 and len(self._queue) >= self.max_waiting

    def add(self, reply: str, request: PullRequest, now_ns: int, prioritized: bool = False) -> WaitingRequest:
        """Queue a checked request (for a `prioritized` consumer behind every request of its priority or
        a lower number, as nats-server's insertSorted); raises PullRequestError (409 Exceeded
        MaxWaiting) when full, with no frame for a request with idle heartbeats (nats-server: its client
        waits for the missed heartbeats instead of re-asking at once in a hot loop)."""
        if self.full:
            raise PullRequestError(conflict("Exceeded MaxWaiting") if not request.idle_heartbeat_ns else b"")
        waiting = WaitingRequest(
            reply=reply,
            batch_left=request.batch,
            bytes_left=request.max_bytes,
            deadline_ns=now_ns + request.expires_ns if request.expires_ns else None,
            heartbeat_ns=request.idle_heartbeat_ns,
            next_heartbeat_ns=now_ns + request.idle_heartbeat_ns if request.idle_heartbeat_ns else None,
            no_wait=request.no_wait,
            max_bytes=request.max_bytes,
            min_pending=request.min_pending,
            min_ack_pending=request.min_ack_pending,
            priority=LOWEST_PRIORITY if request.group is None else request.priority,
            group=request.group,
            pin_id=request.pin_id,
        )
        if prioritized:
            self._insert_by_priority(waiting)
        else:
            self._queue.append(waiting)
        return waiting

    def _insert_by_priority(self, waiting: WaitingRequest) -> None:
        position = len(self._queue)
        for index, other in enumerate(self._queue):
            if other.priority > waiting.priority:
                position = index
                break
        self._queue.insert(position, waiting)

    def peek(self) -> WaitingRequest | None:
        return self._queue[0] if self._queue else None

    def peek_overflowing(self, num_pending: int, num_ack_pending: int) -> WaitingRequest | None:
        """The next request an overflow consumer serves now, or None when no waiting request's minimum
        is reached; those passed over go to the back, as nats-server cycles them."""
        for _ in range(len(self._queue)):
            head = self._queue[0]
            if head.overflows(num_pending, num_ack_pending):
                return head
            self._queue.rotate(-1)
        return None

    def cycle(self) -> None:
        """The head waits its turn again, at the back."""
        self._queue.rotate(-1)

    def served(
        self, waiting: WaitingRequest, msgs: int, nbytes: int, now_ns: int, prioritized: bool = False
    ) -> bool:
        """Account for messages sent to `waiting`; True when it is done (and left the queue)."""
        waiting.batch_left -= msgs
        waiting.delivered += msgs
        if waiting.bytes_left:
            waiting.bytes_left = max(waiting.bytes_left - nbytes, 0)
        if waiting.heartbeat_ns and msgs:
            waiting.next_heartbeat_ns = now_ns + waiting.heartbeat_ns
        # max_bytes used up exactly: done too (its next plan would read a 0 limit as none at all)
        if waiting.batch_left <= 0 or (waiting.max_bytes and not waiting.bytes_left):
            self.remove(waiting)
            return True
        if msgs and len(self._queue) > 1 and self._queue[0] is waiting:
            # its turn is over: to the back of the queue (of its priority, on a prioritized consumer)
            if prioritized:
                self._queue.popleft()
                self._insert_by_priority(waiting)
            else:
                self._queue.rotate(-1)
        return False

    def turn_size(self, waiting: WaitingRequest) -> int:
        """How many messages `waiting` may take in one turn: all it wants when it waits alone, else one."""
        return waiting.batch_left if len(self._queue) <= 1 else 1

    def remove(self, waiting: WaitingRequest) -> None:
        with contextlib.suppress(ValueError):
            self._queue.remove(waiting)

    def batch_pending(self) -> int:
        """Messages the waiting requests still want, together."""
        return sum(waiting.batch_left for waiting in self._queue)

    def prune(self, now_ns: int, has_interest: Callable[[str], bool]) -> list[tuple[str, bytes]]:
        """Take out the requests whose expiry passed, answered (reply, 408 frame) each, and those
        whose reply subject nobody receives any more, dropped without an answer."""
        out = []
        for waiting in list(self._queue):
            if waiting.deadline_ns is not None and waiting.deadline_ns <= now_ns:
                self._queue.remove(waiting)
                out.append((waiting.reply, request_timeout(waiting.batch_left, waiting.bytes_left)))
            elif not has_interest(waiting.reply):
                self._queue.remove(waiting)
        return out

    def out_of_messages(self) -> list[tuple[str, bytes]]:
        """The consumer has nothing more to deliver: `no_wait` requests without an expiry, or that got
        messages already, are done (reply, 404 frame each); one with an expiry that got nothing waits."""
        out = []
        for waiting in list(self._queue):
            if waiting.no_wait and (waiting.deadline_ns is None or waiting.delivered > 0):
                self._queue.remove(waiting)
                out.append((waiting.reply, no_messages()))
        return out

    def heartbeats_due(self, now_ns: int) -> list[str]:
        """Replies owed an idle heartbeat now (their next one is scheduled)."""
        out = []
        for waiting in self._queue:
            if waiting.next_heartbeat_ns is not None and waiting.next_heartbeat_ns <= now_ns:
                waiting.next_heartbeat_ns = now_ns + waiting.heartbeat_ns
                out.append(waiting.reply)
        return out

    def next_wakeup(self) -> int | None:
        times = [t for w in self._queue for t in (w.deadline_ns, w.next_heartbeat_ns) if t is not None]
        return min(times) if times else None


__all__ = [
    "LOWEST_PRIORITY",
    "PullRequest",
    "PullRequestError",
    "WaitingQueue",
    "WaitingRequest",
    "bad_request",
    "batch_completed",
    "check_pull_request",
    "conflict",
    "go_duration",
    "max_bytes_exceeded",
    "no_messages",
    "no_wait_answer",
    "parse_pull_request",
    "pin_id_mismatch",
    "push_based",
    "request_timeout",
    "requests_pending",
    "wrong_pin_id",
]
