"""A replica's (or mirror's) membership of a stream's Direct Get queue group `_sys_`.

It answers from the local store, as it is now: possibly stale, which is the
point. A request with `min_last_seq` ahead of what this replica has applied
waits (bounded) for the replica to catch up, then answers, or answers 412.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections.abc import Callable, Iterator

import structlog

from cluster.direct_get.answer import (
    ReplyFrame,
    Responder,
    ResponderRole,
    bad_request_frames,
    direct_get_frames,
    is_behind,
    min_last_seq_frames,
    single_frame,
)
from cluster.direct_get.request import (
    DIRECT_GET_PREFIX,
    BadDirectGet,
    DirectGetRequest,
    parse_direct_get,
    split_direct_subject,
)
from cluster.runtime.context import NodeContext
from cluster.runtime.metrics import LabelledChildren
from gateway.router import Message, Subscription
from storage.errors import StoreError
from storage.interface import StreamStore

log = structlog.get_logger(__name__)

DIRECT_GET_QUEUE = "_sys_"
# How long a read-your-writes request may wait for this replica to catch up.
MIN_LAST_SEQ_WAIT = 0.5
# A batch's messages sent per loop turn (see `_send_rest`).
FRAMES_PER_SLICE = 64
# the metric's role label; an enum's `.value` is a Python-level property, asked on every request
_ROLE_LABELS = {role: role.value for role in ResponderRole}


class DirectGetResponder:
    """Subscribes for `answers_for` (the stream whose Direct Gets these are) while joined."""

    def __init__(
        self,
        ctx: NodeContext,
        answers_for: str,
        store: Callable[[], StreamStore],
        last_seq: Callable[[], int],
        wait_for_seq: Callable[[int, float], asyncio.Future[bool]],
        role: Callable[[], ResponderRole],
        reply_stream: str,
    ) -> None:
        self._ctx = ctx
        self._answers_for = answers_for
        self._store = store
        self._last_seq = last_seq
        self._wait_for_seq = wait_for_seq
        self._role = role
        self._reply_stream = reply_stream
        self._subs: list[Subscription] = []
        self._requests = LabelledChildren(ctx.metrics.direct_get_requests, ctx.account_tag + reply_stream, ctx.name)
        self._responders: dict[ResponderRole, Responder] = {}

    @property
    def joined(self) -> bool:
        return bool(self._subs)

    def join(self) -> None:
        if self._subs:
            return
        base = DIRECT_GET_PREFIX + self._answers_for
        router = self._ctx.router
        self._subs = [
            router.subscribe(base, self._on_request, DIRECT_GET_QUEUE),
            router.subscribe(base + ".>", self._on_request, DIRECT_GET_QUEUE),
        ]
        log.info("direct_get_joined", stream=self._answers_for, node=self._ctx.name)

    def leave(self) -> None:
        for sub in self._subs:
            self._ctx.router.unsubscribe(sub)
        if self._subs:
            log.info("direct_get_left", stream=self._answers_for, node=self._ctx.name)
        self._subs = []

    def _responder(self) -> Responder:
        # one per role, made once: a frozen dataclass costs ~2 us to build, more than the rest of a
        # request's bookkeeping
        role = self._role()
        responder = self._responders.get(role)
        if responder is None:
            responder = self._responders[role] = Responder(self._ctx.name, role, self._reply_stream)
        return responder

    def _on_request(self, msg: Message) -> None:
        if not msg.reply:
            return
        try:
            _, appended = split_direct_subject(msg.subject)
        except ValueError:
            return
        request = parse_direct_get(msg.payload, appended)
        responder = self._responder()
        last_seq = self._last_seq()
        if isinstance(request, BadDirectGet):
            self._send(
                msg.reply, bad_request_frames(request, responder, last_seq), str(request.status), responder
            )
            return
        if is_behind(request, last_seq):
            self._ctx.spawn(self._answer_when_caught_up(request, msg.reply), "direct-get-min-last-seq")
            return
        self._answer(request, msg.reply, responder, last_seq)

    async def _answer_when_caught_up(self, request: DirectGetRequest, reply: str) -> None:
        caught_up = await self._wait_for_seq(request.min_last_seq, MIN_LAST_SEQ_WAIT)
        responder = self._responder()
        last_seq = self._last_seq()
        if not caught_up or is_behind(request, last_seq):
            self._send(reply, min_last_seq_frames(responder, last_seq), "412", responder)
            return
        self._answer(request, reply, responder, last_seq)

    def _answer(self, request: DirectGetRequest, reply: str, responder: Responder, last_seq: int) -> None:
        if not request.is_batch and not request.multi_last:
            # one message or one status (a KV get): no slicing, one publish
            headers, payload = single_frame(request, self._store(), responder, last_seq)
            status = headers[9:12].decode() if headers is not None and headers.startswith(b"NATS/1.0 4") else "ok"
            self._ctx.router.publish(reply, payload, None, headers)
            self._requests(_ROLE_LABELS[responder.role], status).inc()
            return
        frames = direct_get_frames(request, self._store(), responder, last_seq)
        first = list(itertools.islice(frames, FRAMES_PER_SLICE))
        status = "ok"
        head = first[0][0] if len(first) == 1 else None
        if head is not None and head.startswith(b"NATS/1.0 4"):
            status = head[9:12].decode()
        self._send(reply, first, status, responder)
        if len(first) == FRAMES_PER_SLICE:
            self._ctx.spawn(self._send_rest(reply, frames), f"direct-get-batch-{self._answers_for}")

    async def _send_rest(self, reply: str, frames: Iterator[ReplyFrame]) -> None:
        """The rest of a long batch, a slice per loop turn: its first messages are on their way, and
        the client reading them, while the rest are read; other requests are answered in between.
        While a link to a peer is backed up it waits for the link to drain."""
        router = self._ctx.router
        while True:
            if router.links_congested():
                drained: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                router.when_links_drained(functools.partial(_settle, drained))
                await drained
            else:
                await asyncio.sleep(0)
            if not router.has_interest(reply):
                return  # the client left (or was cut off as a slow consumer): nobody to read the rest
            try:
                chunk = list(itertools.islice(frames, FRAMES_PER_SLICE))
            except StoreError as exc:
                # the store closed or changed under the batch (the replica left, a snapshot replaced it):
                # the client gets no end-of-batch and times out, as when a responder dies mid-batch
                log.info("direct_get_batch_cut_short", stream=self._answers_for, error=str(exc))
                return
            self._publish(reply, chunk)
            if len(chunk) < FRAMES_PER_SLICE:
                return

    def _send(self, reply: str, frames: list[ReplyFrame], status: str, responder: Responder) -> None:
        self._publish(reply, frames)
        self._requests(_ROLE_LABELS[responder.role], status).inc()

    def _publish(self, reply: str, frames: list[ReplyFrame]) -> None:
        publish = self._ctx.router.publish
        for headers, payload in frames:
            publish(reply, payload, None, headers)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
