"""The route mesh: subject interest and forwarded messages between nodes, over gRPC.

Each node dials each peer over a `grpc.aio.Channel` it is given (cluster/
shares one channel per peer with the Raft transport) and keeps one
`Route.Connect` call open on it. Over that call it sends, in batches of one
event-loop turn each:

- its local interest (subject, queue group, number of subscribers), a full
  snapshot when the call opens and then every change;
- the messages its router forwards to that peer;
- pings, answered by the peer on the same call, giving the link's RTT
  (used by the `nearest` queue policy). The peer answers a ping after it has
  delivered everything before it, so a pong also confirms what was sent.

What arrives on the calls peers opened to us is applied to our router: their
interest becomes remote entries in our sublist, their messages are delivered
locally (never forwarded again: the mesh is complete). When a peer's call
ends, its interest is forgotten; when ours ends, we redial with backoff and
resend the snapshot.

A request under one of the router's `lost_prefixes` (the cluster's leader
subjects) is kept after it is sent until a pong confirms the peer read it. If
the call ends first (the peer was killed, or cut off, with the request unread
in its socket or still queued here), the router gets it back
(`Router.lost_in_transit`) to hand on to whoever serves it next: the requester
would otherwise wait out its whole timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

import grpc
import structlog

from gateway import route_pb2, route_pb2_grpc
from gateway.protocol import decode_token, encode_token
from gateway.router import InvalidSubjectError, Router

log = structlog.get_logger(__name__)

# gRPC refuses messages over 4 MiB by default; frames stay well under unless a
# single message is bigger (it then goes alone).
MAX_FRAME_BYTES = 256 * 1024
DEFAULT_PING_INTERVAL = 1.0
# A link with more than this queued stalls the clients publishing into it (they
# stop being read) until it is back under the low mark: backpressure instead of
# loss, as nats-server stalls fast producers on a busy route.
QUEUE_HIGH_WATER = 4 * 1024 * 1024
QUEUE_LOW_WATER = 1024 * 1024
# Beyond this a link drops what it is given (a peer that stopped reading).
QUEUE_LIMIT = 64 * 1024 * 1024
# Weight of a new RTT sample in the running average: quick to follow a real
# change of link latency, yet not thrown by one noisy sample.
RTT_SMOOTHING = 0.3
# Requests kept per link until a pong confirms them (one ping interval's worth, normally): beyond
# this the oldest are no longer kept, and a link that fails would lose them as before.
MAX_UNCONFIRMED = 10_000


@dataclass(frozen=True, slots=True)
class RouteLinkStats:
    """One peer link as /routez shows it."""

    peer: str
    connected: bool
    rtt: float | None  # seconds
    messages_sent: int
    messages_received: int
    queued_bytes: int
    interest: int  # subscriptions the peer has told us of


class RouteMesh:
    """This node's end of the route mesh; implements the router's `RemoteLinks`."""

    def __init__(
        self,
        router: Router,
        node_name: str,
        client_url: str,
        *,
        ping_interval: float = DEFAULT_PING_INTERVAL,
        ping_timeout: float | None = None,
        queue_limit: int = QUEUE_LIMIT,
        reconnect_delay: tuple[float, float] = (0.05, 2.0),
        on_peers_changed: Callable[[dict[str, str]], None] | None = None,
        labels: Sequence[str] = (),
    ) -> None:
        self.router = router
        self.node_name = node_name
        self.client_url = client_url
        self.labels = tuple(labels)
        self.ping_interval = ping_interval
        self.ping_timeout = ping_timeout if ping_timeout is not None else 3 * ping_interval
        self.queue_limit = queue_limit
        self.reconnect_delay = reconnect_delay
        self._on_peers_changed = on_peers_changed
        self._links: dict[str, _PeerLink] = {}
        self._inbound_sessions: dict[str, str] = {}
        # What each peer's call to us says it is interested in. The router is told only while our own
        # call to that peer is up too: the two directions are separate calls, and interest that
        # arrives while ours is still dialling would send the router's forwards into a link that
        # drops them (a request lost without a word, its client waiting out its timeout).
        self._peer_interest: dict[str, dict[tuple[str, str | None], int]] = {}
        self._peer_urls: dict[str, str] = {}
        self._peer_labels: dict[str, tuple[str, ...]] = {}
        self.dropped_messages = 0
        # peer -> messages received from it (for /routez)
        self.messages_received: dict[str, int] = {}
        self._congested: set[str] = set()
        self._drain_waiters: list[Callable[[], None]] = []
        # Replaced on every change of connectivity, so waiters wake and look again.
        self._state_changed = asyncio.Event()
        router.attach_links(self)
        router.add_interest_listener(self._on_local_interest)

    # --- peers --------------------------------------------------------------------------

    def add_peer(
        self, name: str, channel: grpc.aio.Channel, *, call_metadata: Sequence[tuple[str, str]] = ()
    ) -> None:
        """Start dialling `name` over `channel` (owned by the caller; never closed here).

        `call_metadata` goes with every call to the peer: how this node proves itself on its cluster port.
        """
        if name == self.node_name:
            raise ValueError(f"node {name!r} cannot be its own peer")
        if name in self._links:
            raise ValueError(f"peer {name!r} already added")
        link = _PeerLink(self, name, channel, tuple(call_metadata))
        self._links[name] = link
        link.start()

    async def remove_peer(self, name: str) -> None:
        link = self._links.pop(name, None)
        if link is not None:
            await link.stop()
        self._set_peer_url(name, None)

    async def close(self) -> None:
        for name in list(self._links):
            await self.remove_peer(name)

    @property
    def peers(self) -> list[str]:
        return list(self._links)

    def is_connected(self, peer: str) -> bool:
        """Whether our call to `peer` is up (so messages forwarded to it are sent)."""
        link = self._links.get(peer)
        return link is not None and link.connected

    def reachable(self, peer: str) -> bool:
        """Whether routes to and from `peer` are both up: what we forward reaches it, and its
        interest (the streams it leads) reaches us."""
        return self.is_connected(peer) and peer in self._inbound_sessions

    def peer_labels(self, peer: str) -> tuple[str, ...] | None:
        """The labels `peer` sent in its hello while our call to it is up; None while it is down."""
        return self._peer_labels.get(peer) if self.is_connected(peer) else None

    def peer_urls(self) -> dict[str, str]:
        """Client URLs of the peers our calls are connected to."""
        return dict(self._peer_urls)

    def _notify_state(self) -> None:
        self._state_changed.set()
        self._state_changed = asyncio.Event()

    def _set_peer_url(self, peer: str, url: str | None) -> None:
        self._notify_state()
        changed = self._peer_urls.get(peer) != url
        if url is None:
            self._peer_urls.pop(peer, None)
        else:
            self._peer_urls[peer] = url
        if changed and self._on_peers_changed is not None:
            self._on_peers_changed(dict(self._peer_urls))

    async def wait_connected(self, peers: Sequence[str] | None = None, timeout: float = 10.0) -> None:
        """Until our calls to `peers` (default: all) and theirs to us are up."""
        wanted = list(peers) if peers is not None else list(self._links)

        async def ready() -> None:
            while not all(self.is_connected(p) and p in self._inbound_sessions for p in wanted):
                await self._state_changed.wait()

        await asyncio.wait_for(ready(), timeout)

    # --- RemoteLinks ------------------------------------------------------------------------

    def forward(
        self,
        peer: str,
        subject: str,
        reply: str | None,
        headers: bytes | None,
        payload: bytes,
        queues: Sequence[str],
        deliver_as: str | None = None,
        reply_via: str | None = None,
        rerouted: bool = False,
    ) -> None:
        link = self._links.get(peer)
        if (
            link is None
            or link.queued_bytes >= self.queue_limit
            # A peer whose own call to us is up is evidently alive while ours to it still dials (it
            # started or healed a moment ago, and ours is redialling at once): what goes to it, an
            # answer to its request, waits for our call; the call's end, if it fails, drops it.
            or not (link.connected or peer in self._inbound_sessions)
        ):
            # Like a NATS route that is down or hopelessly backed up: lost for that node.
            self.dropped_messages += 1
            return
        link.messages.append((subject, reply, headers, payload, queues, deliver_as, reply_via, rerouted))
        link.queued_bytes += len(payload) + (len(headers) if headers else 0) + len(subject)
        if link.queued_bytes > QUEUE_HIGH_WATER:
            self._congested.add(peer)
        link.wake.set()

    def congested(self) -> bool:
        """Whether some link has more queued than it should: publishers should pause."""
        return bool(self._congested)

    def when_drained(self, callback: Callable[[], None]) -> None:
        """Call `callback` once no link is congested any more (now, if none is)."""
        if not self._congested:
            callback()
        else:
            self._drain_waiters.append(callback)

    def _link_drained(self, peer: str) -> None:
        self._congested.discard(peer)
        if not self._congested and self._drain_waiters:
            waiters, self._drain_waiters = self._drain_waiters, []
            for callback in waiters:
                callback()

    def link_stats(self, peer: str) -> RouteLinkStats | None:
        """What /routez reports of our link to `peer`; None for a peer we do not dial."""
        link = self._links.get(peer)
        if link is None:
            return None
        return RouteLinkStats(
            peer=peer,
            connected=link.connected,
            rtt=link.rtt if link.connected else None,
            messages_sent=link.messages_sent,
            messages_received=self.messages_received.get(peer, 0),
            queued_bytes=link.queued_bytes,
            interest=len(self.router.remote_interest(peer)),
        )

    def rtt(self, peer: str) -> float | None:
        link = self._links.get(peer)
        return link.rtt if link is not None and link.connected else None

    def _on_local_interest(self, subject: str, queue: str | None, count: int) -> None:
        for link in self._links.values():
            if link.session_open:
                link.interest[(subject, queue)] = count
                link.wake.set()

    # --- inbound calls (the servicer) ---------------------------------------------------------

    async def serve(self, context: grpc.aio.ServicerContext) -> None:
        """One peer's call to us: its hello, then frames until it ends or goes silent."""
        try:
            first = await asyncio.wait_for(context.read(), self.ping_timeout)
        except TimeoutError:
            return
        if first is grpc.aio.EOF:
            return
        peer, session = first.hello.node, first.hello.session
        if not peer or peer == self.node_name:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"bad hello: node {peer!r}")
        # A new call from a peer supersedes any older one we have not noticed ending.
        self._inbound_sessions[peer] = session
        self._notify_state()
        self._forget_interest(peer)
        link = self._links.get(peer)
        if link is not None and not link.connected:
            # the peer is evidently up (a restart): our call to it need not wait out its backoff,
            # which would leave the peer's interest unusable here for up to two seconds
            link.redial_now()
        log.debug("route from peer", peer=peer, session=session)
        loop = asyncio.get_running_loop()
        # The peer pings every ping_interval; silence longer than ping_timeout means the
        # link is dead even if TCP has not noticed. A timer checks, rather than a
        # timeout around every read, which would cost a task per frame.
        last_seen = loop.time()
        handler = asyncio.current_task()
        assert handler is not None

        def check_silence() -> None:
            nonlocal watchdog
            if loop.time() - last_seen > self.ping_timeout:
                log.info("route from peer went silent", peer=peer)
                handler.cancel()
            else:
                watchdog = loop.call_later(self.ping_timeout / 2, check_silence)

        watchdog = loop.call_later(self.ping_timeout / 2, check_silence)
        try:
            self._apply(peer, first)
            await context.write(
                route_pb2.Frame(
                    hello=route_pb2.Hello(
                        node=self.node_name, client_url=self.client_url, session=session, labels=self.labels
                    )
                )
            )
            while True:
                frame = await context.read()
                if frame is grpc.aio.EOF or self._inbound_sessions.get(peer) != session:
                    return
                last_seen = loop.time()
                self._apply(peer, frame)
                if frame.ping:
                    await context.write(route_pb2.Frame(pong=frame.ping))
        finally:
            watchdog.cancel()
            if self._inbound_sessions.get(peer) == session:
                del self._inbound_sessions[peer]
                self._forget_interest(peer)
                self._notify_state()

    def _forget_interest(self, peer: str) -> None:
        self._peer_interest.pop(peer, None)
        self.router.clear_remote_interest(peer)

    def _link_up(self, peer: str) -> None:
        """Our call to `peer` is up: the router may now count on the interest its call told us of."""
        for (subject, queue), weight in self._peer_interest.get(peer, {}).items():
            self._tell_router(peer, subject, queue, weight)

    def _link_down(self, peer: str) -> None:
        """Our call to `peer` is down: nothing forwarded there would arrive; its interest is kept
        for when the call is back."""
        self.router.clear_remote_interest(peer)

    def _tell_router(self, peer: str, subject: str, queue: str | None, weight: int) -> None:
        try:
            self.router.set_remote_interest(peer, subject, queue, weight)
        except InvalidSubjectError as exc:
            log.warning("bad interest from peer", peer=peer, error=str(exc))

    def _apply(self, peer: str, frame: route_pb2.Frame) -> None:
        router = self.router
        if frame.interest:
            known = self._peer_interest.setdefault(peer, {})
            link_up = self.is_connected(peer)
            for interest in frame.interest:
                subject = decode_token(interest.subject)
                queue = decode_token(interest.queue) if interest.queue else None
                if interest.weight > 0:
                    known[(subject, queue)] = interest.weight
                else:
                    known.pop((subject, queue), None)
                if link_up:
                    self._tell_router(peer, subject, queue, interest.weight)
        if frame.messages:
            self._deliver_messages(peer, frame)
        router.output.flush()

    def _deliver_messages(self, peer: str, frame: route_pb2.Frame) -> None:
        messages = frame.messages
        self.messages_received[peer] = self.messages_received.get(peer, 0) + len(messages)
        # While our call to the peer still dials, its reply interest does not count here yet (see
        # _link_up): its requests name it as where their answers go, as a passed-on request does.
        answers_via = None if self.is_connected(peer) else peer
        node_name = self.node_name
        deliver = self.router.deliver_routed
        # Each field read from a upb message builds a Python object and HasField is a method call: a
        # field is read once, and HasField asked only where an empty value could also mean "set".
        for msg in messages:
            headers: bytes | None = msg.headers
            if not headers and not msg.HasField("headers"):
                headers = None
            reply = msg.reply
            queues = msg.queues
            deliver_as = msg.deliver_as
            reply_via = msg.reply_via
            try:
                deliver(
                    msg.subject.decode("utf-8", "surrogateescape"),
                    reply.decode("utf-8", "surrogateescape") if reply else None,
                    headers,
                    msg.payload,
                    [q.decode("utf-8", "surrogateescape") for q in queues] if queues else (),
                    deliver_as.decode("utf-8", "surrogateescape")
                    if deliver_as or msg.HasField("deliver_as")
                    else None,
                    # replies to a requester on this node find it without help
                    reply_via if reply_via and reply_via != node_name else answers_via,
                    from_peer=peer,
                    rerouted=msg.rerouted,
                )
            except InvalidSubjectError as exc:
                log.warning("bad message from peer", peer=peer, error=str(exc))


