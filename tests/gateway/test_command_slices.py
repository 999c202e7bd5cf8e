"""A read carrying many commands is handled in slices, the rest of the node running in between."""

from __future__ import annotations

import asyncio

from gateway.connection import COMMANDS_PER_SLICE, COMMANDS_PER_WRITE
from gateway.router import Message, Router
from gateway.server import GatewayServer
from tests.gateway.fake_client import connect


async def test_a_long_read_is_handled_in_order_over_several_turns_with_reading_paused() -> None:
    router = Router()
    server = GatewayServer(router, name="t1")
    seen: list[bytes] = []
    router.subscribe("work", lambda msg: seen.append(msg.payload))
    publisher, transport = connect(server, 1)
    count = 2 * COMMANDS_PER_SLICE + 10
    publisher.data_received(b"".join(b"PUB work %d\r\n%d\r\n" % (len(str(i)), i) for i in range(count)))

    assert len(seen) == COMMANDS_PER_SLICE
    assert not transport.reading  # the rest waits in the parser, so no more is read for now
    # a command arriving meanwhile queues behind the ones already read
    publisher.data_received(b"PUB work 4\r\nlast\r\n")
    assert len(seen) == COMMANDS_PER_SLICE

    turns = 0
    while len(seen) < count + 1:
        await asyncio.sleep(0)
        turns += 1
        assert turns <= 5
    assert seen == [str(i).encode() for i in range(count)] + [b"last"]
    await asyncio.sleep(0)  # the last slice found nothing more
    assert transport.reading
    assert transport.pauses == 1


async def test_other_work_runs_between_slices() -> None:
    router = Router()
    server = GatewayServer(router, name="t1")
    order: list[str] = []

    def on_work(msg: Message) -> None:
        order.append("publish")
        if len(order) == 1:
            asyncio.get_running_loop().call_soon(order.append, "other")

    router.subscribe("work", on_work)
    publisher, _ = connect(server, 1)
    publisher.data_received(b"PUB work 0\r\n\r\n" * (COMMANDS_PER_SLICE + 1))
    for _ in range(3):
        await asyncio.sleep(0)
    # the callback scheduled by the first publish ran before the slice holding the last one
    assert order == ["publish"] * COMMANDS_PER_SLICE + ["other", "publish"]


async def test_a_short_read_is_handled_at_once() -> None:
    router = Router()
    server = GatewayServer(router, name="t1")
    seen: list[bytes] = []
    router.subscribe("work", lambda msg: seen.append(msg.payload))
    publisher, transport = connect(server, 1)
    publisher.data_received(b"PUB work 1\r\na\r\n" * COMMANDS_PER_SLICE)
    assert len(seen) == COMMANDS_PER_SLICE
    assert transport.pauses == 0


async def test_answers_within_a_slice_are_written_every_few_commands() -> None:
    router = Router()
    server = GatewayServer(router, name="t1")
    # a service answering at once, as a Direct Get responder on the client's node does
    router.subscribe("svc", lambda msg: router.publish(msg.reply or "", msg.payload))
    requester, transport = connect(server, 1)
    requester.data_received(b"SUB _INBOX.* 1\r\n")
    requests = 3 * COMMANDS_PER_WRITE + 2
    requester.data_received(b"".join(b"PUB svc _INBOX.%d 1\r\nx\r\n" % i for i in range(requests)))
    # the first answers left while later requests were still being handled, then the rest at the end
    assert [w.count(b"MSG _INBOX.") for w in transport.writes] == [COMMANDS_PER_WRITE] * 3 + [2]
