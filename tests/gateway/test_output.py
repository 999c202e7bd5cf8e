"""When a client's buffered output is written: at the end of the work that produced it, else on the loop's next turn."""

from __future__ import annotations

import asyncio

from gateway import route_pb2
from gateway.output import OutputFlusher
from gateway.protocol import encode_token
from gateway.router import Router
from gateway.routes import RouteMesh
from gateway.server import GatewayServer
from tests.gateway.fake_client import connect


class Buffered:
    def __init__(self) -> None:
        self.flushes = 0

    def flush_output(self) -> None:
        self.flushes += 1


async def test_flush_writes_everything_added_once() -> None:
    flusher = OutputFlusher()
    first, second = Buffered(), Buffered()
    flusher.add(first)
    flusher.add(second)
    flusher.flush()
    flusher.flush()
    assert (first.flushes, second.flushes) == (1, 1)


async def test_output_nobody_flushes_goes_out_on_the_next_turn() -> None:
    flusher = OutputFlusher()
    waiting = Buffered()
    flusher.add(waiting)
    assert waiting.flushes == 0
    await asyncio.sleep(0)
    assert waiting.flushes == 1
    # the turn's own flush is spent: a later add schedules another
    again = Buffered()
    flusher.add(again)
    await asyncio.sleep(0)
    assert again.flushes == 1


async def test_a_publish_reaches_the_subscriber_before_the_loop_turns() -> None:
    server = GatewayServer(Router(), name="t1")
    subscriber, subscriber_transport = connect(server, 1)
    publisher, _ = connect(server, 2)
    subscriber.data_received(b"SUB greet 7\r\n")
    publisher.data_received(b"PUB greet 2\r\nhi\r\nPUB greet 3\r\nyou\r\n")
    # written within the publisher's read, both messages in one write
    assert subscriber_transport.writes == [b"MSG greet 7 2\r\nhi\r\nMSG greet 7 3\r\nyou\r\n"]


async def test_an_internal_reply_is_written_on_the_next_turn() -> None:
    router = Router()
    server = GatewayServer(router, name="t1")
    subscriber, transport = connect(server, 1)
    subscriber.data_received(b"SUB status 1\r\n")
    router.publish("status", b"one", None, None)
    router.publish("status", b"two", None, None)
    assert transport.writes == []
    await asyncio.sleep(0)
    assert transport.writes == [b"MSG status 1 3\r\none\r\nMSG status 1 3\r\ntwo\r\n"]


async def test_a_routed_message_reaches_the_subscriber_within_its_frame() -> None:
    router = Router()
    server = GatewayServer(router, name="t1")
    subscriber, transport = connect(server, 1)
    subscriber.data_received(b"SUB _INBOX.a.* 4\r\n")
    mesh = RouteMesh(router, "t1", server.client_url)
    frame = route_pb2.Frame()
    frame.messages.add(subject=encode_token("_INBOX.a.1"), payload=b"ok")
    mesh._apply("t2", frame)
    assert transport.writes == [b"MSG _INBOX.a.1 4 2\r\nok\r\n"]
