"""Reading a sequence range of a stream with ADR-31 Direct Get batches.

One `DirectGetRangeReader` reads `[first, last]` (inclusive) through one NATS
connection: it asks for `batch` messages from the next sequence (with
`max_bytes`), collects the replies up to the `204 EOB` marker, and continues
from the EOB's `Nats-Last-Sequence` while `Nats-Num-Pending` says more match.
Any member of the stream's `_sys_` queue group (a replica or a mirror) may
answer, and a replica may be behind, so an early end of the data is only
trusted when the responder proves it had the whole range
(`Jetraft-Last-Sequence`), or when the stream leader's coherent
STREAM.MSG.GET confirms nothing more matches; otherwise the reader asks again.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import nats.aio.client
import nats.errors
import orjson

from gateway.headers import HeaderError, decode_headers
from pipeline.errors import BatchNotSupportedError, DirectGetError, DirectGetNotAllowedError
from pipeline.nats_client import MultiValueHeaderClient

# Headers a Direct Get responder adds to the stored message; they become columns, not `headers`.
HDR_STREAM = "Nats-Stream"
HDR_SUBJECT = "Nats-Subject"
HDR_SEQUENCE = "Nats-Sequence"
HDR_TIME = "Nats-Time-Stamp"
HDR_NUM_PENDING = "Nats-Num-Pending"
HDR_LAST_SEQUENCE = "Nats-Last-Sequence"
HDR_UPTO_SEQUENCE = "Nats-UpTo-Sequence"
HDR_JETRAFT_NODE = "Jetraft-Node"
HDR_JETRAFT_ROLE = "Jetraft-Role"
HDR_JETRAFT_LAST_SEQUENCE = "Jetraft-Last-Sequence"
RESPONDER_HEADERS = frozenset(
    {
        HDR_STREAM,
        HDR_SUBJECT,
        HDR_SEQUENCE,
        HDR_TIME,
        HDR_NUM_PENDING,
        HDR_LAST_SEQUENCE,
        HDR_UPTO_SEQUENCE,
        HDR_JETRAFT_NODE,
        HDR_JETRAFT_ROLE,
        HDR_JETRAFT_LAST_SEQUENCE,
    }
)

STATUS_EOB = 204
STATUS_NOT_FOUND = 404
STATUS_MIN_LAST_SEQ = 412  # jetraft: the responder stayed behind the request's min_last_seq
STATUS_NO_RESPONDERS = 503

# How long a behind replica gets to catch up before the read fails (attempts double from 50 ms to 1 s).
STALE_RETRY_DELAYS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)
TIMEOUT_ATTEMPTS = 3


@dataclass(slots=True)
class DirectMessage:
    """One stored message as a Direct Get reply carried it."""

    subject: str
    seq: int
    time: str  # RFC 3339 with nanoseconds, as the responder sent it
    headers: list[tuple[str, str]]  # the stored headers only, in order, repeated names kept
    data: bytes
    responder: str | None  # Jetraft-Node; None on servers that do not send it


@dataclass(slots=True)
class BatchResult:
    """The messages of one batch request and what its EOB said."""

    messages: list[DirectMessage] = field(default_factory=list)
    num_pending: int = 0
    last_sequence: int = 0
    not_found: bool = False
    responder_last_seq: int | None = None  # Jetraft-Last-Sequence, when the responder sends it
    status: int | None = None  # a status other than EOB/404 that ended the batch
    description: str = ""


@dataclass(slots=True)
class ReplyHeaders:
    """A Direct Get reply's header block, split into the responder's fields and the stored ones."""

    status: int | None
    description: str
    meta: dict[str, str]  # RESPONDER_HEADERS only
    stored: list[tuple[str, str]]  # everything else, in order, repeated names kept


def parse_reply_headers(block: bytes) -> ReplyHeaders:
    """Decode a reply's header block (gateway's decoder, as for every other message) and split it."""
    try:
        headers = decode_headers(block)
    except HeaderError as exc:
        raise DirectGetError(f"Direct Get reply with a bad header block: {exc}") from None
    meta: dict[str, str] = {}
    stored: list[tuple[str, str]] = []
    for name, value in headers.fields:
        if name in RESPONDER_HEADERS:
            meta[name] = value
        else:
            stored.append((name, value))
    return ReplyHeaders(headers.status, headers.description, meta, stored)


def direct_message(headers: ReplyHeaders, data: bytes) -> DirectMessage:
    """A data reply into a DirectMessage; raises DirectGetError when the reply lacks its metadata."""
    meta = headers.meta
    try:
        seq = int(meta[HDR_SEQUENCE])
        subject = meta[HDR_SUBJECT]
        stamp = meta[HDR_TIME]
    except (KeyError, ValueError) as exc:
        raise DirectGetError(f"Direct Get reply without valid {exc} header") from None
    return DirectMessage(subject, seq, stamp, headers.stored, data, meta.get(HDR_JETRAFT_NODE))


def batch_request(
    seq: int, batch: int, max_bytes: int, subject: str | None, min_last_seq: int | None
) -> dict[str, object]:
    """The ADR-31 batch request body; `min_last_seq` is jetraft's read-your-writes field (others ignore it)."""
    request: dict[str, object] = {"seq": seq, "batch": batch, "max_bytes": max_bytes}
    if subject is not None:
        request["next_by_subj"] = subject
    if min_last_seq:
        request["min_last_seq"] = min_last_seq
    return request


