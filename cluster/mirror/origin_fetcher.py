"""A stream's leader copying from another stream: mirrors copy their origin, streams with sources theirs.

Runs only on the node leading the copying stream's Raft group. It asks the
origin's leader for committed messages after its position (long-polling when
caught up) and proposes them into its own group:

- a mirror stores each at the origin's own sequence and time (`StoreAtSeq`);
  its position is its last sequence;
- a stream with sources stores each as a new message of its own
  (`StoreMsg`), tagged with a `Nats-Stream-Source` header naming the origin
  and the origin sequence; applying that header advances the source's
  position in the replicated state.

A copy takes what its `filter_subject` or `subject_transforms` sources
match (the origin's leader filters), maps the subject with the first of its
transforms that takes it, then with the copying stream's own
`subject_transform`, as nats-server does.

Either way the position is replicated, so a new leader continues where the
old one stopped, and a batch fetched twice is harmless: a mirror's entries
at or below its last sequence apply as duplicates, and a source's fetcher
only proposes a batch after the previous one applied.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import structlog

from cluster.api.errors import JSErrors
from cluster.api.subjects import ApiOp, stream_subject
from cluster.direct_get.staleness import StalenessTracker
from cluster.runtime.internal_requests import NoRespondersError
from cluster.runtime.server_limits import node_over_limit
from cluster.stream.config import StorageType, StreamSource
from cluster.stream.entries import Rollup, StoreAtSeq, StoreMsg
from cluster.stream.fetch import FetchedMsg, FetchRequest, decode_batch
from cluster.stream.leader import LedReplica
from cluster.stream.machine import HDR_STREAM_SOURCE, source_header
from cluster.stream.publish import exceeds_account_bytes, stored_subject
from gateway.headers import extend_header_block
from raft.driver import RaftHostError
from storage.model import msg_size
from subjects.transform import SubjectTransform, TransformError, new_transform

log = structlog.get_logger(__name__)

# An idle origin answers a long poll when it ends: that answer is how a caught-up copy learns it is
# still current, so the poll is short enough for its staleness to read near zero when idle (and half
# the copy's staleness bound, where one is set, so that idling never takes it out of Direct Gets).
LONG_POLL_MS = 250
RETRY_DELAYS = (0.05, 2.0)


class OriginFetcher:
    """Copies one origin (`source`) into `replica`'s stream; `mirror` selects the mirror form."""

    def __init__(
        self,
        replica: LedReplica,
        source: StreamSource,
        *,
        mirror: bool,
    ) -> None:
        self.replica = replica
        self.source = source
        self.mirror = mirror
        self._key = source.index_name()
        self._transforms = _compiled_transforms(source)
        # what the origin's leader filters by: the transforms' sources, else the filter subject
        self._filters = tuple(t.src or ">" for t in source.subject_transforms)
        self.origin_last_seq = 0
        self.last_active_ns: int | None = None
        # how far behind the origin this copy is, from the freshness each answer carries; the origin
        # sequence this copy holds everything up to (of what its filter takes)
        self.staleness = StalenessTracker(time.time_ns())
        self.caught_up_seq = 0
        # with opt_start_time (and no opt_start_seq), where the origin said the copy starts once it
        # had nothing to send yet: later messages are copied whatever their time, as nats-server's
        # source consumer resolves its start time once
        self._start_from = 0
        self.error: str | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = self.replica.ctx.spawn(self._run(), f"copy-{self.replica.name}-from-{self.source.name}")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def position(self) -> int:
        if self.mirror:
            return self.replica.machine.last_seq
        return self.replica.machine.source_position(self._key)

    @property
    def lag(self) -> int:
        """Origin messages not copied yet: none past what a complete answer covered (a filter may leave
        the origin's last sequence out of the copy for good)."""
        return max(self.origin_last_seq - max(self.position(), self.caught_up_seq), 0)

    def staleness_ns(self, now_ns: int) -> int:
        return self.staleness.staleness_ns(self.caught_up_seq, now_ns)

    def active_ns(self, now_ns: int) -> int:
        return -1 if self.last_active_ns is None else max(now_ns - self.last_active_ns, 0)

    async def _run(self) -> None:
        replica, source = self.replica, self.source
        requester = replica.ctx.requester
        subject = stream_subject(source.name, ApiOp.FETCH)
        low, high = RETRY_DELAYS
        delay = low
        while not replica.stopped:
            position = self.position()
            next_seq = max(position + 1, source.opt_start_seq or 1, self._start_from)
            bound_ms = replica.config.max_direct_lag
            wait_ms = LONG_POLL_MS if bound_ms is None else max(min(LONG_POLL_MS, bound_ms // 2), 10)
            start_time = self._start_time(position)
            request = FetchRequest(
                next_seq,
                wait_ms=wait_ms,
                filter=source.filter_subject,
                filters=self._filters,
                start_time_ns=start_time,
            )
            try:
                reply = await requester.request(subject, request.encode(), timeout=LONG_POLL_MS / 1000 + 2)
                batch = decode_batch(reply.payload)
            except (NoRespondersError, TimeoutError, ValueError) as exc:
                self._failed(f"origin {source.name} unavailable: {exc!r}")
                await asyncio.sleep(delay)
                delay = min(delay * 2, high)
                continue
            delay = low
            self.error = None
            self.origin_last_seq = batch.last_seq
            self.last_active_ns = time.time_ns()
            self.staleness.observe(batch.last_seq, batch.fresh_as_of_ns)
            # a batch short of its limit holds everything the filter takes up to the origin's last
            complete = len(batch.messages) < request.batch
            if not batch.messages:
                self.caught_up_seq = batch.last_seq
                if start_time is not None:
                    self._start_from = batch.last_seq + 1
                continue
            messages = self._within_node_limit(batch.messages)
            if not messages:
                # nats-server logs this and tries again later; the mirror or source shows no error
                log.info("origin_fetch_waits", stream=replica.name, reason="node over its JetStream limit")
                await asyncio.sleep(delay)
                delay = min(delay * 2, high)
                continue
            if not self.mirror:
                messages = self._within_account_bytes(messages)
            if not messages:
                self._failed(JSErrors.ACCOUNT_RESOURCES_EXCEEDED().description)
                await asyncio.sleep(delay)
                delay = min(delay * 2, high)
                continue
            if len(messages) < len(batch.messages):
                complete = False
            try:
                proposed = []
                for msg in messages:
                    proposed.append(replica.propose(self._entry(msg)))
                # every outcome retrieved: when leadership moves, all of a batch's proposals fail alike
                for outcome in await asyncio.gather(*proposed, return_exceptions=True):
                    if isinstance(outcome, BaseException):
                        raise outcome
                self.caught_up_seq = batch.last_seq if complete else messages[-1].seq
            except RaftHostError as exc:
                # leadership moved: the new leader's fetcher takes over from the replicated position
                log.info("origin_fetch_stopped", stream=replica.name, error=str(exc))
                return
            if self.mirror:
                replica.ctx.metrics.replica_lag_messages.labels(replica.metric_label, replica.ctx.name, "mirror").set(
                    self.lag
                )

    def _within_node_limit(self, messages: Sequence[FetchedMsg]) -> Sequence[FetchedMsg]:
        """The first of `messages` this node takes while it holds no more than its own limit of the stream's
        storage (`jetstream { max_memory_store, max_file_store }`): as nats-server, a copy, of a mirror or a
        source, is refused once the node is over it, so the one that crosses it is the last made."""
        replica = self.replica
        ctx, in_memory = replica.ctx, replica.config.storage is StorageType.MEMORY
        if ctx.server_limits.byte_limit(in_memory) is None:
            return messages
        held = ctx.holdings.held(in_memory)
        for index, msg in enumerate(messages):
            if node_over_limit(ctx.server_limits, in_memory, held):
                return messages[:index]
            header = bytes(msg.header) if self.mirror else self._source_header(msg)
            held += msg_size(len(self._subject(msg)), len(header) if header else None, len(msg.payload))
        return messages

    def _within_account_bytes(self, messages: Sequence[FetchedMsg]) -> Sequence[FetchedMsg]:
        """The first of `messages` that fit in the account's max_memory / max_storage, one after another, as
        a clustered nats-server checks what a source brings in (a mirror's copies it does not check); the
        rest are fetched again once there is room."""
        replica = self.replica
        ctx, cfg = replica.ctx, replica.config
        taken = 0  # the bytes of the batch's messages before this one

        def held() -> int:
            return replica.machine.store.state().bytes + taken

        for index, msg in enumerate(messages):
            subject, header = self._subject(msg), self._source_header(msg)
            if exceeds_account_bytes(
                cfg, ctx.account_limits, ctx.account_usage, held, subject, header, bytes(msg.payload)
            ):
                return messages[:index]
            taken += msg_size(len(subject), len(header), len(msg.payload))
        return messages

    def _start_time(self, position: int) -> int | None:
        """opt_start_time, while it still decides where the copy starts (nothing copied yet)."""
        source = self.source
        if source.opt_start_time_ns is None or source.opt_start_seq or position or self._start_from:
            return None
        return source.opt_start_time_ns

    def _subject(self, msg: FetchedMsg) -> str:
        """The copy's subject: the first of the copy's transforms that takes it, then the stream's own
        `subject_transform` (as nats-server's copies; a stream's leader republishes copies too)."""
        subject = msg.subject
        for transform in self._transforms:
            mapped = transform.apply(subject)
            if mapped is not None:
                subject = mapped
                break
        return stored_subject(self.replica.config, subject)

    def _source_header(self, msg: FetchedMsg) -> bytes:
        """A source's copy's headers: the origin's, tagged with the origin and its sequence."""
        tag = f"{HDR_STREAM_SOURCE}: {source_header(self._key, msg.seq, msg.subject)}\r\n"
        return extend_header_block(_without_copy_headers(bytes(msg.header)), tag.encode())

    def _entry(self, msg: FetchedMsg) -> bytes:
        """The entry that stores a copy."""
        subject = self._subject(msg)
        if self.mirror:
            return StoreAtSeq(msg.seq, subject, bytes(msg.header), bytes(msg.payload), msg.ts_ns).encode()
        return StoreMsg(
            subject=subject,
            header=self._source_header(msg),
            payload=bytes(msg.payload),
            timestamp_ns=time.time_ns(),
            msg_id="",
            expected_stream=None,
            expected_last_seq=None,
            expected_last_subject_seq=None,
            expected_last_subject_seq_subject=None,
            expected_last_msg_id=None,
            rollup=Rollup.NONE,
        ).encode()

    def _failed(self, error: str) -> None:
        if self.error != error:
            log.info("origin_fetch_failed", stream=self.replica.name, error=error)
        self.error = error


def _compiled_transforms(source: StreamSource) -> list[SubjectTransform]:
    """The source's transforms that map (an empty destination only filters), in order."""
    compiled = []
    for config in source.subject_transforms:
        try:
            transform = new_transform(config.src, config.dest)
        except TransformError:  # refused by the config check: only an old config can hold one
            continue
        if transform is not None:
            compiled.append(transform)
    return compiled


# A copy does not keep these from its origin (nats-server drops them too): a daisy-chained source's
# tag gives way to this stream's, expectations were the origin's to check, batches do not carry over.
_DROPPED_EXACT = (HDR_STREAM_SOURCE.lower().encode(),)
_DROPPED_PREFIXES = (b"nats-expected-", b"nats-batch-")


def _without_copy_headers(block: bytes) -> bytes:
    if not block:
        return block
    lines = block.split(b"\r\n")
    kept = [lines[0]]
    for line in lines[1:]:
        name = line.split(b":", 1)[0].strip().lower()
        if line and (name in _DROPPED_EXACT or name.startswith(_DROPPED_PREFIXES)):
            continue
        kept.append(line)
    return b"\r\n".join(kept)
