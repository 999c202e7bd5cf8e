"""The duties of a stream's leader: take publishes, answer the per-stream API, serve coherent reads.

Exists only while this node leads the stream's Raft group: it subscribes to
the stream's subjects and to `$JSR.S.<stream>.*` (where any node's API
member forwards requests for this stream) when leadership arrives, and
unsubscribes when it goes.

A publish is checked against the applied state (fast answers for
duplicates and failed expectations), proposed, and acknowledged with the
result of applying it: the PubAck leaves only after the entry is committed
on a majority and applied here. STREAM.MSG.GET waits for a ReadIndex, so a
deposed leader that has not noticed yet cannot answer from a stale store.
With RePublish set, the leader republishes what it applies, and what earlier
leaders had not recorded as republished when it took over (the guarantee is
in cluster/stream/republish.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from typing import TYPE_CHECKING, Any, Protocol

import orjson
import structlog

from cluster.api import jsjson
from cluster.api.advisories import (
    batch_abandoned,
    batch_abandoned_subject,
    leader_elected,
    new_event_id,
    stream_leader_elected_subject,
)
from cluster.api.audit import send_api_response
from cluster.api.errors import ApiError, JSErrors, plain_error, stream_info_error
from cluster.api.response_types import LEADER_STEPDOWN_TYPE, MSG_DELETE_TYPE, STREAM_UPDATE_TYPE
from cluster.api.stepdown import stepdown_candidates
from cluster.api.subjects import ApiOp, parse_stream_subject, stream_subscription
from cluster.backup.restore_batch import split_restore_batch
from cluster.backup.snapshot import StreamAtSnapshot, serve_snapshot
from cluster.runtime.catch_up import caught_up
from cluster.runtime.context import CLUSTER_NAME, SYSTEM_ACCOUNT
from cluster.runtime.group_membership import converge_membership, next_change
from cluster.runtime.leader_wait import pass_on_when_served
from cluster.runtime.meta_progress import meta_index_of
from cluster.runtime.metrics import LabelledChildren
from cluster.runtime.server_limits import node_over_limit
from cluster.stream.atomic_batch import (
    HDR_BATCH_ID,
    HDR_BATCH_ID_BYTES,
    AbandonReason,
    AtomicBatches,
    BatchChecks,
    BatchMsg,
    Commit,
    Refused,
    Staged,
    batch_refusal,
)
from cluster.stream.config import StorageType, stream_config_from_bytes
from cluster.stream.config_check import same_config
from cluster.stream.entries import EntryOp, Republished, StoreBatch, UpdateConfig
from cluster.stream.expiry import ExpiryTimer
from cluster.stream.fetch import FetchedMsg, encode_batch, parse_fetch_request
from cluster.stream.info import (
    ClusterInfo,
    PeerInfo,
    SourceInfo,
    StreamInfo,
    leader_stepdown_response,
    msg_delete_response,
    parse_info_request,
    parse_msg_delete_request,
    parse_purge_request,
    stream_create_response,
    stream_info_response,
    stream_purge_error,
    stream_purge_response,
    stream_update_response,
    subjects_page,
)
from cluster.stream.machine import (
    BatchStored,
    ConfigApplied,
    Deleted,
    EntryResult,
    Expired,
    Purged,
    Stored,
    last_subject_seq,
)
from cluster.stream.msg_get import answer_msg_get, msg_get_error
from cluster.stream.publish import (
    Accepted,
    Duplicate,
    Rejected,
    batch_ack,
    decision_ack,
    error_ack,
    exceeds_account_bytes,
    prepare_publish,
    pub_ack,
)
from cluster.stream.republish import (
    Outgoing,
    Republisher,
    StoredForRepublish,
    republish_subject,
    republish_transform,
)
from cluster.stream.scheduler import MessageScheduler
from gateway.headers import HeaderError, decode_headers
from gateway.router import Message, Subscription
from raft.driver import NotLeaderError, RaftHost, RaftHostError
from storage.errors import InvalidSubjectError, MsgNotFoundError

if TYPE_CHECKING:
    from cluster.runtime.context import NodeContext
    from cluster.stream.assignment import StreamAssignment
    from cluster.stream.config import StreamConfig, StreamSource
    from cluster.stream.machine import StreamStateMachine
    from storage.interface import StreamStore

log = structlog.get_logger(__name__)

# How long a coherent read waits for this leader to confirm its leadership.
READ_INDEX_TIMEOUT = 2.0
# How long a publish this leader could not take waits for leadership to move before it is passed on.
PASS_ON_WAIT = 3.0


class LedReplica(Protocol):
    """What a stream's leader, and the copiers it runs, use of the replica it leads
    (cluster/stream/replica.py)."""

    ctx: NodeContext
    name: str
    metric_label: str  # its `stream` label in /metrics
    group: str
    assignment: StreamAssignment
    config: StreamConfig
    machine: StreamStateMachine
    store: StreamStore
    stopped: bool
    # the stream's consumers, as the meta group's assignments on this node count them
    expected_consumers: int

    def propose(self, data: bytes) -> asyncio.Future[Any]:
        """Raises NotLeaderError and friends synchronously, like the driver."""

    def wait_for_seq(self, seq: int, timeout: float) -> asyncio.Future[bool]: ...

    def leader_staleness_ns(self) -> int: ...

    def assigned_config(self) -> StreamConfig:
        """The meta group's config for the stream (`assignment.config`, parsed)."""


