"""A request handed on to a leader between terms waits for the next one, a bounded time."""

from __future__ import annotations

import asyncio

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
