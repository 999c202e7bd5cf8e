"""Publishing many messages with PubAcks, a bounded window, and retries that cannot duplicate.

nats-py's `publish_async` futures never time out: a publish whose PubAck is
lost (a stream leader change drops an uncommitted proposal) would wait
forever. Here each window of publishes gets `ack_timeout` seconds; the ones
without a PubAck by then, or refused (503 while a leader is elected), are
published again with the same `Nats-Msg-Id`, so the stream stores each
message once even when the first attempt was in fact stored.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import nats.aio.client

MSG_ID_HEADER = "Nats-Msg-Id"
DEFAULT_WINDOW = 1000
DEFAULT_ACK_TIMEOUT = 10.0
DEFAULT_ATTEMPTS = 6
RETRY_PAUSE = 0.5

MessageAt = Callable[[int], tuple[str, bytes]]


class PublishFailedError(RuntimeError):
    """Some messages got no PubAck after every attempt."""


async def publish_acknowledged(
    nc: nats.aio.client.Client,
    count: int,
    message_at: MessageAt,
    window: int = DEFAULT_WINDOW,
    ack_timeout: float = DEFAULT_ACK_TIMEOUT,
    attempts: int = DEFAULT_ATTEMPTS,
    progress: Callable[[int], None] | None = None,
) -> None:
    """Publish messages 0..count-1 (subject and payload from `message_at(i)`), each stored exactly once."""
    js = nc.jetstream(timeout=ack_timeout, publish_async_max_pending=window)
    # Unique per call, so a second call with the same messages is stored again, not deduplicated.
    id_prefix = uuid.uuid4().hex[:12]
    for first in range(0, count, window):
        pending = list(range(first, min(first + window, count)))
        for attempt in range(1, attempts + 1):
            futures: dict[int, asyncio.Future[object]] = {}
            for index in pending:
                subject, payload = message_at(index)
                futures[index] = await js.publish_async(
                    subject, payload, headers={MSG_ID_HEADER: f"{id_prefix}-{index}"}
                )
            done, not_done = await asyncio.wait(futures.values(), timeout=ack_timeout)
            for future in not_done:
                future.cancel()  # gives its slot in the window back
            failed = [i for i, f in futures.items() if f not in done or f.exception() is not None]
            if not failed:
                break
            if attempt == attempts:
                errors = {repr(f.exception()) for f in done if f.exception() is not None}
                raise PublishFailedError(
                    f"{len(failed)} of messages {first}..{first + len(futures) - 1} got no PubAck after "
                    f"{attempts} attempts of {ack_timeout:g}s ({', '.join(sorted(errors)) or 'timeouts'})"
                )
            pending = failed
            await asyncio.sleep(RETRY_PAUSE)
        if progress is not None:
            progress(min(first + window, count))