class _RouteServicer(route_pb2_grpc.RouteServicer):
    def __init__(self, mesh: RouteMesh) -> None:
        self._mesh = mesh

    async def Connect(  # the name gRPC generates from route.proto
        self, request_iterator: AsyncIterator[route_pb2.Frame], context: grpc.aio.ServicerContext
    ) -> None:
        # A coroutine (not a generator) handler reads and writes through `context`.
        await self._mesh.serve(context)


def add_route_servicer(server: grpc.aio.Server, mesh: RouteMesh) -> None:
    """Serve the route mesh on `server` (the node's one gRPC server, shared with Raft)."""
    route_pb2_grpc.add_RouteServicer_to_server(_RouteServicer(mesh), server)


# subject, reply, headers, payload, queues, deliver_as, reply_via, rerouted
_QueuedMessage = tuple[str, str | None, bytes | None, bytes, Sequence[str], str | None, str | None, bool]
# a request sent and not yet confirmed: the ping whose pong confirms it, subject, reply, headers,
# payload, reply_via
_Unconfirmed = tuple[int, str, str, bytes | None, bytes, str | None]


class _PeerLink:
    """Our call to one peer: dial, send batches, measure RTT, redial when it breaks."""

    def __init__(
        self, mesh: RouteMesh, name: str, channel: grpc.aio.Channel, call_metadata: tuple[tuple[str, str], ...]
    ) -> None:
        self.mesh = mesh
        self.name = name
        self.stub = route_pb2_grpc.RouteStub(channel)
        self.call_metadata = call_metadata
        self.connected = False
        # Set from the moment the interest snapshot is taken, so no change after it is missed.
        self.session_open = False
        self.rtt: float | None = None
        self.messages: list[_QueuedMessage] = []
        self.queued_bytes = 0
        self.frames_sent = 0
        self.messages_sent = 0
        self.interest: dict[tuple[str, str | None], int] = {}
        self.wake = asyncio.Event()
        self._redial = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._nonces = itertools.count(1)
        self._pings: dict[int, float] = {}
        self._last_pong = 0.0
        self._ping_due = 0
        # the last ping written, and the requests sent that no pong has confirmed yet (oldest first)
        self._last_ping_sent = 0
        self.unconfirmed: deque[_Unconfirmed] = deque()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"route-to-{self.name}")

    async def stop(self) -> None:
        task = self._task
        if task is not None:
            # Python 3.11's wait_for can swallow a cancellation that lands as its inner read
            # completes (the hello's answer): cancel again until the task has really ended.
            while not task.done():
                task.cancel()
                await asyncio.wait([task], timeout=1.0)
            with contextlib.suppress(asyncio.CancelledError):
                await task
            self._task = None
        self._disconnected(hand_back=False)  # this node is stopping: nobody to hand a request to

    def redial_now(self) -> None:
        """Cut short the wait before the next dial."""
        self._redial.set()

    async def _run(self) -> None:
        low, high = self.mesh.reconnect_delay
        delay = low
        while True:
            try:
                await self._session()
            except asyncio.CancelledError:
                raise
            except grpc.aio.AioRpcError as exc:
                log.debug("route to peer failed", peer=self.name, code=exc.code().name)
            except (TimeoutError, ConnectionError, asyncio.InvalidStateError) as exc:
                # InvalidStateError: grpc.aio's answer to a write on a call that already ended
                log.debug("route to peer failed", peer=self.name, error=repr(exc))
            except Exception:
                # Whatever else ends a call, this link must redial: a dead task here would leave the
                # peer without this node's interest for good (its clients: "no responders").
                log.exception("route to peer failed unexpectedly", peer=self.name)
            if self.connected:
                delay = low
            self._disconnected()
            self._redial.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._redial.wait(), delay)
            delay = min(delay * 2, high)

    def _disconnected(self, hand_back: bool = True) -> None:
        was_connected, self.connected = self.connected, False
        lost = self._lost_requests() if hand_back else []
        if was_connected:
            log.info(
                "route to peer down",
                peer=self.name,
                frames_sent=self.frames_sent,
                messages_sent=self.messages_sent,
            )
            self.mesh._link_down(self.name)
        self.session_open = False
        self.messages.clear()
        self.queued_bytes = 0
        self.interest.clear()
        self._pings.clear()
        self.unconfirmed.clear()
        self.mesh._link_drained(self.name)
        self.mesh._set_peer_url(self.name, None)
        if lost:
            # after _link_down: the peer's interest no longer counts, so they wait for the next server
            self.mesh.router.lost_in_transit(lost)

    def _lost_requests(self) -> list[tuple[str, str, bytes | None, bytes, str | None]]:
        """The requests this call may not have delivered: sent and not confirmed, or never sent."""
        lost = [
            (subject, reply, headers, payload, via) for _, subject, reply, headers, payload, via in self.unconfirmed
        ]
        prefixes = self.mesh.router.lost_prefixes
        if prefixes:
            lost.extend(
                (subject, reply, headers, payload, via)
                for subject, reply, headers, payload, _, _, via, _ in self.messages
                if reply and subject.startswith(prefixes)
            )
        return lost

    async def _session(self) -> None:
        mesh = self.mesh
        loop = asyncio.get_running_loop()
        session = secrets.token_hex(8)
        # wait_for_ready: to a peer not listening yet (starting, restarting, cut off) the call waits for the
        # channel to connect (its own backoff is at most a quarter second, raft/transport.py) instead of
        # failing at once and leaving this link asleep for its own, longer backoff after the peer is back
        call = self.stub.Connect(metadata=self.call_metadata, wait_for_ready=True)
        try:
            snapshot = [_interest_pb(s, q, c) for s, q, c in mesh.router.local_interest()]
            self.interest.clear()
            self.session_open = True
            hello = route_pb2.Hello(
                node=mesh.node_name, client_url=mesh.client_url, session=session, labels=mesh.labels
            )
            await call.write(route_pb2.Frame(hello=hello, interest=snapshot))
            answer = await asyncio.wait_for(call.read(), mesh.ping_timeout)
            if answer is grpc.aio.EOF or not answer.HasField("hello"):
                raise ConnectionError("peer closed the route without a hello")
            self.connected = True
            mesh._link_up(self.name)
            self._last_pong = loop.time()
            self._ping_due = 0
            log.info("route to peer up", peer=self.name)
            mesh._peer_labels[self.name] = tuple(answer.hello.labels)
            mesh._set_peer_url(self.name, answer.hello.client_url)
            reader = loop.create_task(self._read(call))
            pinger = loop.create_task(self._ping_loop())
            try:
                await self._write_loop(call, reader)
            finally:
                reader.cancel()
                pinger.cancel()
        finally:
            call.cancel()

    async def _write_loop(self, call: grpc.aio.StreamStreamCall, reader: asyncio.Task[None]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self.wake.wait()
            self.wake.clear()
            if reader.done():
                reader.result()
                raise ConnectionError("peer ended the route")
            if loop.time() - self._last_pong > self.mesh.ping_timeout:
                raise TimeoutError(f"no pong from {self.name} for {self.mesh.ping_timeout}s")
            while self.interest or self.messages or self._ping_due:
                # The peer may have ended the call before our reader was scheduled to see it.
                if call.done():
                    raise ConnectionError("peer ended the route")
                await call.write(self._next_frame(loop.time()))
                if self.queued_bytes <= QUEUE_LOW_WATER:
                    self.mesh._link_drained(self.name)

    def _next_frame(self, now: float) -> route_pb2.Frame:
        frame = route_pb2.Frame()
        if self.interest:
            frame.interest.extend(_interest_pb(s, q, c) for (s, q), c in self.interest.items())
            self.interest.clear()
        # the pong that confirms this frame's requests: its own ping's, else the next one's (the peer
        # answers a ping after delivering the frame that carries it, and pongs come in order)
        confirmed_by = self._last_ping_sent + 1
        if self._ping_due:
            frame.ping = confirmed_by = self._last_ping_sent = self._ping_due
            self._pings[self._ping_due] = now
            self._ping_due = 0
        queued = self.messages
        if queued:
            size = 0
            taken = 0
            out = frame.messages
            kept = self.mesh.router.lost_prefixes
            for subject, reply, headers, payload, queues, deliver_as, reply_via, rerouted in queued:
                if taken and size + len(payload) > MAX_FRAME_BYTES:
                    break
                msg = out.add(subject=encode_token(subject), payload=payload)
                if reply:
                    msg.reply = encode_token(reply)
                    if kept and subject.startswith(kept):
                        self._keep_unconfirmed((confirmed_by, subject, reply, headers, payload, reply_via))
                if headers is not None:
                    msg.headers = headers
                if queues:
                    msg.queues.extend(encode_token(q) for q in queues)
                if deliver_as is not None:
                    msg.deliver_as = encode_token(deliver_as)
                if reply_via is not None:
                    msg.reply_via = reply_via
                if rerouted:
                    msg.rerouted = True
                size += len(payload) + (len(headers) if headers else 0) + len(subject)
                taken += 1
            del queued[:taken]
            self.queued_bytes -= size
            self.messages_sent += taken
        self.frames_sent += 1
        return frame

    def _keep_unconfirmed(self, request: _Unconfirmed) -> None:
        unconfirmed = self.unconfirmed
        unconfirmed.append(request)
        if len(unconfirmed) > MAX_UNCONFIRMED:
            unconfirmed.popleft()

    def _confirmed(self, ping: int) -> None:
        """The peer answered `ping`: it has delivered every request sent up to the frame carrying it."""
        unconfirmed = self.unconfirmed
        while unconfirmed and unconfirmed[0][0] <= ping:
            unconfirmed.popleft()

    async def _read(self, call: grpc.aio.StreamStreamCall) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                frame = await call.read()
                if frame is grpc.aio.EOF:
                    return
                if frame.pong:
                    self._confirmed(frame.pong)
                    sent = self._pings.pop(frame.pong, None)
                    now = loop.time()
                    self._last_pong = now
                    if sent is not None:
                        sample = now - sent
                        self.rtt = (
                            sample if self.rtt is None else self.rtt + RTT_SMOOTHING * (sample - self.rtt)
                        )
        finally:
            self.wake.set()

    async def _ping_loop(self) -> None:
        while True:
            self._ping_due = next(self._nonces)
            self.wake.set()
            await asyncio.sleep(self.mesh.ping_interval)


def _interest_pb(subject: str, queue: str | None, count: int) -> route_pb2.Interest:
    return route_pb2.Interest(
        subject=encode_token(subject), queue=encode_token(queue) if queue else b"", weight=count
    )
