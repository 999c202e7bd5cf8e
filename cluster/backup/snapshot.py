"""STREAM.SNAPSHOT on the stream leader: the request's checks, and the archive streamed in chunks.

As nats-server does it (server/jetstream_api.go, streamSnapshot): the chunk size is clamped to 1 KiB-1 MiB
(128 KiB by default) and the window to 1 KiB-32 MiB (8 MiB by default, at least one chunk), so at most
window / chunk chunks are unacknowledged. Each full chunk carries a reply subject
`$JS.SNAPSHOT.ACK.<stream>.<id>.<size>.<index>` the client answers to acknowledge it; the last, shorter
chunk carries none; then an empty message ends the stream: status 204 once a full chunk went, nothing
before (nats-server's quirk, which a client that reads an empty message as the end accepts), 408 "No
Interest" when the client's inbox lost its subscriber, 408 "No Flow Response" when no chunk was
acknowledged for five seconds, 500 with the reason when reading the stream failed.

The meta leader checks the request, gathers each consumer's config and state from its leader (unless
the request says no_consumers) and hands both to the stream leader, which answers. The archive
(cluster/backup/archive.py) holds the messages stored from the first sequence to the last at the moment
the snapshot began, then the consumers; messages stored after it are not in it, and a message removed while the
snapshot runs (a limit, a delete) may be missing from it, as from nats-server's block copy.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import structlog

from cluster.api import jsjson
from cluster.api.advisories import (
    SNAPSHOT_COMPLETE_TYPE,
    SNAPSHOT_CREATE_TYPE,
    backup_advisory,
    backup_advisory_subject,
    new_event_id,
)
from cluster.api.audit import audited_call, send_api_response
from cluster.api.errors import ApiError, JSErrors, plain_error
from cluster.api.response_types import STREAM_SNAPSHOT_TYPE
from cluster.backup.archive import ArchivedConsumer, ArchiveError, ArchiveHeader, ArchiveWriter
from cluster.runtime.context import NodeContext
from gateway.router import Message
from storage.errors import MsgNotFoundError, StoreError
from storage.interface import StreamStore
from storage.model import StoredMsg
from subjects.grammar import is_valid_subject

log = structlog.get_logger(__name__)

DEFAULT_CHUNK_BYTES = 128 * 1024
DEFAULT_WINDOW_BYTES = 8 * 1024 * 1024
ACK_TIMEOUT_S = 5.0
INTEREST_WAIT_S = 2.0
SUBSCRIBE_GRACE_S = 0.25
MESSAGES_PER_READ = 256  # the store read between two turns of the loop

STATUS_DONE = b"NATS/1.0 204\r\n\r\n"
STATUS_NO_INTEREST = b"NATS/1.0 408 No Interest\r\n\r\n"
STATUS_NO_FLOW = b"NATS/1.0 408 No Flow Response\r\n\r\n"


@dataclass(frozen=True, slots=True)
class SnapshotRequest:
    deliver_subject: str
    no_consumers: bool = False
    chunk_size: int = 0
    window_size: int = 0
    check_msgs: bool = False


def parse_snapshot_request(payload: bytes) -> SnapshotRequest:
    """The request's body, after the checks nats-server made before it (not empty, the stream exists):
    10025 for JSON it cannot read into its JSApiStreamSnapshotRequest (unknown fields included), 10015
    for a deliver subject that is no subject."""
    try:
        body = jsjson.loads_request(payload, "JSApiStreamSnapshotRequest")
        request = SnapshotRequest(
            deliver_subject=jsjson.get_str(body, "deliver_subject"),
            no_consumers=jsjson.get_bool(body, "no_consumers"),
            chunk_size=jsjson.get_int(body, "chunk_size"),
            window_size=jsjson.get_int(body, "window_size"),
            check_msgs=jsjson.get_bool(body, "jsck"),
        )
        jsjson.reject_unknown(body)
    except jsjson.RequestJSONError as exc:
        raise JSErrors.INVALID_JSON(err=str(exc)) from None
    if not is_valid_subject(request.deliver_subject):
        raise JSErrors.SNAPSHOT_DELIVER_SUBJECT_INVALID()
    return request


def chunking(request: SnapshotRequest) -> tuple[int, int]:
    """(chunk size, chunks in flight at most), clamped as nats-server clamps them."""
    chunk = request.chunk_size or DEFAULT_CHUNK_BYTES
    window = request.window_size or DEFAULT_WINDOW_BYTES
    chunk = min(max(1024, chunk), 1024 * 1024)
    window = max(min(max(1024, window), 32 * 1024 * 1024), chunk)
    return chunk, window // chunk


class SnapshotSender:
    """One snapshot's chunks to `deliver_subject`, paced by the client's acknowledgements."""

    def __init__(
        self,
        ctx: NodeContext,
        stream: str,
        store: StreamStore,
        header: ArchiveHeader,
        consumers: list[ArchivedConsumer],
        request: SnapshotRequest,
        snapshot_id: str,
    ) -> None:
        self._ctx = ctx
        self._stream = stream
        self._store = store
        self._header = header
        self._consumers = consumers
        self._deliver = request.deliver_subject
        self._chunk, self._max_inflight = chunking(request)
        self._slots = asyncio.Semaphore(self._max_inflight)
        self._awaiting_ack = 0  # full chunks sent and not acknowledged: each ack frees one slot
        self._ack_prefix = f"$JS.SNAPSHOT.ACK.{stream}.{snapshot_id}"
        self.chunks_sent = 0
        self.bytes_sent = 0
        self.outcome = ""

    async def run(self) -> bool:
        """Send the whole archive; whether the client got all of it (the end marker says which)."""
        router = self._ctx.router
        ack_sub = router.subscribe(self._ack_prefix + ".>", self._on_ack)
        try:
            if not await self._interest():
                self.outcome = "no interest"
                router.publish(self._deliver, b"", None, STATUS_NO_INTEREST)
                return False
            status = await self._send_archive()
        finally:
            router.unsubscribe(ack_sub)
        if status is None:
            # nats-server's end marker: 204 once a full chunk went, an empty message with no status before
            router.publish(self._deliver, b"", None, STATUS_DONE if self.chunks_sent else None)
            self.outcome = "ok"
            return True
        router.publish(self._deliver, b"", None, status)
        return False

    def _on_ack(self, _msg: Message) -> None:
        if self._awaiting_ack:  # an ack repeated by the client frees no extra slot
            self._awaiting_ack -= 1
            self._slots.release()

    async def _interest(self) -> bool:
        """Whether the client listens on the deliver subject, waiting up to two seconds for it (nats-server's
        wait). A client may subscribe only once it has the answer (the nats CLI does), while its
        request-reply inbox wildcard already matches the subject: chunks sent at once would reach that
        wildcard and be dropped. So where something listens already, the first chunk waits a moment for
        a subscription to come, and goes at once when one does."""
        router = self._ctx.router
        changed = asyncio.Event()
        watch = router.watch_interest(self._deliver, changed.set)
        try:
            if router.has_interest(self._deliver):
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), SUBSCRIBE_GRACE_S)
                return True
            deadline = time.monotonic() + INTEREST_WAIT_S
            while not router.has_interest(self._deliver):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), left)
            return True
        finally:
            router.unwatch_interest(watch)

    async def _send_archive(self) -> bytes | None:
        """None when every byte went; else the status that ends the stream."""
        writer = ArchiveWriter()
        writer.header(self._header)
        pending = bytearray()
        try:
            for batch in stored_between(self._store, self._header.first_seq, self._header.last_seq):
                for msg in batch:
                    writer.message(msg.seq, msg.ts_ns, msg.subject, msg.headers, msg.payload)
                if writer.pending_bytes >= self._chunk:
                    pending += writer.take()
                status = await self._send_full_chunks(pending)
                if status is not None:
                    return status
                await asyncio.sleep(0)  # other clients' work between two reads of a long stream
        except StoreError as exc:  # the stream deleted meanwhile (its store closed), a corrupt record
            self.outcome = f"reading the stream failed: {exc}"
            return b"NATS/1.0 500 %s\r\n\r\n" % " ".join(str(exc).split()).encode()
        for consumer in self._consumers:
            writer.consumer(consumer)
        writer.end()
        pending += writer.take(final=True)
        status = await self._send_full_chunks(pending)
        if status is not None:
            return status
        if pending:
            status = await self._take_slot()
            if status is not None:
                return status
            self._ctx.router.publish(self._deliver, bytes(pending))  # the short last chunk: no ack asked
            self.bytes_sent += len(pending)
        return None

    async def _send_full_chunks(self, pending: bytearray) -> bytes | None:
        chunk = self._chunk
        while len(pending) >= chunk:
            status = await self._take_slot()
            if status is not None:
                return status
            data = bytes(pending[:chunk])
            del pending[:chunk]
            self.chunks_sent += 1
            self._awaiting_ack += 1
            reply = f"{self._ack_prefix}.{len(data)}.{self.chunks_sent}"
            self._ctx.router.publish(self._deliver, data, reply)
            self.bytes_sent += len(data)
        return None

    async def _take_slot(self) -> bytes | None:
        if not self._ctx.router.has_interest(self._deliver):
            self.outcome = "no interest"
            return STATUS_NO_INTEREST
        try:
            await asyncio.wait_for(self._slots.acquire(), ACK_TIMEOUT_S)
        except TimeoutError:
            self.outcome = "no flow response"
            return STATUS_NO_FLOW
        return None


@dataclass(frozen=True, slots=True)
class StreamAtSnapshot:
    """What the stream leader knows of its stream when a snapshot is asked for."""

    name: str
    store: StreamStore
    in_memory: bool
    config: dict[str, Any]
    state: dict[str, Any]  # STREAM.INFO's, consumer_count included
    first_seq: int
    last_seq: int


def forwarded_snapshot(request: SnapshotRequest, consumers: list[ArchivedConsumer]) -> bytes:
    """What the meta leader sends the stream leader: the request it checked and the consumers it gathered
    from their leaders (none when the request says no_consumers)."""
    return orjson.dumps({"request": dataclasses.asdict(request), "consumers": [c.to_json() for c in consumers]})


def read_forwarded_snapshot(payload: bytes) -> tuple[SnapshotRequest, list[ArchivedConsumer]]:
    body = orjson.loads(payload)
    return SnapshotRequest(**body["request"]), [ArchivedConsumer.from_json(c) for c in body["consumers"]]


async def serve_snapshot(ctx: NodeContext, msg: Message, stream: StreamAtSnapshot) -> None:
    """Answer a STREAM.SNAPSHOT the stream leader received from the meta leader, then stream the archive
    to the client."""
    try:
        try:
            request, consumers = read_forwarded_snapshot(msg.payload)
        except (orjson.JSONDecodeError, KeyError, TypeError, ArchiveError):
            raise JSErrors.BAD_REQUEST() from None
        if stream.in_memory:
            raise JSErrors.STREAM_SNAPSHOT(err="no impl")  # nats-server's memory store has no snapshot
        if request.check_msgs:
            await _check_messages(stream)
    except ApiError as error:
        send_api_response(ctx, msg, plain_error(STREAM_SNAPSHOT_TYPE, error))
        return
    body = {"type": STREAM_SNAPSHOT_TYPE, "config": stream.config, "state": stream.state}
    send_api_response(ctx, msg, jsjson.dumps(body))
    call = audited_call(msg)
    client = call[1] if call is not None else None
    begun_ns = time.time_ns()
    ctx.advise(
        backup_advisory_subject("SNAPSHOT_CREATE", stream.name),
        lambda: backup_advisory(
            SNAPSHOT_CREATE_TYPE, stream.name, client, new_event_id(), begun_ns, ctx.domain, state=stream.state
        ),
    )
    header = ArchiveHeader(stream.name, stream.config, stream.state, stream.first_seq, stream.last_seq)
    sender = SnapshotSender(ctx, stream.name, stream.store, header, consumers, request, new_event_id())
    started = time.monotonic()
    sent = await sender.run()
    ended_ns = time.time_ns()
    error = "" if sent else sender.outcome
    ctx.advise(
        backup_advisory_subject("SNAPSHOT_COMPLETE", stream.name),
        lambda: backup_advisory(
            SNAPSHOT_COMPLETE_TYPE,
            stream.name,
            client,
            new_event_id(),
            ended_ns,
            ctx.domain,
            start=begun_ns,
            end=ended_ns,
            error=error,
        ),
    )
    log.info(
        "stream_snapshot_sent",
        stream=stream.name,
        outcome=sender.outcome,
        chunks=sender.chunks_sent,
        bytes=sender.bytes_sent,
        seconds=round(time.monotonic() - started, 3),
    )


async def _check_messages(stream: StreamAtSnapshot) -> None:
    """`jsck`: read every message back before the snapshot starts (RocksDB verifies its blocks' checksums
    on each read), and refuse the snapshot, as nats-server does, if one cannot be read."""
    try:
        for _ in stored_between(stream.store, stream.first_seq, stream.last_seq):
            await asyncio.sleep(0)
    except Exception as exc:  # a corrupt block, a closed store: whatever the store raises
        raise JSErrors.STREAM_SNAPSHOT(err=f"snapshot check detected a bad message: {exc}") from None


def stored_between(store: StreamStore, first_seq: int, last_seq: int) -> Iterator[list[StoredMsg]]:
    """The messages stored from `first_seq` to `last_seq`, MESSAGES_PER_READ at a time (a loop turn may
    go between two); the store's errors but "nothing stored from here on" reach the caller."""
    seq = first_seq
    while seq <= last_seq:
        try:
            found = store.load_batch("", seq, MESSAGES_PER_READ).messages
        except MsgNotFoundError:
            return  # nothing stored from seq on any more (the tail was removed meanwhile)
        batch = [msg for msg in found if msg.seq <= last_seq]
        if not batch:
            return
        yield batch
        seq = batch[-1].seq + 1
