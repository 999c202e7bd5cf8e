"""The Raft transport: every group's messages to a peer on one long-lived gRPC call.

Each node dials each peer over a `grpc.aio.Channel` it is given (cluster/
owns one channel per peer, shared with the route mesh) and keeps one `Send`
call open on it. `send(group, msg)` only queues; a writer task per peer drains
the queue into frames of many messages (of every group), so a busy leader
sends a few large writes rather than one per message. Snapshots go on their
own `InstallSnapshot` call in chunks, so a large image never holds up the
heartbeats and appends of other groups.

When a peer cannot be reached the writer retries with backoff; meanwhile its
queue is bounded and what does not fit (or was in a failed write) is dropped
and reported through `on_unreachable`, so the core stops pipelining to that
peer and probes it with heartbeats instead. Raft recovers from any loss, so
nothing here ever blocks a group or another peer.

What arrives from peers is decoded (`raft/codec.py`), checked to be addressed
to this node, and handed to `deliver(group, msg)`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import grpc
import structlog

from raft import raft_pb2, raft_pb2_grpc
from raft.codec import (
    DEFAULT_SNAPSHOT_CHUNK_BYTES,
    CodecError,
    SnapshotAssembler,
    message_from_pb,
    message_to_pb,
    snapshot_chunks,
)
from raft.types import Message, MessageType, NodeId

log = structlog.get_logger(__name__)

# gRPC refuses messages over 4 MiB by default; frames stay well under that
# unless a single message is bigger (it then goes alone, and the channel must
# allow it: see grpc_channel_options()).
MAX_FRAME_BYTES = 2 * 1024 * 1024
# A message's size beyond its entries' payloads, for frame budgeting.
_MESSAGE_OVERHEAD = 48
_ENTRY_OVERHEAD = 16

Deliver = Callable[[str, Message], bool]
"""Hands an inbound message of `group` to the host; False if the group is unknown or full."""
UnreachableCallback = Callable[[str, NodeId], None]
CallMetadata = tuple[tuple[str, str], ...]  # gRPC metadata sent with every call to a peer
SnapshotCallback = Callable[[str, NodeId, bool], None]
# (peer, its incarnation) for every frame received: the node liveness every group shares
FrameCallback = Callable[[NodeId, int], None]


def grpc_channel_options(max_message_bytes: int = 64 * 1024 * 1024) -> list[tuple[str, int]]:
    """Options for the channels (and server) carrying Raft.

    Room for big entries and snapshot chunks, and a short reconnect backoff:
    gRPC's default lets a channel wait up to two minutes before redialling a
    peer that came back, far longer than an election timeout. At most a quarter
    second: a restarted peer's Raft groups and routes are back that much sooner
    (its clients are told of it then, INFO connect_urls), for a refused connect
    a few times a second to a peer that is down. With a one-second cap, a node
    started beside running peers was reached 1.1-1.2 s after its exec; with this
    one, 0.64-0.83 s, about when it serves its own clients.
    """
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.initial_reconnect_backoff_ms", 50),
        ("grpc.min_reconnect_backoff_ms", 50),
        ("grpc.max_reconnect_backoff_ms", 250),
        # A peer that vanished without a TCP reset (a black-holed link) must
        # fail the call, so the link redials instead of writing into the void.
        ("grpc.keepalive_time_ms", 2000),
        ("grpc.keepalive_timeout_ms", 2000),
    ]


def grpc_server_options(max_message_bytes: int = 64 * 1024 * 1024) -> list[tuple[str, int]]:
    """Options for the node's gRPC server, matching grpc_channel_options() (it must accept the keepalive pings)."""
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.http2.min_recv_ping_interval_without_data_ms", 1000),
        ("grpc.http2.max_ping_strikes", 0),
    ]


@dataclass(slots=True)
class TransportStats:
    frames_sent: int = 0
    messages_sent: int = 0
    messages_dropped: int = 0
    frames_received: int = 0
    messages_received: int = 0
    messages_rejected: int = 0
    snapshots_sent: int = 0
    snapshots_failed: int = 0
    snapshots_received: int = 0


