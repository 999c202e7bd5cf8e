"""The route mesh's dialler keeps redialling, whatever way a call to a peer ends.

grpc.aio raises `asyncio.InvalidStateError` (not an `AioRpcError`) when a frame is
written to a call that has already finished: the peer ended it (a superseded
session, a silent route cut by the peer's watchdog, a keepalive failure) while
our reader had not yet been scheduled to notice. Under load the writer is busy
between two reads, so this happens on a heal. It used to end the link's task
for good, with the link still marked connected: the peer never again received
this node's interest (its clients got "no responders" for every stream this
node leads) while Raft, on its own calls, looked healthy.

These tests drive `_PeerLink` with fake gRPC calls that end exactly that way,
so the sequence is the same on every run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from gateway import route_pb2
from gateway.protocol import decode_token
from gateway.router import Router
from gateway.routes import RouteMesh, add_route_servicer
from local.ports import free_port
from raft.transport import grpc_channel_options


class _FinishedUnderfoot:
    """A call whose peer answers the hello, then ends it: every later write raises InvalidStateError
    (as grpc.aio does for a finished call) while the read never returns (the reader not yet scheduled)."""

    def __init__(self) -> None:
        self.writes: list[route_pb2.Frame] = []
        self._answered = False
        self.cancelled = False
        # grpc.aio says done() once the status is in; a write already under way still raises
        self.reports_running = False

    async def write(self, frame: route_pb2.Frame) -> None:
        if self.writes:
            raise asyncio.InvalidStateError("RPC is already finished.")
        self.writes.append(frame)

    async def read(self) -> Any:
        if not self._answered:
            self._answered = True
            return route_pb2.Frame(hello=route_pb2.Hello(node="n2", client_url="nats://n2", session="x"))
        await asyncio.Event().wait()

    def done(self) -> bool:
        return bool(self.writes) and not self.reports_running

    def cancel(self) -> bool:
        self.cancelled = True
        return True


class _Healthy:
    """A call that answers the hello and pongs, and records every frame written."""

    def __init__(self) -> None:
        self.writes: list[route_pb2.Frame] = []
        self.written = asyncio.Event()
        self._pongs: asyncio.Queue[int] = asyncio.Queue()
        self._answered = False

    async def write(self, frame: route_pb2.Frame) -> None:
        self.writes.append(frame)
        self.written.set()
        if frame.ping:
            self._pongs.put_nowait(frame.ping)

    async def read(self) -> Any:
        if not self._answered:
            self._answered = True
            return route_pb2.Frame(hello=route_pb2.Hello(node="n2", client_url="nats://n2", session="y"))
        return route_pb2.Frame(pong=await self._pongs.get())

    def done(self) -> bool:
        return False

    def cancel(self) -> bool:
        return True


class _Channel:
    """Enough of a grpc.aio.Channel for RouteStub: each Connect() takes the next prepared call."""

    def __init__(self, calls: list[Any]) -> None:
        self.calls = calls
        self.dialled = 0
        self.dialled_event = asyncio.Event()

    def stream_stream(self, *_args: Any, **_kwargs: Any) -> Callable[[], Any]:
        def connect(**_call_options: Any) -> Any:  # metadata: the cluster secret
            call = self.calls[self.dialled]
            self.dialled += 1
            self.dialled_event.set()
            return call

        return connect


def _subjects(frame: route_pb2.Frame) -> set[str]:
    return {decode_token(i.subject) for i in frame.interest if i.weight > 0}


@pytest.mark.parametrize("seen_done", [True, False], ids=["done-before-the-write", "done-during-the-write"])
async def test_a_call_finished_under_a_write_is_redialled_and_the_interest_resent(seen_done: bool) -> None:
    router = Router()
    router.subscribe("orders.>", lambda _msg: None)
    finished, healthy = _FinishedUnderfoot(), _Healthy()
    finished.reports_running = not seen_done
    channel = _Channel([finished, healthy])
    mesh = RouteMesh(router, "n1", "nats://n1", ping_interval=0.05, reconnect_delay=(0.01, 0.05))
    mesh.add_peer("n2", channel)  # type: ignore[arg-type]
    try:
        # the first call's hello carried the snapshot; the next write finds the call finished
        await asyncio.wait_for(healthy.written.wait(), 5)
        assert channel.dialled == 2 and finished.cancelled
        hello = healthy.writes[0]
        assert hello.hello.node == "n1" and _subjects(hello) == {"orders.>"}
        # and the new call carries what changes after it
        router.subscribe("$JSR.S.ORDERS.>", lambda _msg: None)

        async def sent_later() -> None:
            while not any("$JSR.S.ORDERS.>" in _subjects(f) for f in healthy.writes[1:]):
                healthy.written.clear()
                await healthy.written.wait()

        await asyncio.wait_for(sent_later(), 5)
        assert mesh.is_connected("n2")
    finally:
        await mesh.close()


async def test_an_unexpected_error_on_a_call_is_redialled_too() -> None:
    class _Broken(_FinishedUnderfoot):
        async def write(self, frame: route_pb2.Frame) -> None:
            if self.writes:
                raise grpc.aio.InternalError("something gRPC did not expect")
            self.writes.append(frame)

    router = Router()
    healthy = _Healthy()
    channel = _Channel([_Broken(), healthy])
    mesh = RouteMesh(router, "n1", "nats://n1", ping_interval=0.05, reconnect_delay=(0.01, 0.05))
    mesh.add_peer("n2", channel)  # type: ignore[arg-type]
    try:
        await asyncio.wait_for(healthy.written.wait(), 5)
        assert channel.dialled == 2
    finally:
        await mesh.close()


class _AnswersWhenLetThrough(_Healthy):
    """A call whose peer answers the hello only once `let_through` is set: our call is still dialling."""

    def __init__(self) -> None:
        super().__init__()
        self.let_through = asyncio.Event()

    async def read(self) -> Any:
        if not self._answered:
            await self.let_through.wait()
        return await super().read()


class _InboundCall:
    """The servicer's side of the peer's call to us: its hello with its interest, then silence."""

    def __init__(self, first: route_pb2.Frame) -> None:
        self._frames: asyncio.Queue[Any] = asyncio.Queue()
        self._frames.put_nowait(first)

    async def read(self) -> Any:
        return await self._frames.get()

    async def write(self, _frame: route_pb2.Frame) -> None:
        return None

    async def abort(self, *_args: Any) -> None:
        raise AssertionError("the hello was refused")


async def test_a_peers_interest_counts_only_while_our_own_call_to_it_is_up() -> None:
    """The peer's call to us is up before ours to it: forwarding on its interest then would drop the
    message in a link still dialling; the interest counts from the moment ours is up, and stops counting
    (kept for the next call) when ours goes down."""
    router = Router()
    dialling = _AnswersWhenLetThrough()
    channel = _Channel([dialling, _AnswersWhenLetThrough()])
    mesh = RouteMesh(
        router, "n1", "nats://n1", ping_interval=0.05, ping_timeout=30, reconnect_delay=(0.01, 0.05)
    )
    mesh.add_peer("n2", channel)  # type: ignore[arg-type]
    hello = route_pb2.Frame(
        hello=route_pb2.Hello(node="n2", client_url="nats://n2", session="s"),
        interest=[route_pb2.Interest(subject=b"$JSR.M.>", weight=1)],
    )
    inbound = asyncio.create_task(mesh.serve(_InboundCall(hello)))  # type: ignore[arg-type]
    try:
        await asyncio.wait_for(channel.dialled_event.wait(), 5)
        while "n2" not in mesh._inbound_sessions:
            await asyncio.sleep(0.01)
        assert not router.has_interest("$JSR.M.STREAM_DELETE.S")
        dialling.let_through.set()
        await asyncio.wait_for(dialling.written.wait(), 5)
        while not mesh.is_connected("n2"):
            await asyncio.sleep(0.01)
        assert router.has_interest("$JSR.M.STREAM_DELETE.S")
        # our call breaks: its interest stops counting, and counts again once we have redialled
        channel.dialled_event.clear()
        dialling.cancel()
        mesh._links["n2"]._task.cancel()  # type: ignore[union-attr]
        mesh._links["n2"]._disconnected()
        assert not router.has_interest("$JSR.M.STREAM_DELETE.S")
        mesh._links["n2"].start()
        channel.calls[1].let_through.set()
        while not mesh.is_connected("n2"):
            await asyncio.sleep(0.01)
        assert router.has_interest("$JSR.M.STREAM_DELETE.S")
    finally:
        inbound.cancel()
        await mesh.close()


async def test_a_call_from_a_peer_cuts_short_our_backoff_before_redialling_it() -> None:
    """A restarted peer dials us at once; our call to it, waiting out a backoff of seconds, redials now."""

    class _Refused(_FinishedUnderfoot):
        async def write(self, frame: route_pb2.Frame) -> None:
            raise grpc.aio.UsageError("connection refused")

    router = Router()
    channel = _Channel([_Refused(), _Healthy()])
    mesh = RouteMesh(router, "n1", "nats://n1", ping_interval=0.05, ping_timeout=30, reconnect_delay=(30, 30))
    mesh.add_peer("n2", channel)  # type: ignore[arg-type]
    hello = route_pb2.Frame(hello=route_pb2.Hello(node="n2", client_url="nats://n2", session="s"))
    try:
        await asyncio.wait_for(channel.dialled_event.wait(), 5)
        channel.dialled_event.clear()
        inbound = asyncio.create_task(mesh.serve(_InboundCall(hello)))  # type: ignore[arg-type]
        await asyncio.wait_for(channel.dialled_event.wait(), 5)  # not 30 s
        assert channel.dialled == 2
        inbound.cancel()
    finally:
        await mesh.close()


async def test_an_answer_to_a_peer_whose_call_we_are_still_dialling_goes_out_once_it_is_up() -> None:
    """A peer that has just started (or healed) dials us and sends a request at once, while our own call
    to it is still dialling: the answer can only travel on our call. It used to be dropped (the peer's
    reply interest does not count until our call is up), and the requester waited out its timeout; the
    first request of a freshly started cluster was lost that way. It now waits in our call's queue."""
    router = Router()
    router.subscribe("svc", lambda msg: router.publish(msg.reply or "", b"answer"))
    dialling = _AnswersWhenLetThrough()
    channel = _Channel([dialling])
    mesh = RouteMesh(
        router, "n1", "nats://n1", ping_interval=0.05, ping_timeout=30, reconnect_delay=(0.01, 0.05)
    )
    mesh.add_peer("n2", channel)  # type: ignore[arg-type]
    request = route_pb2.Frame(
        hello=route_pb2.Hello(node="n2", client_url="nats://n2", session="s"),
        interest=[route_pb2.Interest(subject=b"_INBOX.n2.>", weight=1)],
        messages=[route_pb2.RoutedMessage(subject=b"svc", reply=b"_INBOX.n2.1", payload=b"question")],
    )
    try:
        await asyncio.wait_for(channel.dialled_event.wait(), 5)
        inbound = asyncio.create_task(mesh.serve(_InboundCall(request)))  # type: ignore[arg-type]
        while "n2" not in mesh._inbound_sessions:
            await asyncio.sleep(0.01)
        assert not mesh.is_connected("n2") and mesh.dropped_messages == 0
        dialling.let_through.set()

        def answers() -> list[tuple[str, bytes]]:
            return [(decode_token(m.subject), m.payload) for f in dialling.writes for m in f.messages]

        async def answered() -> None:
            while not answers():
                dialling.written.clear()
                await dialling.written.wait()

        await asyncio.wait_for(answered(), 5)
        assert answers() == [("_INBOX.n2.1", b"answer")]
        inbound.cancel()
    finally:
        await mesh.close()


