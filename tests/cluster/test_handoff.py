"""Which leader requests lost on a failed link are asked again of the next leader (cluster/api/handoff.py):
the peer may have read the request before it died, so only a request that merely reads is sent twice."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import cast

from cluster.api.handoff import hand_on_when_served, safe_to_ask_twice
from cluster.runtime.context import NodeContext
from cluster.runtime.leader_wait import LEADER_WAIT
from gateway.router import Message, Router


def test_only_reads_are_asked_twice() -> None:
    reads = [
        "$JSR.M.INFO.S",
        "$JSR.M.NAMES",
        "$JSR.M.LIST",
        "$JSR.M.ACCOUNT_INFO",
        "$JSR.S.S.INFO",
        "$JSR.S.S.MSG_GET",
        "$JSR.S.S.CREATE_RESULT",
        "$JSR.S.S.LIST_ENTRY",
        "$JSR.MC.INFO.S.C",
        "$JSR.MC.NAMES.S",
        "$JSR.MC.LIST.S",
        "$JSR.C.S.C.INFO",
        "$JSR.C.S.C.CREATE_RESULT",
        "$JSR.C.S.C.LIST_ENTRY",
    ]
    writes = [
        "$JSR.M.CREATE.S",
        "$JSR.M.UPDATE.S",
        "$JSR.M.DELETE.S",
        "$JSR.M.PURGE.S",
        "$JSR.S.S.PURGE",
        "$JSR.S.S.MSG_DELETE",
        "$JSR.S.S.LEADER_STEPDOWN",
        "$JSR.S.S.APPLY_UPDATE",
        "$JSR.MC.CREATE.S.C",
        "$JSR.MC.DURABLE.CREATE.S.C",
        "$JSR.MC.DELETE.S.C",
        "$JSR.MC.MSG.NEXT.S.C",
        "$JSR.C.S.C.NEXT",
        "$JSR.C.S.C.DELETE",
        "$JSR.S.S.NOT_AN_OP",
    ]
    assert [s for s in reads if not safe_to_ask_twice(s)] == []
    assert [s for s in writes if safe_to_ask_twice(s)] == []


async def test_a_request_handed_on_outwaits_a_slow_election() -> None:
    """A read lost with a dead meta leader's link waits for the next leader longer than the API entry
    waits before its 503: an election on a loaded machine can take longer than that, and giving up
    here leaves the client to its timeout."""
    router = Router()
    received: list[Message] = []

    async def elect_late() -> None:
        await asyncio.sleep(LEADER_WAIT + 0.3)
        router.subscribe("$JSR.M.INFO.*", received.append)

    election = asyncio.create_task(elect_late())
    ctx = cast(NodeContext, SimpleNamespace(router=router))
    await hand_on_when_served(ctx, Message("$JSR.M.INFO.S", "_INBOX.r", None, b""), None)
    await election
    assert [(m.subject, m.reply) for m in received] == [("$JSR.M.INFO.S", "_INBOX.r")]
