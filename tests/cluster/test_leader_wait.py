"""A request handed on to a leader between terms waits for the next one, a bounded time."""

from __future__ import annotations

import asyncio

from cluster.runtime.internal_requests import InternalRequester
from cluster.runtime.leader_wait import pass_on_when_served, wait_for_interest
from gateway.router import Message, Router


async def test_a_request_in_the_gap_between_leaders_reaches_the_next_one() -> None:
    router = Router()
    received: list[Message] = []

    async def elect_later() -> None:
        await asyncio.sleep(0.1)
        router.subscribe("$JSC.S.INFO", received.append)

    election = asyncio.create_task(elect_later())
    assert await pass_on_when_served(router, "$JSC.S.INFO", b"{}", "_INBOX.r", None)
    await election
    assert [(m.subject, m.payload, m.reply) for m in received] == [("$JSC.S.INFO", b"{}", "_INBOX.r")]


async def test_a_request_served_at_once_is_passed_on_once() -> None:
    router = Router()
    received: list[Message] = []
    router.subscribe("$JSC.S.INFO", received.append)
    assert await pass_on_when_served(router, "$JSC.S.INFO", b"", "_INBOX.r", None)
    assert len(received) == 1


async def test_no_leader_within_the_wait_is_reported() -> None:
    router = Router()
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert not await wait_for_interest(router, "$JSC.S.INFO", timeout=0.2)
    assert 0.2 <= loop.time() - started < 1.0


# A new group's leader is elected within a millisecond or two on one node: the wait has to end when its
# subscription arrives, not at the next poll (a stream or consumer create waits for it every time).
LOOP_TURNS = 5


async def _turns(n: int = LOOP_TURNS) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_the_wait_ends_in_the_loop_turn_a_local_server_subscribes() -> None:
    router = Router()
    waiting = asyncio.create_task(wait_for_interest(router, "$JSR.S.ORDERS.INFO", timeout=5.0))
    await _turns()
    assert not waiting.done()
    router.subscribe("$JSR.S.ORDERS.*", lambda _m: None)
    await _turns()
    assert waiting.done() and waiting.result() is True


async def test_the_wait_ends_in_the_loop_turn_a_peer_announces_a_server() -> None:
    router = Router()
    waiting = asyncio.create_task(wait_for_interest(router, "$JSR.S.ORDERS.INFO", timeout=5.0))
    await _turns()
    router.set_remote_interest("n2", "$JSR.S.ORDERS.>", None, 1)
    await _turns()
    assert waiting.done() and waiting.result() is True


async def test_interest_elsewhere_does_not_end_the_wait() -> None:
    router = Router()
    waiting = asyncio.create_task(wait_for_interest(router, "$JSR.S.ORDERS.INFO", timeout=0.2))
    await _turns()
    router.subscribe("$JSR.S.OTHER.*", lambda _m: None)
    router.set_remote_interest("n2", "$JSR.S.OTHER.>", None, 1)
    assert await waiting is False


async def test_a_request_nobody_answers_yet_is_answered_once_its_server_subscribes() -> None:
    router = Router()
    requester = InternalRequester(router, "n1")
    asking = asyncio.create_task(requester.request_when_answered("$JSR.S.ORDERS.CREATE_RESULT", b"1", 5.0))
    await _turns()  # the first try met no responders
    assert not asking.done()
    router.subscribe("$JSR.S.ORDERS.*", lambda m: router.publish(m.reply or "", b"created", None))
    await _turns(2 * LOOP_TURNS)
    assert asking.done() and asking.result().payload == b"created"
    requester.close()