async def test_a_peer_that_starts_listening_later_is_reached_without_waiting_out_our_backoff() -> None:
    """Our first call to a peer not listening yet waits for the channel to connect (wait_for_ready) instead
    of failing at once and sleeping out the link's backoff: a freshly started cluster's routes come up as
    soon as each node listens, not up to two backoffs later (its first answers were lost meanwhile)."""
    port = free_port()
    router = Router()
    mesh = RouteMesh(router, "n1", "nats://n1", ping_interval=0.05, ping_timeout=30, reconnect_delay=(60, 60))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=grpc_channel_options())
    mesh.add_peer("n2", channel)
    peer_mesh = RouteMesh(Router(), "n2", "nats://n2", ping_interval=0.05, ping_timeout=30)
    server = grpc.aio.server()
    add_route_servicer(server, peer_mesh)
    try:
        await asyncio.sleep(0.5)  # our first dial finds nobody listening
        assert not mesh.is_connected("n2")
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10  # far less than the 60 s backoff a failed first dial would sleep
        while not mesh.is_connected("n2"):
            assert loop.time() < deadline, "our call to n2 did not connect once it listened"
            await asyncio.sleep(0.05)
    finally:
        await mesh.close()
        await peer_mesh.close()
        await server.stop(0)
        await channel.close()
