"""Request/reply between a node's services over its own router, like a NATS client's `request`.

One wildcard inbox subscription per node; each request waits on a future
keyed by its inbox token, bounded by a timeout. A request nobody listens to
comes back at once as the router's 503 no-responders status, which is
raised as `NoResponders` so callers can retry or answer "unavailable".
"""

from __future__ import annotations

import asyncio
import itertools
import secrets

from cluster.runtime.account_router import ServiceRouter
from cluster.runtime.leader_wait import wait_for_interest
from gateway.headers import HeaderError, decode_headers
from gateway.router import Message

# A retry after no responders while the router already sees interest in the subject (a peer's
# interest whose route is going away): a pause, so the loop does not spin.
NO_RESPONDERS_RETRY = 0.05


# where the answers to a node's own requests go: not a client's inbox
INTERNAL_INBOX_PREFIX = "_JRI."


class NoRespondersError(Exception):
    """Nobody subscribes to the subject right now (e.g. a stream between leaders)."""


class InternalRequester:
    def __init__(self, router: ServiceRouter, node: str) -> None:
        self._router = router
        self._prefix = f"{INTERNAL_INBOX_PREFIX}{node}.{secrets.token_hex(4)}."
        self._ids = itertools.count(1)
        self._waiting: dict[str, asyncio.Future[Message]] = {}
        self._sub = router.subscribe(self._prefix + "*", self._on_reply)

    def close(self) -> None:
        self._router.unsubscribe(self._sub)
        for future in self._waiting.values():
            future.cancel()
        self._waiting.clear()

    async def request(
        self, subject: str, payload: bytes = b"", timeout: float = 2.0, headers: bytes | None = None
    ) -> Message:
        """The first reply; raises NoRespondersError or TimeoutError."""
        token = str(next(self._ids))
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._waiting[token] = future
        try:
            self._router.publish(subject, payload, self._prefix + token, headers, no_responders=True)
            reply = await asyncio.wait_for(future, timeout)
        finally:
            self._waiting.pop(token, None)
        if reply.headers and not reply.payload and _status(reply.headers) == 503:
            raise NoRespondersError(subject)
        return reply

    async def request_when_answered(
        self, subject: str, payload: bytes = b"", timeout: float = 10.0, headers: bytes | None = None
    ) -> Message:
        """`request`, retried while nobody subscribes yet (a group still electing its leader, whose
        subscription arrives when it is elected; retried the moment it does); raises TimeoutError
        after `timeout`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"nobody answered {subject} within {timeout}s")
            try:
                return await self.request(subject, payload, min(remaining, 2.0), headers)
            except NoRespondersError:
                if self._router.has_interest(subject):
                    await asyncio.sleep(NO_RESPONDERS_RETRY)
                else:
                    await wait_for_interest(self._router, subject, deadline - loop.time())

    def _on_reply(self, message: Message) -> None:
        future = self._waiting.get(message.subject[len(self._prefix) :])
        if future is not None and not future.done():
            future.set_result(message)


def _status(headers: bytes) -> int | None:
    try:
        return decode_headers(headers).status
    except HeaderError:
        return None
