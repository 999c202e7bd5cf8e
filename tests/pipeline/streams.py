"""Stream set-up for the pipeline tests and benchmark, through nats-py only."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import nats
import nats.js.errors
from nats.js.api import StreamConfig

from pipeline.nats_client import RepeatedHeaders


@dataclass(frozen=True)
class Published:
    seq: int
    subject: str
    data: bytes
    headers: tuple[tuple[str, str], ...]


async def create_stream(servers: Sequence[str], config: StreamConfig, timeout: float = 30.0) -> None:
    """Create the stream, retrying while a fresh cluster has no meta leader yet (an event we cannot await)."""
    nc = await nats.connect(list(servers))
    try:
        js = nc.jetstream(timeout=5)
        deadline = time.monotonic() + timeout
        while True:
            try:
                await js.add_stream(config)
                break
            except (
                nats.js.errors.ServiceUnavailableError,
                nats.js.errors.ServerError,
                TimeoutError,
                nats.errors.TimeoutError,
            ):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
        # A replicated stream answers once its own group has a leader.
        while True:
            try:
                info = await js.stream_info(config.name)
                if info.cluster is None or info.cluster.leader:
                    return
            except (nats.js.errors.ServiceUnavailableError, nats.errors.TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"stream {config.name} got no leader within {timeout}s")
            await asyncio.sleep(0.1)
    finally:
        await nc.close()


MessageFactory = Callable[[int], tuple[str, bytes, tuple[tuple[str, str], ...]]]


async def publish(
    servers: Sequence[str], count: int, factory: MessageFactory, window: int = 2000
) -> list[Published]:
    """Publish `count` messages built by factory(i) with PubAcks awaited, `window` in flight."""
    nc = await nats.connect(list(servers))
    try:
        js = nc.jetstream(timeout=30, publish_async_max_pending=window)
        futures = []
        made = []
        for i in range(count):
            subject, data, headers = factory(i)
            made.append((subject, data, headers))
            futures.append(
                await js.publish_async(subject, data, headers=RepeatedHeaders(headers) if headers else None)
            )
        acks = await asyncio.gather(*futures)
    finally:
        await nc.close()
    return [Published(ack.seq, s, d, h) for ack, (s, d, h) in zip(acks, made, strict=True)]


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)
