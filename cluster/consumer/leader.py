"""The duties of a consumer's leader: deliver, take acks, answer pulls and the consumer's API.

Exists only while this node leads the consumer's Raft group. It works on a
copy of the replicated state (`working`) that runs ahead of the log: every
entry it proposes (deliveries, acks, forgets) is applied to the copy at once,
so the next decision sees it, and reaches every replica through the group.
Messages are sent as soon as their DELIVERED entry is proposed, not once it
commits: if this leader dies first, the next one redelivers them (at least
once, as JetStream promises).

One task serves everything: it plans deliveries when a message is stored,
a pull request or an ack arrives, a push consumer's deliver subject gains or
loses a subscriber (the router tells it), or a timer (ack wait, pull expiry,
heartbeats, the end of a pause) is due, and sleeps otherwise. While the
config's `pause_until` lies ahead it delivers nothing (cluster/consumer/pause.py).
"""

from __future__ import annotations

import asyncio
import random
import secrets
import time
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from cluster.api.advisories import (
    UNACKED_MSG_DELETED,
    ConsumerEvent,
    consumer_advisory_subject,
    consumer_group_pinned,
    consumer_group_unpinned,
    consumer_leader_elected_subject,
    consumer_pause,
    leader_elected,
    max_deliveries,
    msg_naked,
    msg_terminated,
    new_event_id,
)
from cluster.api.audit import send_api_response
from cluster.api.consumer_subjects import (
    META_CONSUMER_PREFIX,
    RESPONSE_TYPES,
    ConsumerOp,
    consumer_subscription,
    parse_internal_consumer_subject,
)
from cluster.api.errors import ApiError, JSErrors, error_response, plain_error
from cluster.api.stepdown import stepdown_candidates
from cluster.consumer.acks import AckBody, AckKind, AckReply, ack_entry, parse_ack_body, parse_ack_reply
from cluster.consumer.api import (
    ConsumerView,
    FlowControl,
    ack_sample,
    ack_sample_subject,
    consumer_info,
    create_response,
    flow_control_request,
    flow_control_subject,
    idle_heartbeat,
    info_response,
    should_sample,
    stepdown_response,
)
from cluster.consumer.assignment import ConsumerAssignment
from cluster.consumer.config import (
    DEFAULT_PINNED_TTL_NS,
    PRIORITY_OVERFLOW,
    PRIORITY_PINNED_CLIENT,
    PRIORITY_PRIORITIZED,
    AckPolicy,
    ConsumerConfig,
    ReplayPolicy,
)
from cluster.consumer.delivery import (
    OutgoingMsg,
    StopReason,
    due_redeliveries,
    next_wakeup,
    num_pending,
    plan_deliveries,
    purge_entry,
    start_position,
)
from cluster.consumer.entries import AckLike, Acks, ConsumerEntry, Forget, ForgetReason, Reset, Restored
from cluster.consumer.pause import is_paused, pause_remaining
from cluster.consumer.pinning import PIN_ID_HEADER, PinnedClient
from cluster.consumer.pull import (
    PullRequest,
    PullRequestError,
    WaitingQueue,
    WaitingRequest,
    batch_completed,
    check_pull_request,
    max_bytes_exceeded,
    no_wait_answer,
    parse_pull_request,
    pin_id_mismatch,
    push_based,
    wrong_pin_id,
)
from cluster.consumer.reset import parse_reset_seq, reset_response, reset_seq
from cluster.consumer.state import ConsumerState
from cluster.consumer.unpin import parse_unpin_group, unpin
from cluster.runtime.catch_up import caught_up
from cluster.runtime.context import CLUSTER_NAME
from cluster.runtime.group_membership import converge_membership
from cluster.runtime.internal_requests import NoRespondersError
from cluster.runtime.meta_progress import meta_index_of
from cluster.stream.info import ClusterInfo
from cluster.stream.leader import elected_members, leader_cluster_info
from gateway.headers import extend_header_block
from gateway.router import InterestWatch, InvalidSubjectError, Message, Subscription
from raft.driver import RaftHostError
from storage.errors import CorruptStoreError, MsgNotFoundError

if TYPE_CHECKING:
    from cluster.runtime.context import NodeContext
    from cluster.stream.machine import PurgeDone
    from cluster.stream.replica import StreamReplica

log = structlog.get_logger(__name__)

PUSH_BATCH = 256
# full batches per turn of the serving loop before it lets other work in
PUSH_ROUNDS = 4
CATCH_UP_TIMEOUT = 2.0
IDLE_SLEEP = 1.0
# a new leader lets an inactive threshold run out only once it has answered its consumer's create, or
# after this long (a leader after a failover gets no create to answer): nats-server answers the create
# before its delete timer can fire, so even a threshold of a nanosecond gets its create answered
EXPIRY_GRACE_NS = 2_000_000_000


class LedConsumer(Protocol):
    """What a consumer's leader uses of the replica it leads (cluster/consumer/replica.py)."""

    ctx: NodeContext
    name: str
    group: str
    assignment: ConsumerAssignment
    config: ConsumerConfig
    state: ConsumerState
    # its stream's replica on this node, whose store it delivers from
    stream: StreamReplica


