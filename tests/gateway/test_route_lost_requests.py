"""Requests a link was given and its peer never confirmed come back to the router when the link fails.

A peer answers each ping after it has delivered everything sent before it, so a pong confirms what
was sent up to that ping. A request under one of the router's `lost_prefixes` that no pong confirmed
when the call ended (the peer killed, or cut off, with it unread), or that was still queued, goes to
the router's `on_lost_in_transit` handler, to be asked of whoever serves it next (cluster/api/
handoff.py). These drive a link with fake gRPC calls, so the order of writes, pongs and the call's end
is the same on every run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc

from gateway import route_pb2
from gateway.protocol import decode_token
from gateway.router import Message, Router
from gateway.routes import RouteMesh


class _Peer:
    """Our call to a peer that answers the hello, pongs only while `pongs` is set, and ends the call
    when told (`end`), as a killed peer's socket does."""

    def __init__(self, pongs: bool) -> None:
        self.pongs = pongs
        self.writes: list[route_pb2.Frame] = []
        self.written = asyncio.Event()
        self._inbox: asyncio.Queue[Any] = asyncio.Queue()
        self._answered = False
        self.ended = False

    async def write(self, frame: route_pb2.Frame) -> None:
        self.writes.append(frame)
        self.written.set()
        if frame.ping and self.pongs:
            self._inbox.put_nowait(route_pb2.Frame(pong=frame.ping))

    async def read(self) -> Any:
        if not self._answered:
            self._answered = True
            return route_pb2.Frame(hello=route_pb2.Hello(node="n2", client_url="nats://n2", session="s"))
        item = await self._inbox.get()
        if item is grpc.aio.EOF:
            self.ended = True
        return item

    def end(self) -> None:
        self._inbox.put_nowait(grpc.aio.EOF)

    def done(self) -> bool:
        return self.ended

    def cancel(self) -> bool:
        return True

    def sent(self, subject: str) -> bool:
        return any(decode_token(m.subject) == subject for f in self.writes for m in f.messages)


class _Channel:
    def __init__(self, call: _Peer) -> None:
        self.call = call

    def stream_stream(self, *_args: Any, **_kwargs: Any) -> Callable[..., Any]:
        return lambda **_options: self.call


async def _until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), timeout)


def _mesh(peer: _Peer, ping_interval: float) -> tuple[RouteMesh, list[tuple[str, str | None, str | None]]]:
    router = Router()
    lost: list[tuple[str, str | None, str | None]] = []

    def handler(msg: Message, via: str | None) -> None:
        lost.append((msg.subject, msg.reply, via))

    router.on_lost_in_transit("$JSR.", handler)
    mesh = RouteMesh(
        router, "n1", "nats://n1", ping_interval=ping_interval, ping_timeout=30, reconnect_delay=(30, 30)
    )
    mesh.add_peer("n2", _Channel(peer))  # type: ignore[arg-type]
    return mesh, lost


async def test_a_request_the_peer_never_confirmed_comes_back_when_the_call_ends() -> None:
    peer = _Peer(pongs=False)  # a frozen peer: it reads nothing, answers nothing
    mesh, lost = _mesh(peer, ping_interval=30)
    try:
        await _until(lambda: mesh.is_connected("n2"))
        mesh.forward("n2", "$JSR.M.INFO.S", "_INBOX.a.1", None, b"", ())
        mesh.forward("n2", "$JSR.S.S.INFO", "_INBOX.b.2", None, b"", (), reply_via="n3")
        mesh.forward("n2", "app.request", "_INBOX.c.3", None, b"", ())  # not a leader's subject
        mesh.forward("n2", "$JSR.M.INFO.T", None, None, b"", ())  # nobody waits for an answer
        await _until(lambda: peer.sent("$JSR.M.INFO.T"))
        assert lost == []
        peer.end()  # the peer is killed: its socket closes with the requests unread
        await _until(lambda: not mesh.is_connected("n2"))
        assert lost == [("$JSR.M.INFO.S", "_INBOX.a.1", None), ("$JSR.S.S.INFO", "_INBOX.b.2", "n3")]
    finally:
        await mesh.close()


async def test_a_request_a_pong_confirmed_does_not_come_back() -> None:
    peer = _Peer(pongs=True)
    mesh, lost = _mesh(peer, ping_interval=0.05)
    link = mesh._links["n2"]
    try:
        await _until(lambda: mesh.is_connected("n2"))
        mesh.forward("n2", "$JSR.M.INFO.S", "_INBOX.a.1", None, b"", ())
        await _until(lambda: peer.sent("$JSR.M.INFO.S"))
        # the pong of the next ping says the peer delivered it
        await _until(lambda: not link.unconfirmed)
        peer.end()
        await _until(lambda: not mesh.is_connected("n2"))
        assert lost == []
    finally:
        await mesh.close()


async def test_a_request_still_queued_when_the_call_ends_comes_back() -> None:
    peer = _Peer(pongs=True)
    mesh, lost = _mesh(peer, ping_interval=30)
    link = mesh._links["n2"]
    try:
        await _until(lambda: mesh.is_connected("n2"))
        mesh.forward("n2", "$JSR.MC.INFO.S.C", "_INBOX.a.1", None, b"", ())
        link._disconnected()  # before the write loop took it
        assert lost == [("$JSR.MC.INFO.S.C", "_INBOX.a.1", None)]
    finally:
        await mesh.close()


async def test_a_stopping_node_hands_nothing_back() -> None:
    peer = _Peer(pongs=False)
    mesh, lost = _mesh(peer, ping_interval=30)
    try:
        await _until(lambda: mesh.is_connected("n2"))
        mesh.forward("n2", "$JSR.M.INFO.S", "_INBOX.a.1", None, b"", ())
        await _until(lambda: peer.sent("$JSR.M.INFO.S"))
    finally:
        await mesh.close()
    assert lost == []