class Copier(Protocol):
    """Copies one origin into the stream while its replica leads: the mirror's origin, or one of its
    sources (cluster/mirror/origin_fetcher.py)."""

    source: StreamSource

    @property
    def lag(self) -> int:
        """How many messages the origin holds that the copy does not yet."""

    def position(self) -> int:
        """The last origin sequence copied (replicated state)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def staleness_ns(self, now_ns: int) -> int: ...

    def active_ns(self, now_ns: int) -> int: ...


class CopierFactory(Protocol):
    """Makes the copier of one origin; `mirror` selects the mirror form (else a source)."""

    def __call__(self, replica: LedReplica, source: StreamSource, *, mirror: bool) -> Copier: ...


class StreamLeader:
    def __init__(self, replica: LedReplica, copiers: CopierFactory) -> None:
        self.replica = replica
        self._copiers = copiers
        self.ctx = replica.ctx
        self._subject_subs: list[Subscription] = []
        self._subjects: tuple[str, ...] = ()
        self._api_sub: Subscription | None = None
        self._since_ns = time.time_ns()
        self._closed = False
        self.mirror: Copier | None = None
        self.sources: list[Copier] = []
        self._membership_task: asyncio.Task[Any] | None = None
        metrics = self.ctx.metrics
        self._msg_gets = LabelledChildren(metrics.msg_get_requests, replica.metric_label, self.ctx.name)
        self._publish_tally = metrics.publish_tally(replica.metric_label)
        self._republisher: Republisher | None = None
        self.expiry = ExpiryTimer(replica.name, self._next_expiry_ns, replica.propose)
        self._republish_catch_up: asyncio.Task[None] | None = None
        self._batches = AtomicBatches()
        self.scheduler = MessageScheduler(replica.name, replica.store, replica.propose)
        self._batch_timer: asyncio.TimerHandle | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def open(self) -> None:
        group = self.replica.group
        log.info(
            "stream_leader",
            stream=self.replica.name,
            node=self.ctx.name,
            group=group,
            term=self.ctx.host.term(group),
        )
        # a leader whose log holds nothing from an earlier term (a new stream's first leader) has
        # caught up already: it takes the API below, at once; any other, once caught up
        caught_up_now = self.ctx.host.leads_with_nothing_before_term(group)
        self._api_opening: asyncio.Task[None] | None = (
            None if caught_up_now else self.ctx.spawn(self._open_api(), f"api-{self.replica.name}")
        )
        self.refresh_subjects()
        self.reconcile_config()
        self.reconcile_membership()
        self._start_republishing()
        cfg = self.replica.config
        if cfg.mirror is not None:
            self.mirror = self._copiers(self.replica, cfg.mirror, mirror=True)
            self.mirror.start()
        self.sources = [self._copiers(self.replica, source, mirror=False) for source in cfg.sources]
        for fetcher in self.sources:
            fetcher.start()
        self.expiry_check()
        self._advise_elected()
        if caught_up_now:
            self._take_api()

    def _advise_elected(self) -> None:
        """STREAM.LEADER_ELECTED, as nats-server sends it for a replicated stream (not for an R1 one)."""
        info = self.cluster_info()
        if not info.replicas:
            return
        name, me = self.replica.name, self.ctx.name
        body = leader_elected(
            name, None, me, elected_members(info, me), new_event_id(), time.time_ns(), self.ctx.domain
        )
        self.ctx.router.publish(stream_leader_elected_subject(name), body)

    async def _open_api(self) -> None:
        """Take the stream's API (INFO, MSG.GET, purge, ...) once this leader has applied every entry
        committed before its term: a leader just elected may hold entries its predecessor committed
        (and acknowledged) that it has not applied yet, and its INFO must not show fewer messages than
        were acknowledged. Until then requests wait for it at the API entry (up to 3 s), as between
        leaders."""
        if (
            await caught_up(self.ctx.host, self.replica.group, lambda: self._closed, READ_INDEX_TIMEOUT)
            and not self._closed
        ):
            self._take_api()

    def _take_api(self) -> None:
        self._api_sub = self.ctx.router.subscribe(stream_subscription(self.replica.name), self._on_api)
        # schedules too wait for the tail: a produced message the last leader proposed is in it
        if self.replica.machine.config.allow_msg_schedules:
            self.scheduler.start()

    def close(self) -> None:
        self._closed = True
        if self._api_opening is not None:
            self._api_opening.cancel()
        self._batches.clear()
        self.scheduler.stop()
        if self._batch_timer is not None:
            self._batch_timer.cancel()
            self._batch_timer = None
        self.replica.machine.report_republish = False
        if self._republish_catch_up is not None:
            self._republish_catch_up.cancel()
        self.expiry.close()
        if self.mirror is not None:
            self.mirror.stop()
            self.mirror = None
        for fetcher in self.sources:
            fetcher.stop()
        self.sources = []
        router = self.ctx.router
        for sub in self._subject_subs:
            router.unsubscribe(sub)
        self._subject_subs = []
        if self._api_sub is not None:
            router.unsubscribe(self._api_sub)
            self._api_sub = None

    def expiry_check(self) -> None:
        """After an apply: arm the expiry timer (cluster/stream/expiry.py) if anything can expire."""
        cfg = self.replica.config
        if cfg.max_age > 0 or cfg.allow_msg_ttl:
            self.expiry.poke()

    def _next_expiry_ns(self) -> int | None:
        cfg = self.replica.config
        if cfg.max_age <= 0 and not cfg.allow_msg_ttl:
            return None
        return self.replica.store.next_expiry_ns()

    def refresh_subjects(self) -> None:
        """Listen on exactly the stream's subjects (a mirror takes no publishes)."""
        cfg = self.replica.config
        subjects = () if cfg.mirror is not None else tuple(cfg.subjects)
        if subjects == self._subjects or self._closed:
            return
        router = self.ctx.router
        for sub in self._subject_subs:
            router.unsubscribe(sub)
        self._subject_subs = [router.subscribe(subject, self._on_publish) for subject in subjects]
        self._subjects = subjects

    def reconcile_config(self) -> None:
        """Replicate the meta group's config into the stream's log if the log has not caught up with it."""
        wanted = self.replica.assigned_config()
        if not same_config(wanted, self.replica.config):
            self.ctx.spawn(self._propose_config(wanted), f"update-config-{self.replica.name}")

    def reconcile_membership(self) -> None:
        """Make the group's voters the assignment's peers, one single-server change at a time."""
        if self._membership_task is None or self._membership_task.done():
            if self._voters_as_assigned():
                return  # the usual case (every new leader asks): no task to start
            self._membership_task = self.ctx.spawn(
                self._change_membership(), f"membership-{self.replica.name}"
            )

    def _voters_as_assigned(self) -> bool:
        try:
            voters = set(self.ctx.host.voters(self.replica.group))
        except RaftHostError:
            return False  # the task finds out (and stops)
        return next_change(self.ctx.name, voters, set(self.replica.assignment.peers)) is None

    async def _change_membership(self) -> None:
        replica = self.replica
        await converge_membership(
            self.ctx.host,
            replica.group,
            self.ctx.name,
            wanted=lambda: set(replica.assignment.peers),
            closed=lambda: self._closed,
        )

    async def _propose_config(self, wanted: Any) -> Any:
        result = await self.replica.propose(UpdateConfig(wanted).encode())
        self.refresh_subjects()
        return result

    # -- publishes ------------------------------------------------------------------------

    def _on_publish(self, msg: Message) -> None:
        started = time.perf_counter()
        if msg.headers and HDR_BATCH_ID_BYTES in msg.headers:
            self._on_batch_publish(msg, started)
            return
        self._publish_one(msg, started)

    def _publish_one(self, msg: Message, started: float) -> None:
        replica = self.replica
        cfg = replica.config
        if not cfg.sealed and self._over_node_limit():
            error = JSErrors.INSUFFICIENT_RESOURCES()  # the node's own limit first, as nats-server
            self._acknowledge(msg.reply, error_ack(cfg.name, error), started, "rejected")
            return
        if not cfg.sealed and self._over_account_bytes(msg):
            error = JSErrors.ACCOUNT_RESOURCES_EXCEEDED()
            self._acknowledge(msg.reply, error_ack(cfg.name, error), started, "rejected")
            return
        decision = prepare_publish(
            cfg, msg.subject, msg.headers or b"", msg.payload, time.time_ns(), replica.machine
        )
        if not isinstance(decision, Accepted):
            self._acknowledge(
                msg.reply, decision_ack(cfg.name, decision, self.ctx.domain), started, _outcome(decision)
            )
            return
        try:
            future = replica.propose(decision.entry.encode())
        except NotLeaderError:
            self._pass_to_next_leader(msg, started)
            return
        except RaftHostError as exc:
            self._acknowledge(msg.reply, _unavailable_ack(cfg.name, exc), started, "error")
            return
        future.add_done_callback(functools.partial(self._published, msg.reply, started, msg))

    def _over_node_limit(self) -> bool:
        """Whether this node already holds more than its own limit of the stream's storage type (nats-server's
        js.limitsExceeded: the publish that crosses the limit is stored, the next one refused with 10023)."""
        limits, in_memory = self.ctx.server_limits, self.replica.config.storage is StorageType.MEMORY
        if limits.byte_limit(in_memory) is None:
            return False  # no limit (a node's own are always set; a test's context may have none)
        # reads only the stores that changed since the last publish asked (NodeHoldings)
        return node_over_limit(limits, in_memory, self.ctx.holdings.held(in_memory))

    def _over_account_bytes(self, msg: Message) -> bool:
        ctx, replica = self.ctx, self.replica
        return exceeds_account_bytes(
            replica.config,
            ctx.account_limits,
            ctx.account_usage,
            lambda: replica.machine.store.state().bytes,
            msg.subject,
            msg.headers or b"",
            msg.payload,
        )

    def _pass_to_next_leader(self, msg: Message, started: float) -> None:
        """A publish this leader could not put in its log (it is handing leadership over, or has just
        lost it): the stream's next leader takes it and answers the client, instead of a 503. Only a
        proposal that never reached the log is passed on (NotLeaderError), so nothing is stored twice."""
        self.ctx.spawn(self._when_led_elsewhere(msg, started), f"publish-pass-on-{self.replica.name}")

    async def _when_led_elsewhere(self, msg: Message, started: float) -> None:
        host, group = self.ctx.host, self.replica.group
        loop = asyncio.get_running_loop()
        deadline = loop.time() + PASS_ON_WAIT
        # this leader's subscription to the stream's subjects goes when it closes: until then a message
        # passed on would come back here
        while not self._closed and loop.time() < deadline:
            try:
                await asyncio.wait_for(host.wait_leadership_change(group), deadline - loop.time())
            except (TimeoutError, RaftHostError):
                break  # no change in time, or the group is gone
            await asyncio.sleep(0)  # the replica closes this leader in the same turn as the change
        router = self.ctx.router
        if self._closed and await pass_on_when_served(
            router, msg.subject, msg.payload, msg.reply, msg.headers
        ):
            return
        self._acknowledge(msg.reply, _unavailable_ack(self.replica.name, None), started, "error")

    # -- atomic batches (cluster/stream/atomic_batch.py) ---------------------------------------

    def _on_batch_publish(self, msg: Message, started: float) -> None:
        cfg = self.replica.config
        header = msg.headers or b""
        try:
            headers = decode_headers(header)
        except HeaderError:
            self._acknowledge(msg.reply, error_ack(cfg.name, JSErrors.BAD_REQUEST()), started, "rejected")
            return
        batch_id = headers.get(HDR_BATCH_ID) or ""
        if not batch_id:
            # an empty batch id is no batch: a lone publish, as nats-server takes it
            self._publish_one(msg, started)
            return
        refusal = batch_refusal(cfg, header, msg.payload)
        if not cfg.sealed and self._over_account_bytes(msg):
            refusal = JSErrors.ACCOUNT_RESOURCES_EXCEEDED()  # checked first, as for one publish
        if not cfg.sealed and self._over_node_limit():
            refusal = JSErrors.INSUFFICIENT_RESOURCES()
        if refusal is not None:
            self._acknowledge(msg.reply, error_ack(cfg.name, refusal), started, "rejected")
            return
        now_ns = time.time_ns()
        outcome = self._batches.stage(
            cfg, batch_id, headers, BatchMsg(msg.subject, header, msg.payload), now_ns
        )
        self._arm_batch_timer()
        if isinstance(outcome, Staged):
            if msg.reply and not cfg.no_ack:
                self.ctx.reply(msg.reply, b"")
            return
        if isinstance(outcome, Refused):
            if outcome.abandoned is not None:
                self._advise_abandoned(batch_id, outcome.abandoned)
            self._acknowledge(msg.reply, error_ack(cfg.name, outcome.error), started, "rejected")
            return
        self._commit_batch(outcome, msg.reply, started, now_ns)

    def _commit_batch(self, commit: Commit, reply: str | None, started: float, now_ns: int) -> None:
        replica = self.replica
        cfg = replica.config
        checks = BatchChecks(cfg, replica.machine)
        entries = []
        for message in commit.messages:
            decision = prepare_publish(cfg, message.subject, message.header, message.payload, now_ns)
            if isinstance(decision, Accepted):
                verdict = checks.check(decision.entry)
                if verdict is None:
                    entries.append(decision.entry)
                    continue
                decision = verdict
            assert isinstance(decision, Rejected)  # without a view, prepare_publish finds no duplicate
            self._acknowledge(reply, error_ack(cfg.name, decision.error), started, "rejected")
            return
        try:
            future = replica.propose(StoreBatch(commit.batch_id, tuple(entries)).encode())
        except RaftHostError as exc:
            self._acknowledge(reply, _unavailable_ack(cfg.name, exc), started, "error")
            return
        future.add_done_callback(functools.partial(self._published, reply, started, None))

    def _arm_batch_timer(self) -> None:
        """One timer for the stream's earliest batch deadline: a batch left without messages is dropped."""
        if self._batch_timer is not None:
            self._batch_timer.cancel()
            self._batch_timer = None
        deadline = self._batches.next_deadline_ns()
        if deadline is None or self._closed:
            return
        delay = max(0.0, (deadline - time.time_ns()) / 1e9)
        self._batch_timer = asyncio.get_running_loop().call_later(delay, self._expire_batches)

    def _expire_batches(self) -> None:
        self._batch_timer = None
        for batch_id in self._batches.expire(time.time_ns()):
            self._advise_abandoned(batch_id, AbandonReason.TIMEOUT)
        self._arm_batch_timer()

    def _advise_abandoned(self, batch_id: str, reason: AbandonReason) -> None:
        name = self.replica.name
        body = batch_abandoned(name, batch_id, reason, new_event_id(), time.time_ns(), self.ctx.domain)
        self.ctx.router.publish(batch_abandoned_subject(name), body)

    # -- RePublish (cluster/stream/republish.py) ----------------------------------------------

    def _start_republishing(self) -> None:
        machine = self.replica.machine
        machine.report_republish = True
        config = self.replica.config.republish
        if republish_transform(config) is None:
            return
        assert config is not None
        self._republisher = Republisher(
            self.replica.name, config, machine.republished_through, machine.last_seq
        )
        if self._republisher.catching_up:
            self._republish_catch_up = self.ctx.spawn(
                self._catch_up_republishing(self._republisher), f"republish-catch-up-{self.replica.name}"
            )

    async def _catch_up_republishing(self, republisher: Republisher) -> None:
        """Republish what earlier leaders applied but had not recorded as republished, from the store."""
        store = self.replica.store
        while republisher.catching_up and not self._closed:
            try:
                messages = store.load_batch(">", republisher.position + 1, 256).messages
            except MsgNotFoundError:
                messages = []
            self._send_republished(
                republisher.caught_up(messages, lambda subject, seq: last_subject_seq(store, subject, seq))
            )
            self._record_republished()
            await asyncio.sleep(0)  # let publishes and other streams in between batches

    def applied(self, results: list[EntryResult]) -> None:
        """What the replica just applied, before the proposals' futures resolve: republish the stored
        messages RePublish takes (nats-server republishes before it acknowledges too)."""
        if self.replica.machine.config.allow_msg_schedules:
            self._schedules_applied(results)
        republisher = self._republisher
        for result in results:
            if type(result) is Expired and result.markers:
                stored = self._markers_for_republish(result)
            elif type(result) is Stored and result.republish is not None:
                stored = [(result.seq, result.ts_ns, result.republish)]
            elif type(result) is BatchStored:
                stored = [
                    (one.seq, one.ts_ns, one.republish) for one in result.stored if one.republish is not None
                ]
            else:
                if type(result) is ConfigApplied and not result.config.allow_atomic:
                    self._batches.clear()
                continue
            config = self.replica.machine.config.republish
            if config is None:
                continue
            for seq, ts_ns, republish in stored:
                if republisher is None:
                    # RePublish was just turned on: it owes nothing stored before this message
                    republisher = self._republisher = Republisher(self.replica.name, config, seq - 1, seq - 1)
                republisher.config = config
                self._send_republished(republisher.applied(seq, ts_ns, republish))
        if republisher is not None:
            self._record_republished()

    def _schedules_applied(self, results: list[EntryResult]) -> None:
        if self._api_sub is not None:
            self.scheduler.start()  # a no-op once running; schedules may just have been allowed
        seqs: list[int] = []
        for result in results:
            if type(result) is Stored:
                seqs.append(result.seq)
            elif type(result) is BatchStored:
                seqs.extend(one.seq for one in result.stored)
        if seqs:
            self.scheduler.stored(seqs)

    def _markers_for_republish(self, expired: Expired) -> list[tuple[int, int, StoredForRepublish]]:
        """Delete markers are stored messages: republished like any other (nats-server does), with
        the message each replaced as the subject's previous sequence."""
        transform = republish_transform(self.replica.machine.config.republish)
        if transform is None:
            return []
        out = []
        for seq, replaced in expired.markers:
            try:
                marker = self.replica.store.load_msg(seq)
            except MsgNotFoundError:
                continue
            dest = republish_subject(transform, marker.subject)
            if dest is not None:
                stored = StoredForRepublish(
                    dest, marker.subject, marker.headers or b"", marker.payload, replaced
                )
                out.append((seq, marker.ts_ns, stored))
        return out

    def _send_republished(self, messages: list[Outgoing]) -> None:
        publish = self.ctx.router.publish
        for out in messages:
            publish(out.subject, out.payload, None, out.headers)

    def _record_republished(self) -> None:
        """Replicate the position (one `Republished` entry in flight at a time): a new leader
        republishes only what comes after it."""
        republisher = self._republisher
        if republisher is None or self._closed:
            return
        seq = republisher.marker_to_propose()
        if seq is None:
            return
        try:
            future = self.replica.propose(Republished(seq).encode())
        except RaftHostError:
            republisher.marker_settled(False)
            return

        def settled(done: asyncio.Future[Any]) -> None:
            recorded = not done.cancelled() and done.exception() is None
            republisher.marker_settled(recorded)
            if recorded:
                self._record_republished()

        future.add_done_callback(settled)

    def _published(
        self, reply: str | None, started: float, msg: Message | None, future: asyncio.Future[Any]
    ) -> None:
        """`msg`: the publish itself, passed on to the next leader if it never reached the log."""
        name = self.replica.name
        if future.cancelled():
            self._acknowledge(reply, _unavailable_ack(name, None), started, "error")
            return
        exc = future.exception()
        if isinstance(exc, NotLeaderError) and msg is not None:
            self._pass_to_next_leader(msg, started)
            return
        if exc is not None:
            self._acknowledge(reply, _unavailable_ack(name, exc), started, "error")
            return
        result = future.result()
        if isinstance(result, Stored):
            self._acknowledge(reply, pub_ack(name, result.seq, self.ctx.domain), started, "ok")
        elif isinstance(result, BatchStored):
            last = result.stored[-1].seq
            body = batch_ack(name, last, result.batch_id, len(result.stored), self.ctx.domain)
            self._acknowledge(reply, body, started, "ok")
        elif isinstance(result, Duplicate | Rejected):
            self._acknowledge(reply, decision_ack(name, result, self.ctx.domain), started, _outcome(result))
        else:
            self._acknowledge(reply, _unavailable_ack(name, None), started, "error")

    def _acknowledge(self, reply: str | None, body: bytes, started: float, outcome: str) -> None:
        self._publish_tally.count(outcome)
        if reply and not self.replica.config.no_ack:
            self.ctx.reply(reply, body)
            self._publish_tally.observe(time.perf_counter() - started)

    # -- the per-stream API ---------------------------------------------------------------

    def _on_api(self, msg: Message) -> None:
        request = parse_stream_subject(msg.subject)
        # a workqueue's consumer leader asks for deletes without waiting for an answer
        if request is None or (not msg.reply and request.op is not ApiOp.STREAM_MSG_DELETE):
            return
        if request.op is ApiOp.STREAM_MSG_GET:
            self._msg_get(msg)  # the hottest API call: answered from a callback, no task of its own
            return
        self.ctx.spawn(self._answer_api(request.op, msg), f"api-{request.op}-{self.replica.name}")

    async def _answer_api(self, op: ApiOp, msg: Message) -> None:
        if op is ApiOp.STREAM_SNAPSHOT:
            await serve_snapshot(self.ctx, msg, self._at_snapshot())
            return
        reply = msg.reply
        try:
            # asked by way of the meta leader: answer with what it had applied (a config it just
            # updated, the consumers it just made), once this node's replica has been given it
            index = meta_index_of(msg.headers)
            if index:
                await self.ctx.meta_progress.reached(index)
            body = await self._handle(op, msg.payload)
        except ApiError as error:
            body = _error_body(op, error)
        except RaftHostError as exc:
            body = _error_body(op, JSErrors.CLUSTER_NOT_AVAILABLE())
            log.info("stream_api_unavailable", stream=self.replica.name, op=op.value, error=str(exc))
        except TimeoutError:
            body = _error_body(op, JSErrors.CLUSTER_NOT_AVAILABLE())
        if reply:
            send_api_response(self.ctx, msg, body)

    async def _handle(self, op: ApiOp, payload: bytes) -> bytes:
        replica, version = self.replica, self.ctx.server_version
        if op is ApiOp.STREAM_INFO:
            request = parse_info_request(payload)
            subjects: dict[str, int] | None = None
            total = 0
            if request.subjects_filter:
                try:
                    totals = replica.store.subjects_totals(request.subjects_filter)
                except InvalidSubjectError:
                    totals = {}  # a filter that is no valid filter selects nothing, as in nats-server
                subjects, total = subjects_page(totals, request.offset)
            info = self.stream_info(subjects, request.deleted_details)
            return stream_info_response(info, version, total, request.offset)
        if op is ApiOp.CREATE_RESULT:
            return self.create_response(did_create=payload == b"1")
        if op is ApiOp.LIST_ENTRY:
            return orjson.dumps(self.stream_info(with_cluster=not self.ctx.standalone).to_json(None))
        if op is ApiOp.APPLY_UPDATE:
            # the meta leader sends the config it committed (this node's meta replica may lag behind it)
            wanted = (
                stream_config_from_bytes(payload)
                if payload
                else replica.assigned_config()
            )
            if not same_config(wanted, replica.config):
                result = await self._propose_config(wanted)
                if isinstance(result, Rejected):
                    raise result.error
                if not isinstance(result, ConfigApplied):
                    raise JSErrors.STREAM_UPDATE(err="config change did not apply")
            return stream_update_response(self.stream_info(with_cluster=not self.ctx.standalone), version)
        if op is ApiOp.STREAM_PURGE:
            purge = parse_purge_request(payload, replica.config)
            result = await replica.propose(purge.encode())
            if isinstance(result, Rejected):
                raise result.error
            assert isinstance(result, Purged)
            return stream_purge_response(result.count)
        if op is ApiOp.STREAM_MSG_DELETE:
            delete = parse_msg_delete_request(payload, replica.config)
            result = await replica.propose(delete.encode())
            if isinstance(result, Rejected):
                raise result.error
            assert isinstance(result, Deleted)
            return msg_delete_response()
        if op is ApiOp.STREAM_LEADER_STEPDOWN:
            return await self._step_down(payload)
        if op is ApiOp.FETCH:
            return await self._fetch(payload)
        if op is ApiOp.RESTORE_MSGS:
            return await self._restore_msgs(payload)
        raise JSErrors.BAD_REQUEST()

    async def _restore_msgs(self, payload: bytes) -> bytes:
        """Store a restore's messages at their archived sequences (and skip the sequences after the last
        one), in order; the meta leader restoring the stream sends them, a batch at a time."""
        proposals = []
        try:
            entries = list(split_restore_batch(payload))
        except ValueError as exc:
            raise JSErrors.STREAM_RESTORE(err=str(exc)) from None
        for data in entries:
            # by its op alone: every replica decodes it as it applies it, and refuses what it cannot read
            if data[:1] not in _RESTORE_OPS:
                raise JSErrors.STREAM_RESTORE(err="a restore batch holds no message")
            proposals.append(self.replica.propose(data))
        for result in await asyncio.gather(*proposals):
            if isinstance(result, Rejected):
                raise JSErrors.STREAM_RESTORE(err=result.error.description)
            if isinstance(result, Duplicate):
                raise JSErrors.STREAM_RESTORE(err=f"sequence {result.seq} was stored already")
        return b"{}"

    @property
    def serves_api(self) -> bool:
        """Whether this leader has taken the stream's API (at once for a new stream's first leader)."""
        return self._api_sub is not None and not self._closed

    def create_response(self, did_create: bool) -> bytes:
        """The answer to the STREAM.CREATE that made (or found) this stream."""
        # as a nats-server without a cluster: no `cluster` in the create and update replies
        info = self.stream_info(with_cluster=not self.ctx.standalone)
        return stream_create_response(info, self.ctx.server_version, did_create=did_create)

    def _msg_get(self, msg: Message) -> None:
        """Answer once a ReadIndex confirms this node still leads and has applied all committed before."""
        try:
            read = self.ctx.host.read_index_nowait(self.replica.group, timeout=READ_INDEX_TIMEOUT)
        except RaftHostError:
            self._answer_msg_get(msg, None)
            return
        if read.done():  # the leader's lease answered at once (raft/core.py RaftConfig.read_lease)
            self._answer_msg_get(msg, read)
        else:
            read.add_done_callback(functools.partial(self._answer_msg_get, msg))

    def _answer_msg_get(self, msg: Message, read: asyncio.Future[int] | None) -> None:
        # the read's outcome is taken first, even when this leader closed meanwhile: a failed read
        # (NotLeaderError as leadership moves) left unretrieved is logged as an error by asyncio
        failed = read is None or read.cancelled() or read.exception() is not None
        if self._closed or failed:
            body, status = msg_get_error(JSErrors.CLUSTER_NOT_AVAILABLE()), "503"
        else:
            body = answer_msg_get(msg.payload, self.replica.store)
            # a message's fields are base64 or numbers: only an error reply has this key
            status = "ok" if b'"error":' not in body else _error_code(body)
        self._msg_gets(status).inc()
        # a message found is answered without an audit, as nats-server's stream leader answers it
        send_api_response(self.ctx, msg, body, audit=status != "ok")

    async def _fetch(self, payload: bytes) -> bytes:
        """A batch of committed messages for a mirror, held up to `wait_ms` when there is none yet."""
        request = parse_fetch_request(payload)
        replica = self.replica
        if request.start_time_ns is not None:
            start = replica.store.get_seq_from_time(max(request.start_time_ns, 0))
            request = dataclasses.replace(request, seq=max(request.seq, start), start_time_ns=None)
        if replica.machine.last_seq < request.seq and request.wait_ms:
            await replica.wait_for_seq(request.seq, request.wait_ms / 1000)
        state = replica.store.state()
        fresh_as_of_ns = time.time_ns() - replica.leader_staleness_ns()
        found: dict[int, FetchedMsg] = {}
        # with several filters, a batch is whole only up to where the first of them was cut short:
        # past that point another filter's messages may be missing
        whole_through = state.last_seq
        for filter_ in request.all_filters:
            try:
                batch = replica.store.load_batch(filter_, request.seq, request.batch, request.max_bytes)
            except (MsgNotFoundError, InvalidSubjectError):
                continue
            for m in batch.messages:
                found[m.seq] = FetchedMsg(m.seq, m.ts_ns, m.subject, m.headers or b"", m.payload)
            if batch.num_pending and batch.messages:
                whole_through = min(whole_through, batch.messages[-1].seq)
        seqs = [seq for seq in sorted(found) if seq <= whole_through][: request.batch]
        messages = [found[seq] for seq in seqs]
        return encode_batch(state.first_seq, state.last_seq, messages, fresh_as_of_ns)

    async def _step_down(self, payload: bytes) -> bytes:
        host, group = self.ctx.host, self.replica.group
        voters = host.status(group).voters
        others = [peer for peer in voters if peer != self.ctx.name]
        allowed = stepdown_candidates(payload, self.ctx.name, voters, self.ctx.router.peer_labels, CLUSTER_NAME)
        if allowed is not None:
            others = [peer for peer in others if peer in allowed]
        if not others:
            raise JSErrors.STREAM_GENERAL(err="no replica to hand leadership to")
        progress = replica_progress(self.replica)
        target = max(others, key=lambda peer: progress.get(peer, (0, False))[0])
        await host.transfer_leadership(group, target)
        return leader_stepdown_response()

    def _at_snapshot(self) -> StreamAtSnapshot:
        replica = self.replica
        info = self.stream_info(with_cluster=False)
        state = info.state
        return StreamAtSnapshot(
            name=replica.name,
            store=replica.store,
            in_memory=replica.config.storage is StorageType.MEMORY,
            config=replica.config.to_json(),  # as stored: nats-server's snapshot shows no _nats.ver
            state=info.to_json(None)["state"],  # STREAM.INFO's, consumer_count included
            first_seq=state.first_seq,
            last_seq=state.last_seq,
        )

    # -- info -------------------------------------------------------------------------------

    def stream_info(
        self, subjects: dict[str, int] | None = None, deleted_details: bool = False, with_cluster: bool = True
    ) -> StreamInfo:
        replica = self.replica
        now = time.time_ns()
        mirror = None
        if replica.config.mirror is not None:
            fetcher = self.mirror
            lag, active = (fetcher.lag, fetcher.active_ns(now)) if fetcher is not None else (0, -1)
            mirror = SourceInfo.for_source(replica.config.mirror, lag, active)
        return StreamInfo(
            config=replica.config,
            created_ns=replica.assignment.created_ns,
            state=replica.machine.stream_state(include_deleted=deleted_details),
            now_ns=now,
            consumer_count=replica.expected_consumers,
            subjects=subjects,
            cluster=self.cluster_info() if with_cluster else None,
            mirror=mirror,
            sources=tuple(
                SourceInfo.for_source(f.source, f.lag, f.active_ns(now), f.position()) for f in self.sources
            ),
        )

    def cluster_info(self) -> ClusterInfo:
        if self.ctx.standalone:
            return ClusterInfo(leader=self.ctx.name)  # nats-server's, for a stream in no Raft group
        return leader_cluster_info(
            self.ctx.host, self.ctx.name, self.replica.group, self._since_ns, SYSTEM_ACCOUNT
        )


