"""Handing a request on to a leader that may be between terms.

A stream or consumer leader that just stepped down or failed leaves its
API subjects unserved until the next leader is elected and its interest
has spread (elections take 1-2 s). A request that meets that gap waits a
bounded time for the new leader instead of failing at once; only then
does the client get JetStream's 503.
"""

from __future__ import annotations

import asyncio

from gateway.router import Router

LEADER_WAIT = 3.0


async def wait_for_interest(router: Router, subject: str, timeout: float = LEADER_WAIT) -> bool:
    """Whether somebody serves `subject` within `timeout` seconds; returns as soon as one subscribes."""
    if router.has_interest(subject):
        return True
    served: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    cancel = router.call_when_interest(subject, lambda: served.done() or served.set_result(None))
    try:
        await asyncio.wait_for(served, max(timeout, 0.0))
    except TimeoutError:
        return False
    finally:
        cancel()
    return True


async def pass_on_when_served(
    router: Router, subject: str, payload: bytes, reply: str | None, headers: bytes | None
) -> bool:
    """`Router.pass_on`, waiting for a server of `subject` if there is none yet; False if none came."""
    if router.pass_on(subject, payload, reply, headers):
        return True
    if not await wait_for_interest(router, subject):
        return False
    return router.pass_on(subject, payload, reply, headers) > 0
