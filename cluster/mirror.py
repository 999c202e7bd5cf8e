"""A mirror's leader copying its origin: fetch committed batches, replicate them at the origin's sequences.

Runs only on the node leading the mirror stream's Raft group. It asks the
origin's leader for messages after the mirror's last sequence (long-polling
when caught up) and proposes each as a `StoreAtSeq` entry, so every replica
of the mirror stores the same copy at the origin's sequences and times. The
mirror's position is its own last sequence, part of its replicated state,
so a new mirror leader continues where the old one stopped; a batch fetched
twice is harmless (entries at or below the last sequence apply as
duplicates).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import structlog

from cluster.api_subjects import ApiOp, stream_subject
from cluster.internal_requests import NoRespondersError
from cluster.stream_entries import StoreAtSeq
from cluster.stream_fetch import FetchRequest, decode_batch
from raft.driver import RaftHostError

if TYPE_CHECKING:
    from cluster.stream_replica import StreamReplica

log = structlog.get_logger(__name__)

LONG_POLL_MS = 1_000
RETRY_DELAYS = (0.05, 2.0)


class MirrorFetcher:
    def __init__(self, replica: StreamReplica) -> None:
        self.replica = replica
        self.origin_last_seq = 0
        self.last_active_ns: int | None = None
        self.error: str | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = self.replica.ctx.spawn(self._run(), f"mirror-{self.replica.name}")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    @property
    def lag(self) -> int:
        return max(self.origin_last_seq - self.replica.machine.last_seq, 0)

    def active_ns(self, now_ns: int) -> int:
        return -1 if self.last_active_ns is None else max(now_ns - self.last_active_ns, 0)

    async def _run(self) -> None:
        replica = self.replica
        source = replica.config.mirror
        assert source is not None
        requester = replica.ctx.requester
        subject = stream_subject(source.name, ApiOp.FETCH)
        low, high = RETRY_DELAYS
        delay = low
        while not replica.stopped:
            next_seq = max(replica.machine.last_seq + 1, source.opt_start_seq or 1)
            request = FetchRequest(next_seq, wait_ms=LONG_POLL_MS, filter=source.filter_subject)
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
            if not batch.messages:
                continue
            entries = [
                StoreAtSeq(m.seq, m.subject, bytes(m.header), bytes(m.payload), m.ts_ns).encode()
                for m in batch.messages
            ]
            try:
                await asyncio.gather(*(replica.propose(entry) for entry in entries))
            except RaftHostError as exc:
                # leadership moved: the new leader's fetcher takes over from the replicated position
                log.info("mirror_fetch_stopped", stream=replica.name, error=str(exc))
                return
            replica.ctx.metrics.replica_lag_messages.labels(replica.name, replica.ctx.name, "mirror").set(
                self.lag
            )

    def _failed(self, error: str) -> None:
        if self.error != error:
            log.info("mirror_fetch_failed", stream=self.replica.name, error=error)
        self.error = error