_RESTORE_OPS = (bytes([EntryOp.STORE_AT_SEQS]), bytes([EntryOp.SKIP_MSGS]))


def replica_progress(replica: LedReplica) -> dict[str, tuple[int, bool]]:
    """peer -> (match index, recently active) as the leader's Raft core tracks it."""
    try:
        return replica.ctx.host.peer_progress(replica.group)
    except RaftHostError:
        return {}


def elected_members(info: ClusterInfo, me: str) -> list[dict[str, Any]]:
    """A LEADER_ELECTED advisory's `replicas`: every member as STREAM.INFO shows one, the new leader too."""
    return [
        *(peer.to_json() for peer in info.replicas),
        PeerInfo(name=me, current=True, active_ns=0).to_json(),
    ]


def leader_cluster_info(
    host: RaftHost, me: str, group: str, since_ns: int, traffic_account: str = ""
) -> ClusterInfo:
    """A group as STREAM.INFO and CONSUMER.INFO show it from its leader: each other voter with its lag."""
    status = host.status(group)
    progress = host.peer_progress(group)  # the group exists: status() above would have raised
    silence = host.peer_silence_ns(group)
    replicas = []
    for peer in status.voters:
        if peer == me:
            continue
        match, active = progress.get(peer, (0, False))
        lag = max(status.last_index - match, 0)
        # `active` is how long ago the peer was last heard from (0: never, shown as "not seen")
        replicas.append(
            PeerInfo(name=peer, current=active and lag == 0, active_ns=silence.get(peer, 0), lag=lag)
        )
    return ClusterInfo(
        leader=me,
        name=CLUSTER_NAME,
        raft_group=group,
        leader_since_ns=since_ns,
        traffic_account=traffic_account,
        replicas=tuple(replicas),
    )