class _PendingBatch:
    """Collects the replies to one batch request, keyed by the reply subject's last token."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.result = BatchResult()
        self.done: asyncio.Future[BatchResult] = loop.create_future()
        self.replies = 0

    def feed(self, block: bytes | None, data: bytes) -> None:
        if self.done.done():
            return
        self.replies += 1
        if block is None:
            self.done.set_exception(DirectGetError("Direct Get reply without headers (was no_hdr set?)"))
            return
        try:
            headers = parse_reply_headers(block)
        except DirectGetError as exc:
            self.done.set_exception(exc)
            return
        last_seq = headers.meta.get(HDR_JETRAFT_LAST_SEQUENCE)
        if last_seq is not None and last_seq.isdigit():
            self.result.responder_last_seq = int(last_seq)
        status = headers.status
        if status is None:
            if self.replies == 1 and HDR_NUM_PENDING not in headers.meta:
                # ADR-31: a server without batch support answers the first message alone, without this header.
                self.done.set_exception(
                    BatchNotSupportedError(
                        "the server answered a Direct Get batch without Nats-Num-Pending: it does not "
                        "support batches (ADR-31; needs nats-server 2.11 or newer, or jetraft)"
                    )
                )
                return
            try:
                self.result.messages.append(direct_message(headers, data))
            except DirectGetError as exc:
                self.done.set_exception(exc)
            return
        if status == STATUS_EOB:
            try:
                self.result.num_pending = int(headers.meta[HDR_NUM_PENDING])
                self.result.last_sequence = int(headers.meta[HDR_LAST_SEQUENCE])
            except (KeyError, ValueError):
                self.done.set_exception(
                    DirectGetError("EOB without valid Nats-Num-Pending/Nats-Last-Sequence")
                )
                return
        elif status == STATUS_NOT_FOUND:
            self.result.not_found = True
        else:
            self.result.status = status
            self.result.description = headers.description
        self.done.set_result(self.result)


class DirectGetRangeReader:
    """Reads sequence ranges of one stream over one connection; create it inside the running loop."""

    def __init__(
        self,
        nc: MultiValueHeaderClient,
        stream: str,
        subject: str | None,
        batch_size: int,
        max_bytes: int,
        request_timeout: float,
        min_last_seq: int | None = None,
        stale_retry_delays: Sequence[float] = STALE_RETRY_DELAYS,
    ) -> None:
        self._nc = nc
        self._stale_retry_delays = tuple(stale_retry_delays)
        self._stream = stream
        self._subject = subject
        self._batch_size = batch_size
        self._max_bytes = max_bytes
        self._timeout = request_timeout
        self._min_last_seq = min_last_seq
        self._api_subject = f"$JS.API.DIRECT.GET.{stream}"
        self._inbox = nc.new_inbox()
        self._token_offset = len(self._inbox) + 1
        self._tokens = itertools.count(1)
        self._pending: dict[bytes, _PendingBatch] = {}
        self._sub: nats.aio.subscription.Subscription | None = None
        self.requests = 0
        self.stale_retries = 0

    def _on_reply(self, subject: bytes, block: bytes | None, data: bytes) -> None:
        pending = self._pending.get(subject[self._token_offset :])
        if pending is not None:
            pending.feed(block, data)

    async def _ensure_subscribed(self) -> None:
        if self._sub is None:
            self._sub = await self._nc.subscribe_raw(f"{self._inbox}.*", self._on_reply)

    async def close(self) -> None:
        if self._sub is not None:
            await self._nc.unsubscribe_raw(self._sub)
            self._sub = None

    async def fetch_batch(self, seq: int, batch: int) -> BatchResult:
        """One batch request from `seq`, retried on silence; raises on error statuses."""
        await self._ensure_subscribed()
        body = orjson.dumps(batch_request(seq, batch, self._max_bytes, self._subject, self._min_last_seq))
        for _attempt in range(TIMEOUT_ATTEMPTS):
            token = b"%d" % next(self._tokens)
            pending = _PendingBatch(asyncio.get_running_loop())
            self._pending[token] = pending
            try:
                self.requests += 1
                await self._nc.publish(self._api_subject, body, reply=f"{self._inbox}.{token.decode()}")
                result = await self._await_quiet(pending)
            finally:
                del self._pending[token]
            if result is None:
                continue
            if result.status == STATUS_NO_RESPONDERS:
                raise DirectGetNotAllowedError(
                    f"no Direct Get responder for stream '{self._stream}' (503): the stream does not exist "
                    "or does not allow direct get (allow_direct is false)"
                )
            if result.status is not None and result.status != STATUS_MIN_LAST_SEQ:
                raise DirectGetError(
                    f"Direct Get on stream '{self._stream}' from seq {seq} failed: "
                    f"{result.status} {result.description}".rstrip()
                )
            return result
        raise DirectGetError(
            f"Direct Get on stream '{self._stream}' from seq {seq}: no reply within "
            f"{self._timeout:g}s, {TIMEOUT_ATTEMPTS} times"
        )

    async def _await_quiet(self, pending: _PendingBatch) -> BatchResult | None:
        """Wait for the batch to end; time out only after `request_timeout` without any reply."""
        seen = -1
        while seen != pending.replies:
            seen = pending.replies
            try:
                return await asyncio.wait_for(asyncio.shield(pending.done), self._timeout)
            except TimeoutError:
                continue
        return None

    async def read_range(self, first: int, last: int) -> AsyncIterator[list[DirectMessage]]:
        """Yield the messages with first <= seq <= last (matching the subject filter), batch by batch."""
        next_seq = first
        stale_attempts = 0
        while next_seq <= last:
            want = min(self._batch_size, last - next_seq + 1)
            result = await self.fetch_batch(next_seq, want)
            if result.status == STATUS_MIN_LAST_SEQ:
                await self._wait_for_replica(next_seq, stale_attempts)
                stale_attempts += 1
                continue
            in_range = [m for m in result.messages if m.seq <= last]
            if in_range:
                yield in_range
            if len(in_range) < len(result.messages):
                return  # the batch ran past `last`: the range is complete
            if result.messages:
                stale_attempts = 0
                next_seq = max(result.last_sequence, result.messages[-1].seq) + 1
                if next_seq > last:
                    return
                if result.num_pending > 0 and not result.not_found:
                    continue
            # The responder says nothing more matches (or sent nothing): true, or is it behind?
            if await self._range_complete(result, next_seq, last):
                return
            await self._wait_for_replica(next_seq, stale_attempts)
            stale_attempts += 1

    async def _wait_for_replica(self, next_seq: int, attempt: int) -> None:
        """Back off before asking again: the replica may catch up, or another member may answer."""
        if attempt >= len(self._stale_retry_delays):
            raise DirectGetError(
                f"Direct Get on stream '{self._stream}': the responding replica stayed behind sequence "
                f"{next_seq} for {sum(self._stale_retry_delays):g}s"
            )
        self.stale_retries += 1
        await asyncio.sleep(self._stale_retry_delays[attempt])

    async def _range_complete(self, result: BatchResult, next_seq: int, last: int) -> bool:
        """Whether 'nothing more matches' can be trusted for next_seq..last."""
        if result.responder_last_seq is not None and result.responder_last_seq >= last:
            return True
        found = await self.leader_next_seq(next_seq)
        return found is None or found > last

    async def leader_next_seq(self, seq: int) -> int | None:
        """The first matching sequence >= seq according to the stream leader (coherent STREAM.MSG.GET)."""
        request = {"seq": seq, "next_by_subj": self._subject or ">"}
        reply = await self._api_request(f"$JS.API.STREAM.MSG.GET.{self._stream}", request)
        error = reply.get("error")
        if error:
            if error.get("err_code") == 10037:  # no message found
                return None
            raise DirectGetError(
                f"STREAM.MSG.GET on stream '{self._stream}' failed: {error.get('description')}"
            )
        return int(reply["message"]["seq"])

    async def _api_request(self, subject: str, request: dict[str, object]) -> dict[str, object]:
        try:
            msg = await self._nc.request(subject, orjson.dumps(request), timeout=self._timeout)
        except nats.errors.TimeoutError:
            raise DirectGetError(f"{subject}: no reply within {self._timeout:g}s") from None
        except nats.errors.NoRespondersError:
            raise DirectGetError(f"{subject}: no responders (is JetStream enabled?)") from None
        return orjson.loads(msg.data)
