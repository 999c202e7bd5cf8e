"""Bounded nats-py traffic that exercises every metric the dashboards read.

A replicated stream and a mirror_direct mirror of it (placed on the mirror
node), publishes (some deliberately duplicated), Direct Gets from a client
on every node (some for missing sequences: 404s) and coherent MSG.GETs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field

import nats
from nats.aio.client import Client
from nats.js.api import StreamConfig, StreamSource
from nats.js.errors import NotFoundError

STREAM = "ORDERS"
MIRROR = "ORDERS_M"
DIRECT_GET = f"$JS.API.DIRECT.GET.{STREAM}"


@dataclass
class TrafficCounts:
    published: int = 0
    duplicates: int = 0
    direct_gets: dict[str, int] = field(default_factory=dict)  # status -> count
    msg_gets: int = 0
    # which node answered, from the Jetraft-Node header of each Direct Get reply
    responders: dict[str, int] = field(default_factory=dict)


class Traffic:
    def __init__(self, client_urls: list[str]) -> None:
        self.client_urls = client_urls
        self.clients: list[Client] = []
        self.counts = TrafficCounts()

    async def open(self) -> None:
        self.clients = [await nats.connect(url) for url in self.client_urls]
        js = self.clients[0].jetstream()
        await js.add_stream(name=STREAM, subjects=["orders.>"], num_replicas=3, allow_direct=True)
        await self.publish_batch(20)
        await js.add_stream(
            StreamConfig(name=MIRROR, mirror=StreamSource(name=STREAM), mirror_direct=True, num_replicas=1)
        )

    async def close(self) -> None:
        for client in self.clients:
            with contextlib.suppress(Exception):
                await client.close()

    async def publish_batch(self, count: int) -> None:
        js = self.clients[0].jetstream()
        for _ in range(count):
            index = self.counts.published
            await js.publish(
                f"orders.{index % 5}", b"order %d" % index, headers={"Nats-Msg-Id": f"id-{index}"}
            )
            self.counts.published += 1
        # the same message id again: stored once, answered as a duplicate
        await js.publish("orders.0", b"again", headers={"Nats-Msg-Id": f"id-{self.counts.published - 1}"})
        self.counts.duplicates += 1

    async def direct_gets(self, per_client: int) -> None:
        for client in self.clients:
            for index in range(per_client):
                # every fifth request asks for a sequence that does not exist yet
                seq = 10**9 if index % 5 == 4 else 1 + index % max(self.counts.published, 1)
                reply = await client.request(DIRECT_GET, json.dumps({"seq": seq}).encode(), timeout=5)
                headers = reply.headers or {}
                status = headers.get("Status", "ok")
                self.counts.direct_gets[status] = self.counts.direct_gets.get(status, 0) + 1
                node = headers.get("Jetraft-Node", "?")
                self.counts.responders[node] = self.counts.responders.get(node, 0) + 1

    async def msg_gets(self, count: int) -> None:
        js = self.clients[-1].jetstream()
        for index in range(count):
            await js.get_msg(STREAM, 1 + index % max(self.counts.published, 1))
            self.counts.msg_gets += 1
        with contextlib.suppress(NotFoundError):
            await js.get_msg(STREAM, 10**9)

    async def round(self) -> None:
        await self.publish_batch(10)
        await self.direct_gets(10)
        await self.msg_gets(5)

    async def run(self, stop: asyncio.Event, max_rounds: int) -> None:
        """Traffic rounds until `stop` is set or `max_rounds` ran (a bound, should nobody stop it)."""
        for _ in range(max_rounds):
            if stop.is_set():
                return
            await self.round()
