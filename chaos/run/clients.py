"""Clients pinned to one node each, and what an error says about an operation's outcome.

A pinned client reconnects to its own node forever and never to another: a
client that moved to a healthy node would hide a node that stopped serving.
nats-py adds the servers a node announces (INFO `connect_urls`) to its pool
and has no option to ignore them, so they are taken out again.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

import nats
from nats.aio.client import Client as NATS
from nats.errors import NoRespondersError
from nats.js.client import JetStreamContext
from nats.js.errors import APIError, KeyWrongLastSequenceError

from chaos.check.history import OpType
from cluster.runtime.workers import node_of

# a compare-and-set that found another revision (nats-server's JSStreamWrongLastSequence codes)
WRONG_LAST_SEQUENCE = (10071, 10164)


@dataclass(slots=True)
class PinnedClient:
    node: str
    url: str
    nc: NATS
    js: JetStreamContext


def _forget_discovered(nc: NATS) -> None:
    # nats-py's pool is private; its discovered entries are the only way off the pinned node
    pool = getattr(nc, "_server_pool", None)
    if pool is not None:
        nc._server_pool = [server for server in pool if not getattr(server, "discovered", False)]  # type: ignore[attr-defined]


async def connect_pinned(node: str, url: str, op_timeout: float) -> PinnedClient:
    holder: dict[str, NATS] = {}

    async def discovered() -> None:
        if "nc" in holder:
            _forget_discovered(holder["nc"])

    async def quiet(_exc: Exception) -> None:
        return None  # disconnections are the point of the run; outcomes are recorded per operation

    nc = await nats.connect(
        servers=[url],
        name=f"chaos-{node}",
        connect_timeout=2,
        allow_reconnect=True,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.25,
        dont_randomize=True,
        discovered_server_cb=discovered,
        error_cb=quiet,
    )
    holder["nc"] = nc
    _forget_discovered(nc)
    return PinnedClient(node=node, url=url, nc=nc, js=nc.jetstream(timeout=op_timeout))


async def connect_all(urls: dict[str, str], op_timeout: float, timeout: float = 30.0) -> list[PinnedClient]:
    async def one(node: str, url: str) -> PinnedClient:
        async with asyncio.timeout(timeout):
            while True:
                try:
                    return await connect_pinned(node, url, op_timeout)
                except (TimeoutError, OSError, nats.errors.NoServersError):
                    await asyncio.sleep(0.5)

    return list(await asyncio.gather(*(one(node, url) for node, url in sorted(urls.items()))))


def outcome_of(exc: BaseException) -> tuple[OpType, str]:
    """Whether an operation that raised certainly did not happen (fail) or may have (info), and why.

    Only two answers are definite: nobody received the request (no responders), and a compare-and-set
    refused for a wrong last sequence. A timeout, a lost connection or any other error leaves the outcome
    unknown: the request may have been committed after all.
    """
    if isinstance(exc, NoRespondersError):
        return OpType.FAIL, "no responders"
    if isinstance(exc, KeyWrongLastSequenceError):  # nats-py's KV raises it for either code, without the code
        return OpType.FAIL, "wrong last sequence"
    if isinstance(exc, APIError) and exc.err_code in WRONG_LAST_SEQUENCE:
        return OpType.FAIL, f"wrong last sequence ({exc.err_code})"
    return OpType.INFO, _describe(exc)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, APIError):
        return f"api error {exc.code}/{exc.err_code}: {exc.description}"
    text = str(exc)
    return type(exc).__name__ + (f": {text}" if text else "")


async def close_all(clients: list[PinnedClient]) -> None:
    for client in clients:
        with contextlib.suppress(Exception):  # a node may be gone; closing is best effort
            await asyncio.wait_for(client.nc.close(), 5)


def node_of_reply(headers: dict[str, Any] | None, fallback: str) -> str:
    """The node that answered a Direct Get (jetraft's `Jetraft-Node` header names the member: the node,
    or the worker of it that answered), else the one asked."""
    member = (headers or {}).get("Jetraft-Node")
    return node_of(str(member)) if member else fallback