def _outcome(decision: Duplicate | Rejected) -> str:
    return "duplicate" if isinstance(decision, Duplicate) else "error"


def _unavailable_ack(stream: str, exc: BaseException | None) -> bytes:
    if exc is not None:
        log.info("publish_not_committed", stream=stream, error=str(exc))
    return error_ack(stream, JSErrors.CLUSTER_NOT_AVAILABLE())


def _error_body(op: ApiOp, error: ApiError) -> bytes:
    if op is ApiOp.STREAM_INFO or op is ApiOp.CREATE_RESULT:
        return stream_info_error(error)
    if op is ApiOp.STREAM_PURGE:
        return stream_purge_error(error)
    if op is ApiOp.STREAM_MSG_GET:
        return msg_get_error(error)
    if op is ApiOp.STREAM_MSG_DELETE:
        return plain_error(MSG_DELETE_TYPE, error)
    if op is ApiOp.STREAM_LEADER_STEPDOWN:
        return plain_error(LEADER_STEPDOWN_TYPE, error)
    return plain_error(STREAM_UPDATE_TYPE, error)


def _error_code(body: bytes) -> str:
    try:
        return str(jsjson.loads_object(body)["error"]["code"])
    except (KeyError, TypeError, ValueError, jsjson.RequestJSONError):
        return "error"
