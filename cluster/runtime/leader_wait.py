"""Handing a request on to a leader that may be between terms.

A stream or consumer leader that just stepped down or failed leaves its
API subjects unserved until the next leader is elected and its interest
has spread (elections take 1-2 s). A request that meets that gap waits a
bounded time for the new leader instead of failing at once; only then
does the client get JetStream's 503.
"""

from __future__ import annotations

import asyncio

from cluster.runtime.account_router import ServiceRouter

LEADER_WAIT = 3.0


async def wait_for_interest(router: ServiceRouter, subject: str, timeout: float = LEADER_WAIT) -> bool:
    """Whether somebody serves `subject` within `timeout` seconds; the router says when interest
    arrives (here, or from a peer over the route mesh), so this returns the moment it does."""
    return await _wait_for(router, subject, True, timeout)


async def wait_until_unserved(router: ServiceRouter, subject: str, timeout: float) -> bool:
    """Whether nobody serves `subject` any more, here or on any peer, within `timeout` seconds."""
    return await _wait_for(router, subject, False, timeout)


async def _wait_for(router: ServiceRouter, subject: str, served: bool, timeout: float) -> bool:
    if router.has_interest(subject) is served:
        return True
    changed = asyncio.Event()
    watch = router.watch_interest(subject, changed.set)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        while router.has_interest(subject) is not served:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            changed.clear()
            try:
                await asyncio.wait_for(changed.wait(), remaining)
            except TimeoutError:
                return router.has_interest(subject) is served
        return True
    finally:
        router.unwatch_interest(watch)


async def pass_on_when_served(
    router: ServiceRouter, subject: str, payload: bytes, reply: str | None, headers: bytes | None
) -> bool:
    """`Router.pass_on`, waiting for a server of `subject` if there is none yet; False if none came."""
    if router.pass_on(subject, payload, reply, headers):
        return True
    if not await wait_for_interest(router, subject):
        return False
    return router.pass_on(subject, payload, reply, headers) > 0