class ConsumerLeader:
    def __init__(self, replica: LedConsumer) -> None:
        self.replica = replica
        self.ctx = replica.ctx
        self.stream_name = replica.assignment.stream
        self.name = replica.name
        self.working: ConsumerState | None = None
        self.queue = WaitingQueue(max(replica.config.max_waiting, 0))
        self.flow = FlowControl()
        # a kick since the loop last served: more work waits (see `_sleep`)
        self._kicked = False
        # what `_sleep` awaits: set by a kick or by its timer
        self._wake: asyncio.Future[None] | None = None
        self._ack_buffer: list[AckLike] = []
        self._ack_committed: asyncio.Future[None] | None = None
        self._ready = asyncio.Event()
        self._subs: list[Subscription] = []
        self._task: asyncio.Task[Any] | None = None
        self._since_ns = time.time_ns()
        self._membership_task: asyncio.Task[Any] | None = None
        self._closed = False
        self._rng = random.Random(secrets.randbits(64))
        self._last_push_ns = time.time_ns()
        # since when nobody could receive (no push subscriber, no waiting pull request): the
        # inactive threshold runs from here; None while someone can
        self._idle_since: int | None = None
        self._expiring = False
        self._expiry_from_ns = time.time_ns() + EXPIRY_GRACE_NS  # see EXPIRY_GRACE_NS
        # replay original: the first delivery's (wall clock, stream time), and a message held until due
        self._replay_origin: tuple[int, int] | None = None
        self._held: tuple[OutgoingMsg, int] | None = None
        self._replay_due: int | None = None
        # a push consumer hears from the router when its deliver subject gains or loses a subscriber
        self._deliver_watch: InterestWatch | None = None
        # the pause this leader saw in force: when it runs out, the leader announces it
        self._pause_seen: int | None = None
        # a pinned_client consumer's pin (cluster/consumer/pinning.py)
        self.pin = PinnedClient(self._pin_timed_out)

    # -- lifecycle ---------------------------------------------------------------------------

    def open(self) -> None:
        router = self.ctx.router
        self._subs = [
            router.subscribe(consumer_subscription(self.stream_name, self.name), self._on_api),
            router.subscribe(f"$JS.ACK.{self.stream_name}.{self.name}.>", self._on_ack),
            router.subscribe(f"$JS.FC.{self.stream_name}.{self.name}.*", self._on_flow_control_reply),
        ]
        self._watch_deliver_subject()
        self._task = self.ctx.spawn(self._run(), f"consumer-{self.stream_name}-{self.name}")
        self.reconcile_membership()
        log.info("consumer_leader", stream=self.stream_name, consumer=self.name, node=self.ctx.name)
        self._advise_elected()

    def _advise_elected(self) -> None:
        """CONSUMER.LEADER_ELECTED, as nats-server sends it for a replicated consumer."""
        info = self._cluster_info()
        if not info.replicas:
            return
        me = self.ctx.name
        body = leader_elected(
            self.stream_name,
            self.name,
            me,
            elected_members(info, me),
            new_event_id(),
            time.time_ns(),
            self.ctx.domain,
        )
        self.ctx.router.publish(consumer_leader_elected_subject(self.stream_name, self.name), body)

    def close(self) -> None:
        self._closed = True
        for sub in self._subs:
            self.ctx.router.unsubscribe(sub)
        self._subs = []
        if self._deliver_watch is not None:
            self.ctx.router.unwatch_interest(self._deliver_watch)
            self._deliver_watch = None
        if self._task is not None:
            self._task.cancel()
        if self._membership_task is not None:
            self._membership_task.cancel()
        if self._ack_committed is not None:
            self._ack_committed.cancel()  # never proposed: nobody gets a confirmation for these
        self._ack_buffer, self._ack_committed = [], None
        self.pin.release()  # the next leader pins anew, as nats-server's does

    def kick(self) -> None:
        self._kicked = True
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    def stream_removed(self, seqs: list[int]) -> None:
        """The stream's replica on this node removed these messages one by one: those still pending
        are dropped at once, as nats-server terminates them (and announces it)."""
        working = self.working
        if working is None or not working.pending or self._closed:
            return
        gone = tuple(seq for seq in seqs if seq in working.pending)
        if gone:
            entry = Forget(time.time_ns(), gone, ForgetReason.MSG_GONE)
            self._advise_forget(entry, entry.ts_ns)
            self._propose(entry)
            self.kick()

    def stream_purged(self, purge: PurgeDone) -> None:
        """The stream's replica on this node applied a purge. A leader not serving yet has nothing to
        move: the start it proposes once caught up is read from the stream as purged."""
        working = self.working
        if working is None or not working.started or self._closed:
            return
        entry = purge_entry(self.replica.config, working, self.replica.stream.store, purge)
        if entry is not None:
            self._propose(entry)
            self.kick()

    def reconcile_membership(self) -> None:
        """Make the group's voters the assignment's peers (they follow the stream's on a peer remove)."""
        if self._membership_task is None or self._membership_task.done():
            self._membership_task = self.ctx.spawn(
                converge_membership(
                    self.ctx.host,
                    self.replica.group,
                    self.ctx.name,
                    lambda: set(self.replica.assignment.peers),
                    lambda: self._closed,
                ),
                f"membership-{self.replica.group}",
            )

    def config_changed(self) -> None:
        self.queue.max_waiting = max(self.replica.config.max_waiting, 0)
        self._watch_deliver_subject()
        self.kick()

    def _watch_deliver_subject(self) -> None:
        """Be woken the moment a push consumer's deliver subject gains or loses a subscriber, here or
        on a peer: delivery starts as soon as someone can receive, as nats-server's does."""
        router, cfg = self.ctx.router, self.replica.config
        watch = self._deliver_watch
        if watch is not None:
            if cfg.is_push and watch.subject == cfg.deliver_subject:
                return
            router.unwatch_interest(watch)
            self._deliver_watch = None
        if cfg.is_push:
            try:
                self._deliver_watch = router.watch_interest(cfg.deliver_subject, self.kick)
            except InvalidSubjectError:
                log.warning(
                    "consumer_deliver_subject_invalid", consumer=self.name, subject=cfg.deliver_subject
                )

    # -- the serving loop ----------------------------------------------------------------------

    async def _run(self) -> None:
        host = self.ctx.host
        # Caught up on the consumer's own log, and on the stream's: the local stream replica the
        # deliveries are read from then holds everything committed before this leader started,
        # so a new consumer's start position and pending count see every earlier publish.
        for group in (self.replica.group, self.replica.stream.group):
            if not await caught_up(host, group, lambda: self._closed, CATCH_UP_TIMEOUT):
                return  # stopped, or the group is gone with its stream or consumer
        self.working = self.replica.state.clone()
        if not self.working.started:
            restored = self.replica.assignment.restored_state
            if restored:
                # applied to the working copy at once too: nothing is delivered from a start position
                self._propose(Restored(restored))
            else:
                replicated = len(self.replica.assignment.peers) > 1
                self._propose(start_position(self.replica.config, self.replica.stream.store, replicated))
        self._ready.set()
        while not self._closed:
            self._kicked = False
            now = time.time_ns()
            try:
                self._serve(now)
            except RaftHostError as exc:
                log.info("consumer_not_serving", consumer=self.name, error=str(exc))
                return
            await self._sleep(now)

    async def _sleep(self, now: int) -> None:
        if self._kicked:
            await asyncio.sleep(0)  # more work already waits: just let the rest of the node have a turn
            return
        cfg, working = self.replica.config, self.working
        assert working is not None
        paused = is_paused(cfg, now)
        # a redelivery falling due matters only when someone can receive it: a waiting pull
        # request, or a push subscriber (else an overdue ack wait would spin this loop); and not
        # while paused (the end of the pause wakes this loop instead)
        receivers = len(self.queue) > 0 if cfg.is_pull else self.ctx.router.has_interest(cfg.deliver_subject)
        due = next_wakeup(cfg, working) if receivers and not paused else None
        wakeups = [t for t in (due, self.queue.next_wakeup()) if t is not None]
        if cfg.is_push and cfg.idle_heartbeat:
            wakeups.append(self._last_push_ns + cfg.idle_heartbeat)
        if paused:
            assert cfg.pause_until_ns is not None
            wakeups.append(cfg.pause_until_ns)
        elif self._replay_due is not None:
            wakeups.append(self._replay_due)
        if self._idle_since is not None and cfg.inactive_threshold and not self._expiring:
            wakeups.append(max(self._idle_since + cfg.inactive_threshold, self._expiry_from_ns))
        timeout = IDLE_SLEEP
        if wakeups:
            timeout = min(max((min(wakeups) - now) / 1e9, 0.001), IDLE_SLEEP)
        # a push consumer without a subscriber needs no polling: the router's watch kicks this loop
        # the moment one subscribes, here or on a peer. A kick resumes this task in the loop's next turn
        # (asyncio.wait_for would take two more, and a task of its own per wait): a kick from a stream's
        # apply then delivers before the publishes' acks, which are scheduled after it, as a client
        # that counts its deliveries when its last publish is acknowledged expects (nats-py's tests do).
        loop = asyncio.get_running_loop()
        wake = self._wake = loop.create_future()
        timer = loop.call_later(timeout, _wake_up, wake)
        try:
            await wake
        finally:
            timer.cancel()
            self._wake = None

    def _propose(self, entry: ConsumerEntry) -> asyncio.Future[Any]:
        if self._ack_buffer:
            self._flush_acks()  # acks that came first go first: every replica applies in proposal order
        future = self.ctx.host.propose_nowait(self.replica.group, entry.encode())
        future.add_done_callback(_consume_result)
        assert self.working is not None
        self.working.apply_entry(entry)
        return future

    def _buffer_ack(self, entry: AckLike) -> asyncio.Future[Any]:
        """Acks arriving together (one read from a client carries many) become one ACKS entry, proposed
        once the current callback is done; the returned future completes when that entry commits."""
        if not self._ack_buffer:
            self._ack_committed = asyncio.get_running_loop().create_future()
            self._ack_committed.add_done_callback(_consume_result)
            asyncio.get_running_loop().call_soon(self._flush_acks)
        self._ack_buffer.append(entry)
        assert self._ack_committed is not None
        return self._ack_committed

    def _flush_acks(self) -> None:
        buffered, committed = self._ack_buffer, self._ack_committed
        if not buffered or committed is None:
            return
        self._ack_buffer, self._ack_committed = [], None
        entry: ConsumerEntry = buffered[0] if len(buffered) == 1 else Acks(tuple(buffered))
        try:
            future = self._propose(entry)
        except RaftHostError as exc:
            committed.set_exception(exc)
            return

        def settle(done: asyncio.Future[Any]) -> None:
            if committed.done():
                return
            if done.cancelled():
                committed.cancel()
            elif done.exception() is not None:
                committed.set_exception(done.exception())  # type: ignore[arg-type]
            else:
                committed.set_result(None)

        future.add_done_callback(settle)

    def _serve(self, now: int) -> None:
        paused = self._check_pause(now)
        try:
            if self.replica.config.is_push:
                self._serve_push(now, paused)
            else:
                self._serve_pulls(now, paused)
        except CorruptStoreError as exc:
            # A stored message failed its checks when read: never delivered. The round that meets it
            # delivers nothing (nats-server would still send the messages before it); the next round, once
            # the node has repaired its store from its peers, goes on.
            log.error("stored_message_damaged", stream=self.stream_name, consumer=self.name, error=str(exc))
        self._check_inactive(now)

    def _check_pause(self, now: int) -> bool:
        """Whether the consumer is paused now; a pause this leader saw run out is announced (one the
        meta leader lifted with a PAUSE request was announced there)."""
        cfg = self.replica.config
        if is_paused(cfg, now):
            self._pause_seen = cfg.pause_until_ns
            return True
        if self._pause_seen is not None:
            if cfg.pause_until_ns == self._pause_seen:
                body = consumer_pause(
                    self.stream_name, self.name, cfg.pause_until_ns, new_event_id(), now, self.ctx.domain
                )
                subject = consumer_advisory_subject(ConsumerEvent.PAUSE, self.stream_name, self.name)
                self.ctx.router.publish(subject, body)
            self._pause_seen = None
        return False

    def _has_interest(self, subject: str) -> bool:
        try:
            return self.ctx.router.has_interest(subject)
        except InvalidSubjectError:
            return False

    def _publish_frames(self, frames: list[tuple[str, bytes]]) -> None:
        for reply, frame in frames:
            self.ctx.router.publish(reply, b"", None, frame)

    def _serve_pulls(self, now: int, paused: bool) -> None:
        publish = self.ctx.router.publish
        wakeup = self.queue.next_wakeup()
        # expired requests get their 408; those whose client is gone are dropped unanswered
        self._publish_frames(self.queue.prune(now, self._has_interest))
        if wakeup is not None and wakeup <= now:
            # a request's expiry or heartbeat fell due: as nats-server's timer does, end the no_wait
            # requests that are done, even those max_ack_pending holds back (cluster/consumer/pull.py)
            self._publish_frames(self.queue.out_of_messages())
        for reply in self.queue.heartbeats_due(now):
            assert self.working is not None
            publish(reply, b"", None, idle_heartbeat(self.working))
        if paused:
            # nothing is delivered: as at the end of the stream, no_wait requests are answered
            self._publish_frames(self.queue.out_of_messages())
            return
        cfg = self.replica.config
        policy = cfg.priority_policy
        prioritized = policy == PRIORITY_PRIORITIZED
        pinned = policy == PRIORITY_PINNED_CLIENT
        while (waiting := self._next_waiting(policy, now)) is not None:
            if not self._has_interest(waiting.reply):
                self.queue.remove(waiting)  # nobody would receive what it is sent
                continue
            plan = self._plan(now, self.queue.turn_size(waiting), waiting.bytes_left)
            if not plan.messages:
                if plan.entries:
                    continue
                if plan.stop is StopReason.MAX_BYTES:
                    self.queue.remove(waiting)
                    publish(
                        waiting.reply, b"", None, max_bytes_exceeded(waiting.batch_left, waiting.bytes_left)
                    )
                    continue
                if plan.stop is not StopReason.MAX_ACK_PENDING:
                    # out of messages (held back by max_ack_pending is not: acks will free some)
                    self._publish_frames(self.queue.out_of_messages())
                return
            if pinned:
                self._deliver_pinned(waiting, plan.messages, now)
            else:
                for msg in plan.messages:
                    publish(waiting.reply, msg.payload, msg.reply, msg.headers, deliver_as=msg.subject)
            if self.queue.served(waiting, len(plan.messages), plan.bytes_used, now, prioritized):
                if waiting.completed_with_bytes_left:
                    publish(waiting.reply, b"", None, batch_completed(waiting.bytes_left))
            elif plan.stop is StopReason.MAX_BYTES:
                self.queue.remove(waiting)
                publish(waiting.reply, b"", None, max_bytes_exceeded(waiting.batch_left, waiting.bytes_left))

    def _next_waiting(self, policy: str, now: int) -> WaitingRequest | None:
        """The request served next: the queue's head; on an `overflow` consumer the first whose minimum
        pending (or unacknowledged) count is reached; on a `pinned_client` one the pinned client's
        request, or while nobody is pinned the head (which the delivery pins). None: the others wait."""
        queue = self.queue
        if not len(queue) or policy not in (PRIORITY_OVERFLOW, PRIORITY_PINNED_CLIENT):
            return queue.peek()
        working = self.working
        assert working is not None
        if policy == PRIORITY_OVERFLOW:
            pending = num_pending(self.replica.config, working, self.replica.stream.store)
            return queue.peek_overflowing(pending, working.num_ack_pending)
        for _ in range(len(queue)):  # bounded: each turn takes out or passes over one request
            head = queue.peek()
            if head is None:
                return None
            if head.pin_id and head.pin_id != self.pin.id:
                # a pin this consumer does not have (an old one, or none now): nats-server says so
                # when it has a message for the request, which then leaves the queue
                if not self._deliverable(now):
                    return None
                queue.remove(head)
                self.ctx.router.publish(head.reply, b"", None, wrong_pin_id(head.batch_left, head.bytes_left))
                continue
            if not self.pin.id or head.pin_id == self.pin.id:
                return head
            queue.cycle()  # no pin named while a client is pinned: it waits for the pin to go
        return None

    def _deliver_pinned(self, waiting: WaitingRequest, messages: list[OutgoingMsg], now: int) -> None:
        """Messages for a pinned_client consumer's request, each naming the pin (a header that, as on
        nats-server, does not count towards the request's max_bytes); the first message to a request
        of the group while nobody is pinned pins its client (a request that is not JSON gets an empty
        pin, and pins nobody, as on nats-server)."""
        if not self.pin.id and waiting.group:
            self._pin(waiting, new_event_id(), now)
        line = f"{PIN_ID_HEADER}: {self.pin.id}\r\n".encode()
        publish = self.ctx.router.publish
        for msg in messages:
            headers = extend_header_block(msg.headers, line)
            publish(waiting.reply, msg.payload, msg.reply, headers, deliver_as=msg.subject)

    def _pin(self, waiting: WaitingRequest, pin_id: str, now: int) -> None:
        self.pin.assign(pin_id, now, self.replica.config.priority_timeout or DEFAULT_PINNED_TTL_NS)
        waiting.pin_id = pin_id
        group = waiting.group or ""
        ctx = self.ctx
        ctx.advise(
            consumer_advisory_subject(ConsumerEvent.PINNED, self.stream_name, self.name),
            lambda: consumer_group_pinned(
                ctx.account, self.stream_name, self.name, group, pin_id, new_event_id(), now, ctx.domain
            ),
        )

    def unpin(self, reason: str, group: str) -> None:
        """Release the pin of `group` (UNPIN: `admin`; the pinned client stopped asking: `timeout`),
        announced whether or not a client was pinned, as nats-server does; the next request takes
        it over."""
        self.pin.release()
        ctx, now = self.ctx, time.time_ns()
        ctx.advise(
            consumer_advisory_subject(ConsumerEvent.UNPINNED, self.stream_name, self.name),
            lambda: consumer_group_unpinned(
                ctx.account, self.stream_name, self.name, group, reason, new_event_id(), now, ctx.domain
            ),
        )
        self.kick()

    def _pin_timed_out(self) -> None:
        if not self._closed:
            groups = self.replica.config.priority_groups
            self.unpin("timeout", groups[0] if groups else "")

    def _serve_push(self, now: int, paused: bool) -> None:
        cfg, router = self.replica.config, self.ctx.router
        subject = cfg.deliver_subject
        if not router.has_interest(subject):
            return
        if not paused and not self.flow.stalled:
            if cfg.replay_policy is ReplayPolicy.ORIGINAL:
                while not self._closed and self._replay_next(now):
                    pass
            else:
                self._push_batches(now)
        # heartbeats go on while paused or stalled on flow control (naming the reply it waits for)
        if cfg.idle_heartbeat and now - self._last_push_ns >= cfg.idle_heartbeat:
            assert self.working is not None
            stalled = (self.flow.outstanding or "") if self.flow.stalled else ""
            router.publish(subject, b"", None, idle_heartbeat(self.working, stalled))
            self._last_push_ns = now

    def _push_batches(self, now: int) -> None:
        """A few full batches, then back to the loop (acks, flow control and other consumers get a turn);
        a kick brings this straight back while more is waiting."""
        for _ in range(PUSH_ROUNDS):
            if self._closed:
                return
            plan = self._plan(now, PUSH_BATCH, 0)
            if not plan.messages:
                return
            if self.replica.config.flow_control:
                for msg in plan.messages:
                    self._push(msg)
            else:
                # the hot path of a push consumer: one publish per message, nothing else
                publish, subject = self.ctx.router.publish, self.replica.config.deliver_subject
                for msg in plan.messages:
                    publish(subject, msg.payload, msg.reply, msg.headers, deliver_as=msg.subject)
            self._last_push_ns = now
            if self.flow.stalled or plan.stop is not StopReason.BATCH_DONE:
                return
        self.kick()

    def _push(self, msg: OutgoingMsg) -> None:
        cfg, router = self.replica.config, self.ctx.router
        router.publish(cfg.deliver_subject, msg.payload, msg.reply, msg.headers, deliver_as=msg.subject)
        if cfg.flow_control and self.flow.sent(msg.size):
            reply = flow_control_subject(self.stream_name, self.name, secrets.token_hex(2))
            self.flow.requested(reply)
            router.publish(cfg.deliver_subject, b"", reply, flow_control_request())

    def _replay_next(self, now: int) -> bool:
        """Replay original: one message at a time, spaced as the stream's timestamps are; True if sent."""
        if self._held is None:
            plan = self._plan(now, 1, 0)
            if not plan.messages:
                return False
            msg = plan.messages[0]
            try:
                ts = self.replica.stream.store.load_msg(msg.stream_seq).ts_ns
            except MsgNotFoundError:
                ts = now
            if self._replay_origin is None:
                self._replay_origin = (now, ts)
            start, first_ts = self._replay_origin
            self._held = (msg, start + max(ts - first_ts, 0))
        msg, due = self._held
        if now < due or self.flow.stalled:
            self._replay_due = due
            return False
        self._held = None
        self._replay_due = None
        self._push(msg)
        self._last_push_ns = now
        return True

    def _check_inactive(self, now: int) -> None:
        """A consumer with an inactive threshold (every ephemeral; durables that set one) goes away once
        nobody could receive from it for that long: a push consumer without a subscriber, a pull
        consumer with no request waiting (a pull request or an ack makes it active again)."""
        cfg = self.replica.config
        active = self.ctx.router.has_interest(cfg.deliver_subject) if cfg.is_push else len(self.queue) > 0
        if active:
            self._idle_since = None
            return
        if self._idle_since is None:
            self._idle_since = now
        if (
            cfg.inactive_threshold
            and not self._expiring
            and now - self._idle_since >= cfg.inactive_threshold
            and now >= self._expiry_from_ns
        ):
            self._expiring = True
            self.ctx.spawn(self._delete_self(), f"expire-{self.name}")

    async def _delete_self(self) -> None:
        subject = f"{META_CONSUMER_PREFIX}DELETE.{self.stream_name}.{self.name}"
        try:
            await self.ctx.requester.request(subject, timeout=CATCH_UP_TIMEOUT * 2)
        except (TimeoutError, NoRespondersError) as exc:
            # no meta leader right now: the next check asks again
            log.info("consumer_expiry_failed", consumer=self.name, error=repr(exc))
            self._expiring = False
            return
        log.info("consumer_expired", stream=self.stream_name, consumer=self.name)

    def _plan(self, now: int, max_msgs: int, max_bytes: int) -> Any:
        assert self.working is not None
        self._flush_acks()  # the plan sees every ack received so far (max_ack_pending room)
        plan = plan_deliveries(
            self.stream_name,
            self.name,
            self.replica.config,
            self.working,
            self.replica.stream.store,
            now,
            max_msgs,
            max_bytes,
        )
        for entry in plan.entries:
            if isinstance(entry, Forget):
                self._advise_forget(entry, now)
            self._propose(entry)
        return plan

    def _advise_forget(self, entry: Forget, now: int) -> None:
        """Announce each pending message a FORGET drops (before it is applied), as nats-server does:
        CONSUMER.MAX_DELIVERIES at max_deliver; CONSUMER.MSG_TERMINATED for one the stream no longer has."""
        assert self.working is not None
        max_deliver = entry.reason is ForgetReason.MAX_DELIVER
        event = ConsumerEvent.MAX_DELIVERIES if max_deliver else ConsumerEvent.MSG_TERMINATED
        subject = consumer_advisory_subject(event, self.stream_name, self.name)
        for seq in entry.stream_seqs:
            pending = self.working.pending.get(seq)
            if pending is None:
                continue
            if max_deliver:
                body = max_deliveries(self.stream_name, self.name, seq, pending.deliveries, new_event_id(), now)
            else:
                body = msg_terminated(
                    self.stream_name, self.name, pending.consumer_seq, seq, pending.deliveries,
                    UNACKED_MSG_DELETED, new_event_id(), now,
                )  # fmt: skip
            self.ctx.router.publish(subject, body)

    def _advise_ack(self, reply: AckReply, body: AckBody, now: int) -> None:
        """+TERM and -NAK of a pending message are announced, as nats-server does."""
        assert self.working is not None
        if reply.stream_seq not in self.working.pending:
            return
        if body.kind is AckKind.TERM:
            event = ConsumerEvent.MSG_TERMINATED
            advisory = msg_terminated(
                self.stream_name, self.name, reply.consumer_seq, reply.stream_seq, reply.deliveries,
                body.term_reason, new_event_id(), now,
            )  # fmt: skip
        else:
            event = ConsumerEvent.MSG_NAKED
            advisory = msg_naked(
                self.stream_name, self.name, reply.consumer_seq, reply.stream_seq, reply.deliveries,
                new_event_id(), now,
            )  # fmt: skip
        self.ctx.router.publish(consumer_advisory_subject(event, self.stream_name, self.name), advisory)

    # -- inbound ------------------------------------------------------------------------------

    def _on_ack(self, msg: Message) -> None:
        if self.working is None:
            return
        reply = parse_ack_reply(msg.subject)
        body = parse_ack_body(msg.payload)
        if reply is None or body is None or reply.consumer != self.name:
            return  # as a server does: an ack it cannot use is ignored
        cfg = self.replica.config
        if cfg.ack_policy is AckPolicy.NONE:
            return
        now = time.time_ns()
        if self._idle_since is not None:
            self._idle_since = now  # acks show a client at work: the inactive threshold starts again
        if body.kind is AckKind.TERM or body.kind is AckKind.NAK:
            self._advise_ack(reply, body, now)
        committed = self._buffer_ack(ack_entry(reply, body, now))
        if body.kind is AckKind.NEXT and msg.reply:
            self._queue_pull(msg.reply, body.next_request, now)
        elif msg.reply:
            # a double ack is confirmed once the ack is committed, so a confirmed ack survives failover
            confirm = msg.reply
            committed.add_done_callback(
                lambda f: None if f.cancelled() or f.exception() is not None else self.ctx.reply(confirm, b"")
            )
        if body.kind is AckKind.ACK and should_sample(cfg.sample_percent, self._rng.random()):
            self.ctx.router.publish(
                ack_sample_subject(self.stream_name, self.name),
                ack_sample(
                    self.stream_name,
                    self.name,
                    reply.consumer_seq,
                    reply.stream_seq,
                    max(now - reply.ts_ns, 0),
                    reply.deliveries,
                    secrets.token_hex(11),
                    now,
                ),
            )
        self.kick()

    def _on_flow_control_reply(self, msg: Message) -> None:
        self.flow.answered(msg.subject)
        self.kick()

    def _on_api(self, msg: Message) -> None:
        parsed = parse_internal_consumer_subject(msg.subject)
        if parsed is None or not msg.reply:
            return
        _, _, op = parsed
        if op is ConsumerOp.NEXT:
            self._queue_pull(msg.reply, msg.payload, time.time_ns())
            return
        self.ctx.spawn(self._answer(op, msg), f"consumer-api-{op.value}")

    def _queue_pull(self, reply: str, body: bytes, now: int) -> None:
        cfg = self.replica.config
        try:
            if cfg.is_push:
                raise PullRequestError(push_based())
            request: PullRequest = parse_pull_request(body)
            check_pull_request(cfg, request)
        except PullRequestError as exc:
            self.ctx.router.publish(reply, b"", None, exc.frame)
            return
        if cfg.priority_policy == PRIORITY_PINNED_CLIENT and request.group is not None and self.pin.id:
            if request.pin_id == self.pin.id:
                self.pin.keep(cfg.priority_timeout or DEFAULT_PINNED_TTL_NS)  # the pinned client asks on
            elif request.pin_id:
                self.ctx.router.publish(reply, b"", None, pin_id_mismatch())
                return
        self._idle_since = None  # a pull request is activity, even one answered at once (no_wait)
        if self.queue.full or request.no_wait:
            # expired and abandoned requests go first: they neither take room nor want messages
            self._publish_frames(self.queue.prune(now, self._has_interest))
        batch_pending = self.queue.batch_pending() if request.no_wait else 0
        # what it could get decides only without an expiry or behind other requests (nats-py's fetch
        # sends no_wait with expires to an empty queue: no count needed)
        if request.no_wait and self.working is not None and (not request.expires_ns or batch_pending):
            answer = no_wait_answer(request, self._deliverable(now), batch_pending)
            if answer is not None:
                self.ctx.router.publish(reply, b"", None, answer)
                return
        try:
            self.queue.add(reply, request, now, prioritized=cfg.priority_policy == PRIORITY_PRIORITIZED)
        except PullRequestError as exc:
            if exc.frame:
                self.ctx.router.publish(reply, b"", None, exc.frame)
            return
        self.kick()

    def _deliverable(self, now: int) -> int:
        """Messages the consumer could deliver now: not yet delivered, and redeliveries due."""
        assert self.working is not None
        cfg = self.replica.config
        return num_pending(cfg, self.working, self.replica.stream.store) + len(
            due_redeliveries(cfg, self.working, now)
        )

    async def _answer(self, op: ConsumerOp, msg: Message) -> None:
        reply, headers = msg.reply, msg.headers
        try:
            # asked by way of the meta leader: answer with what it had applied (an update's config)
            index = meta_index_of(headers)
            if index:
                await self.ctx.meta_progress.reached(index)
            if op is ConsumerOp.APPLIED:
                self.ctx.reply(reply, b"")
                return
            await asyncio.wait_for(self._ready.wait(), CATCH_UP_TIMEOUT * 2)
            if op is ConsumerOp.STEPDOWN:
                body = await self._step_down(msg.payload)
            elif op is ConsumerOp.RESET:
                body = await self._reset(msg.payload)
            elif op in (ConsumerOp.INFO, ConsumerOp.CREATE_RESULT):
                view = self.view()
                body = (
                    create_response(view, time.time_ns())
                    if op is ConsumerOp.CREATE_RESULT
                    else info_response(view, time.time_ns())
                )
                if op is ConsumerOp.CREATE_RESULT and self._expiry_from_ns:
                    self._expiry_from_ns = 0  # answered: its inactive threshold may run out now
                    self.kick()
            elif op is ConsumerOp.LIST_ENTRY:
                body = info_response(self.view(), time.time_ns())
            elif op is ConsumerOp.ARCHIVE:
                assert self.working is not None  # set before _ready
                body = self.working.snapshot()
            elif op is ConsumerOp.UNPIN:
                # the meta leader checked the stream, the consumer and the group (cluster/consumer/unpin.py)
                group = parse_unpin_group(msg.payload)
                body = unpin(self.replica.config.priority_groups, group)
                self.unpin("admin", group)
            else:
                raise JSErrors.BAD_REQUEST()
        except ApiError as error:
            body = _error_body(op, error)
        except (RaftHostError, TimeoutError):
            body = _error_body(op, JSErrors.CLUSTER_NOT_AVAILABLE())
        send_api_response(self.ctx, msg, body)

    async def _reset(self, payload: bytes) -> bytes:
        """CONSUMER.RESET: through the consumer's group, answered once every replica will start over
        at the same sequence (cluster/consumer/reset.py)."""
        requested = parse_reset_seq(payload)
        assert self.working is not None
        store = self.replica.stream.store
        seq = reset_seq(requested, self.replica.config, self.working.ack_floor_stream_seq, store.get_seq_from_time)
        await self._propose(Reset(seq))
        self.kick()
        return reset_response(consumer_info(self.view(), time.time_ns()), seq)

    async def _step_down(self, payload: bytes) -> bytes:
        host, group = self.ctx.host, self.replica.group
        voters = host.status(group).voters
        others = [peer for peer in voters if peer != self.ctx.name]
        allowed = stepdown_candidates(payload, self.ctx.name, voters, self.ctx.router.peer_labels, CLUSTER_NAME)
        if allowed is not None:
            others = [peer for peer in others if peer in allowed]
        if not others:
            raise JSErrors.STREAM_GENERAL(err="no replica to hand leadership to")
        await host.transfer_leadership(group, others[0])
        return stepdown_response()

    def _cluster_info(self) -> ClusterInfo:
        """As STREAM.INFO shows its group: the leader, and each other voter with its lag."""
        return leader_cluster_info(self.ctx.host, self.ctx.name, self.replica.group, self._since_ns)

    def view(self) -> ConsumerView:
        working = self.working or self.replica.state
        assignment, cfg = self.replica.assignment, self.replica.config
        now = time.time_ns()
        if cfg.is_pull:
            # as nats-server: only requests still waiting for someone count
            self._publish_frames(self.queue.prune(now, self._has_interest))
        return ConsumerView(
            stream=assignment.stream,
            name=assignment.name,
            created_ns=assignment.created_ns,
            config=cfg,
            state=working,
            num_pending=num_pending(cfg, working, self.replica.stream.store),
            num_waiting=len(self.queue),
            cluster=None if self.ctx.standalone else self._cluster_info().to_json(),
            push_bound=cfg.is_push and self.ctx.router.has_interest(cfg.deliver_subject),
            pause_remaining_ns=pause_remaining(cfg, now),
            pinned_id=self.pin.id,
            pinned_ns=self.pin.since_ns,
        )


def _wake_up(wake: asyncio.Future[None]) -> None:
    if not wake.done():
        wake.set_result(None)


def _consume_result(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()  # retrieved, so a lost proposal is not reported as never retrieved


def _error_body(op: ConsumerOp, error: ApiError) -> bytes:
    """An error answer to `op`: a stepdown's and a reset's carry their own response type (a reset's
    with Go's zero `reset_seq` after it), the others the consumer info's."""
    if op is ConsumerOp.RESET:
        return error_response(RESPONSE_TYPES[op], error, reset_seq=0)
    return plain_error(RESPONSE_TYPES[op if op is ConsumerOp.STEPDOWN else ConsumerOp.INFO], error)