class RaftTransport:
    """This node's end of the Raft transport, for every group it runs."""

    def __init__(
        self,
        node_id: NodeId,
        deliver: Deliver,
        *,
        on_unreachable: UnreachableCallback | None = None,
        on_snapshot_sent: SnapshotCallback | None = None,
        on_frame: FrameCallback | None = None,
        incarnation: int = 0,
        max_queued_messages: int = 10_000,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        reconnect_delay: tuple[float, float] = (0.02, 1.0),
        snapshot_chunk_bytes: int = DEFAULT_SNAPSHOT_CHUNK_BYTES,
        snapshot_timeout: float = 60.0,
        max_snapshot_bytes: int = 1 << 32,
    ) -> None:
        self.node_id = node_id
        self._deliver = deliver
        self._on_unreachable = on_unreachable or (lambda group, peer: None)
        self._on_snapshot_sent = on_snapshot_sent or (lambda group, peer, ok: None)
        self._on_frame = on_frame or (lambda peer, incarnation: None)
        self.incarnation = incarnation
        self.max_queued_messages = max_queued_messages
        self.max_frame_bytes = max_frame_bytes
        self.reconnect_delay = reconnect_delay
        self.snapshot_chunk_bytes = snapshot_chunk_bytes
        self.snapshot_timeout = snapshot_timeout
        self.max_snapshot_bytes = max_snapshot_bytes
        self.stats = TransportStats()
        self._links: dict[NodeId, _PeerLink] = {}

    # --- peers ---

    def add_peer(self, peer: NodeId, channel: grpc.aio.Channel, *, call_metadata: CallMetadata = ()) -> None:
        """Start sending to `peer` over `channel` (owned by the caller; never closed here).

        `call_metadata` goes with every call to the peer: how this node proves itself on its cluster port.
        """
        if peer == self.node_id:
            raise ValueError(f"node {peer!r} cannot be its own peer")
        if peer in self._links:
            raise ValueError(f"peer {peer!r} already added")
        link = _PeerLink(self, peer, channel, call_metadata)
        self._links[peer] = link
        link.start()

    async def remove_peer(self, peer: NodeId) -> None:
        link = self._links.pop(peer, None)
        if link is not None:
            await link.stop()

    @property
    def peers(self) -> list[NodeId]:
        return list(self._links)

    def is_connected(self, peer: NodeId) -> bool:
        link = self._links.get(peer)
        return link is not None and link.connected

    async def close(self) -> None:
        for peer in list(self._links):
            await self.remove_peer(peer)

    # --- sending ---

    def keepalive(self) -> None:
        """Send an empty frame to each peer whose link has nothing queued: one sign of life per pair of
        nodes for all their groups, which lets idle groups stop heartbeating (`RaftCore.quiesced`)."""
        for link in self._links.values():
            if not link.queue:
                link.keepalive = True
                if not link.wake.is_set():
                    link.wake.set()

    def send(self, group: str, msg: Message) -> None:
        """Queue `msg` for its receiver; never blocks. Undeliverable messages are reported, not raised."""
        link = self._links.get(msg.to)
        if link is None:
            self.stats.messages_dropped += 1
            self._on_unreachable(group, msg.to)
            return
        if msg.type is MessageType.SNAPSHOT:
            link.send_snapshot(group, msg)
            return
        if len(link.queue) >= self.max_queued_messages:
            self.stats.messages_dropped += 1
            self._on_unreachable(group, msg.to)
            return
        link.queue.append((group, msg))
        if not link.wake.is_set():
            link.wake.set()

    # --- receiving (the servicer calls these) ---

    async def serve_send(self, frames: AsyncIterator[raft_pb2.Frame]) -> raft_pb2.SendSummary:
        summary = raft_pb2.SendSummary()
        stats = self.stats
        deliver = self._deliver
        me = self.node_id
        on_frame = self._on_frame
        async for frame in frames:
            summary.frames += 1
            stats.frames_received += 1
            sender = frame.from_node
            on_frame(sender, frame.incarnation)
            for pb in frame.messages:
                summary.messages += 1
                try:
                    msg = message_from_pb(pb)
                except CodecError as exc:
                    stats.messages_rejected += 1
                    log.warning("bad raft message from peer", peer=sender, error=str(exc))
                    continue
                if msg.to != me or msg.from_ != sender:
                    stats.messages_rejected += 1
                    log.warning("misaddressed raft message", peer=sender, sender=msg.from_, to=msg.to)
                    continue
                stats.messages_received += 1
                deliver(pb.group, msg)
        return summary

    async def serve_install_snapshot(
        self, chunks: AsyncIterator[raft_pb2.SnapshotChunk]
    ) -> raft_pb2.SnapshotResult:
        assembler = SnapshotAssembler(self.max_snapshot_bytes)
        try:
            async for chunk in chunks:
                assembler.add(chunk)
            group, msg = assembler.finish()
        except CodecError as exc:
            log.warning("bad snapshot from peer", group=assembler.group, error=str(exc))
            return raft_pb2.SnapshotResult(accepted=False, error=str(exc))
        if msg.to != self.node_id:
            return raft_pb2.SnapshotResult(
                accepted=False, error=f"snapshot for {msg.to!r} reached {self.node_id!r}"
            )
        if not self._deliver(group, msg):
            return raft_pb2.SnapshotResult(accepted=False, error=f"group {group!r} is not running here")
        self.stats.snapshots_received += 1
        return raft_pb2.SnapshotResult(accepted=True)

    # --- helpers for the links ---

    def _report_dropped(self, peer: NodeId, dropped: list[tuple[str, Message]]) -> None:
        if not dropped:
            return
        self.stats.messages_dropped += len(dropped)
        for group in {group for group, _ in dropped}:
            self._on_unreachable(group, peer)

    def _build_frame(self, queue: list[tuple[str, Message]]) -> tuple[raft_pb2.Frame, int]:
        """A frame of queued messages up to max_frame_bytes (at least one); returns it and how many it took."""
        frame = raft_pb2.Frame(from_node=self.node_id, incarnation=self.incarnation)
        out = frame.messages
        budget = self.max_frame_bytes
        size = 0
        taken = 0
        for group, msg in queue:
            msg_size = _MESSAGE_OVERHEAD
            for entry in msg.entries:
                msg_size += len(entry.data) + _ENTRY_OVERHEAD
            if taken and size + msg_size > budget:
                break
            out.append(message_to_pb(group, msg))
            size += msg_size
            taken += 1
        return frame, taken


