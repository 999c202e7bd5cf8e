"""nats-py, adjusted to keep repeated header names in both directions.

nats-py hands headers to the application as a plain dict, so a message with
two `X-Tag` lines arrives with one. The data source promises
`headers map<string, array<string>>`, so the client below decodes header
blocks with the project's shared codec (gateway/headers.py) and keeps every
field in order, while still filling the dict nats-py itself reads (the
`Status` key drives its no-responders handling). nats-py 2.16 routes every
received header block through `Client._process_headers`; a test pins that.

Bulk readers (Direct Get batches) use `subscribe_raw`: their replies skip
nats-py's per-message Msg object, header dict, queue and delivery task, which
cost more than the whole decoding of a Direct Get reply; the handler gets the
reply subject, header block and payload as bytes straight from the parser
(nats-py 2.16 hands every message to `Client._process_msg`; a test pins that).

For publishing, nats-py only iterates `headers.items()`, so `RepeatedHeaders`
(a dict whose `items()` yields every pair) sends repeated names unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, ItemsView, Iterable, Sequence
from typing import Any

import nats.aio.client
import nats.aio.subscription
import nats.errors

from gateway.headers import HeaderError, decode_headers
from pipeline.errors import ServersUnreachableError

STATUS_KEY = "Status"
DESCRIPTION_KEY = "Description"


class HeaderDict(dict[str, str]):
    """nats-py's view (last value per name, plus Status/Description) with every field kept in `fields`."""

    __slots__ = ("description", "fields", "status")

    def __init__(self, fields: list[tuple[str, str]], status: int | None, description: str) -> None:
        super().__init__(fields)
        self.fields = fields
        self.status = status
        self.description = description
        if status is not None:
            self[STATUS_KEY] = str(status)
            if description:
                self[DESCRIPTION_KEY] = description


RawHandler = Callable[[bytes, bytes | None, bytes], None]
"""handler(subject, header block or None, payload), called in the connection's read loop."""


class MultiValueHeaderClient(nats.aio.client.Client):
    """A nats-py client whose received messages carry `HeaderDict` headers, with raw subscriptions."""

    def __init__(self) -> None:
        super().__init__()
        self._raw_handlers: dict[int, RawHandler] = {}

    async def subscribe_raw(self, subject: str, handler: RawHandler) -> nats.aio.subscription.Subscription:
        """Subscribe with `handler` taking each message as bytes; unsubscribe with `unsubscribe_raw`."""
        sub = await self.subscribe(subject)
        self._raw_handlers[sub._id] = handler
        return sub

    async def unsubscribe_raw(self, sub: nats.aio.subscription.Subscription) -> None:
        self._raw_handlers.pop(sub._id, None)
        await sub.unsubscribe()

    async def _process_msg(  # type: ignore[override]
        self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes | None
    ) -> None:
        handler = self._raw_handlers.get(sid)
        if handler is None:
            await super()._process_msg(sid, subject, reply, data, headers)
            return
        self.stats["in_msgs"] += 1
        self.stats["in_bytes"] += len(data)
        handler(subject, headers or None, data)

    async def _process_headers(self, headers: bytes) -> dict[str, str] | None:  # type: ignore[override]
        if not headers:
            return None
        try:
            block = decode_headers(headers)
        except HeaderError:
            # Leave anything our codec rejects to nats-py's own, more lenient parser.
            return await super()._process_headers(headers)
        return HeaderDict(block.fields, block.status, block.description)


class RepeatedHeaders(dict[str, str]):
    """Headers to publish, repeated names allowed: nats-py encodes whatever `items()` yields."""

    def __init__(self, pairs: Iterable[tuple[str, str]]) -> None:
        self._pairs = list(pairs)
        super().__init__(self._pairs)

    def items(self) -> ItemsView[str, str]:  # type: ignore[override]
        return self._pairs  # type: ignore[return-value]


async def _quiet(_exc: Exception) -> None:
    """nats-py prints connection errors by default; ours are raised or reported instead."""


async def connect(
    servers: Sequence[str],
    connect_timeout: float,
    name: str = "jetraft-pipeline",
    **kwargs: Any,
) -> MultiValueHeaderClient:
    """Connect to the first server that answers, trying them in the given order."""
    client = MultiValueHeaderClient()
    try:
        await client.connect(
            servers=list(servers),
            name=name,
            connect_timeout=connect_timeout,
            dont_randomize=True,
            max_reconnect_attempts=2,
            reconnect_time_wait=0.2,
            error_cb=_quiet,
            **kwargs,
        )
    except (nats.errors.NoServersError, OSError, TimeoutError) as exc:
        raise ServersUnreachableError(
            f"jetstream option 'servers': none of {', '.join(servers)} accepted a NATS connection ({exc})"
        ) from exc
    return client