class _PeerLink:
    """Our call to one peer: dial, write frames, redial with backoff when it breaks."""

    def __init__(
        self, transport: RaftTransport, peer: NodeId, channel: grpc.aio.Channel, call_metadata: CallMetadata
    ) -> None:
        self.transport = transport
        self.peer = peer
        self.stub = raft_pb2_grpc.RaftStub(channel)
        self.call_metadata = call_metadata
        self.queue: list[tuple[str, Message]] = []
        self.wake = asyncio.Event()
        # an empty frame is due (`RaftTransport.keepalive`), unless messages go first
        self.keepalive = False
        self.connected = False
        # Whether the current call carried a frame: a link that worked retries quickly.
        self._carried = False
        self._task: asyncio.Task[None] | None = None
        # One snapshot per group in flight to this peer; the core resends if needed.
        self._snapshots: dict[str, asyncio.Task[None]] = {}

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"raft-to-{self.peer}")

    async def stop(self) -> None:
        tasks = [t for t in (self._task, *self._snapshots.values()) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._task = None
        self._snapshots.clear()
        self.connected = False
        self.queue.clear()

    async def _run(self) -> None:
        low, high = self.transport.reconnect_delay
        delay = low
        while True:
            self._carried = False
            try:
                await self._session()
            except asyncio.CancelledError:
                raise
            except grpc.aio.AioRpcError as exc:
                log.debug("raft link to peer failed", peer=self.peer, code=exc.code().name)
            except (ConnectionError, grpc.aio.UsageError, asyncio.InvalidStateError) as exc:
                # InvalidStateError: grpc.aio's answer to a write on a call that already ended
                log.debug("raft link to peer failed", peer=self.peer, error=repr(exc))
            except Exception:
                # whatever ends a call, the link must redial: a dead task would cut this peer off for good
                log.exception("raft link to peer failed unexpectedly", peer=self.peer)
            if self.connected:
                log.info("raft link to peer down", peer=self.peer)
            self.connected = False
            if self._carried:
                delay = low
            # What is queued now would arrive late or out of order after the
            # backoff; Raft resends from its own state, so drop it and say so.
            dropped, self.queue = self.queue, []
            self.transport._report_dropped(self.peer, dropped)
            await asyncio.sleep(delay)
            delay = min(delay * 2, high)

    async def _session(self) -> None:
        """Run one Send call until it fails."""
        transport = self.transport
        stats = transport.stats
        call = self.stub.Send(metadata=self.call_metadata)
        call.add_done_callback(lambda _call: self.wake.set())
        try:
            while True:
                await self.wake.wait()
                self.wake.clear()
                if call.done():
                    await call  # raises the call's error
                    raise ConnectionError("peer ended the raft call")
                if self.keepalive and not self.queue:
                    await call.write(
                        raft_pb2.Frame(from_node=transport.node_id, incarnation=transport.incarnation)
                    )
                    stats.frames_sent += 1
                self.keepalive = False
                while self.queue:
                    if call.done():  # ended while we were writing: the loop's top raises its error
                        self.wake.set()
                        break
                    frame, taken = transport._build_frame(self.queue)
                    batch = self.queue[:taken]
                    del self.queue[:taken]
                    try:
                        await call.write(frame)
                    except BaseException:
                        transport._report_dropped(self.peer, batch)
                        raise
                    if not self.connected:
                        log.info("raft link to peer up", peer=self.peer)
                    self.connected = True
                    self._carried = True
                    stats.frames_sent += 1
                    stats.messages_sent += taken
        finally:
            call.cancel()

    def send_snapshot(self, group: str, msg: Message) -> None:
        running = self._snapshots.get(group)
        if running is not None and not running.done():
            # The core asked again while one is on its way; it hears about that one.
            return
        task = asyncio.get_running_loop().create_task(
            self._install_snapshot(group, msg), name=f"raft-snapshot-{group}-to-{self.peer}"
        )
        self._snapshots[group] = task

    async def _install_snapshot(self, group: str, msg: Message) -> None:
        transport = self.transport
        ok = False
        try:
            chunks = snapshot_chunks(group, msg, transport.snapshot_chunk_bytes)
            result = await self.stub.InstallSnapshot(
                chunks, timeout=transport.snapshot_timeout, metadata=self.call_metadata
            )
            ok = result.accepted
            if not ok:
                log.warning("peer refused snapshot", peer=self.peer, group=group, error=result.error)
        except grpc.aio.AioRpcError as exc:
            log.info("sending snapshot failed", peer=self.peer, group=group, code=exc.code().name)
        finally:
            self._snapshots.pop(group, None)
        if ok:
            transport.stats.snapshots_sent += 1
        else:
            transport.stats.snapshots_failed += 1
        transport._on_snapshot_sent(group, self.peer, ok)


class _RaftServicer(raft_pb2_grpc.RaftServicer):
    def __init__(self, transport: RaftTransport) -> None:
        self._transport = transport

    async def Send(  # the name gRPC generates from raft.proto
        self, request_iterator: AsyncIterator[raft_pb2.Frame], context: grpc.aio.ServicerContext
    ) -> raft_pb2.SendSummary:
        return await self._transport.serve_send(request_iterator)

    async def InstallSnapshot(
        self, request_iterator: AsyncIterator[raft_pb2.SnapshotChunk], context: grpc.aio.ServicerContext
    ) -> raft_pb2.SnapshotResult:
        return await self._transport.serve_install_snapshot(request_iterator)


def add_raft_servicer(server: grpc.aio.Server, transport: RaftTransport) -> None:
    """Serve the Raft transport on `server` (the node's one gRPC server, shared with the route mesh)."""
    raft_pb2_grpc.add_RaftServicer_to_server(_RaftServicer(transport), server)
