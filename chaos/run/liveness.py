"""After every heal: does every node serve its own clients again, and how soon?

Each node's pinned client publishes to its own subject of an R3 stream and
reads it back with STREAM.MSG.GET, retrying until both succeed and the read
returns the sequence just acknowledged, or the bound passes. A node that
rejoined Raft but whose clients get "no responders" or no answer fails here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from nats.js.api import StorageType, StreamConfig

from chaos.run.clients import PinnedClient, outcome_of
from chaos.run.workload import fresh_stream

LIVENESS_STREAM = "CHAOS_LIVE"
RETRY_PAUSE = 0.2


@dataclass(slots=True)
class Liveness:
    bound: float
    # node -> seconds until it served a publish and a read again; None if it did not within the bound
    served_after: dict[str, float | None] = field(default_factory=dict)
    last_error: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(seconds is not None for seconds in self.served_after.values())

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "ok": self.ok,
            "bound_s": self.bound,
            "served_after_s": {
                node: None if s is None else round(s, 3) for node, s in sorted(self.served_after.items())
            },
        }
        failed = {node: self.last_error.get(node, "") for node, s in self.served_after.items() if s is None}
        if failed:
            record["not_serving"] = failed
        return record


async def create_liveness_stream(client: PinnedClient, replicas: int) -> None:
    config = StreamConfig(
        name=LIVENESS_STREAM, subjects=["chaos.live.>"], num_replicas=replicas, storage=StorageType.FILE,
        max_msgs_per_subject=1,
    )  # fmt: skip
    await fresh_stream(client, config)


async def check_liveness(
    clients: list[PinnedClient],
    bound: float,
    op_timeout: float = 2.0,
    *,
    health_problem: Callable[[str], str | None] | None = None,
    restarted: Iterable[str] = (),
) -> Liveness:
    """`restarted`: nodes the fault restarted, which must also report healthy (`wait_healthy`)."""
    result = Liveness(bound)
    started = time.monotonic()

    async def serve(client: PinnedClient) -> None:
        subject = f"chaos.live.{client.node}"
        deadline = started + bound
        while time.monotonic() < deadline:
            remaining = max(0.2, min(op_timeout, deadline - time.monotonic()))
            try:
                ack = await client.js.publish(subject, b"alive", timeout=remaining)
                msg = await client.js.get_msg(LIVENESS_STREAM, subject=subject, direct=False)
                if (msg.seq or 0) >= ack.seq:
                    result.served_after[client.node] = time.monotonic() - started
                    return
                result.last_error[client.node] = f"MSG.GET returned {msg.seq}, behind the PubAck's {ack.seq}"
            except Exception as exc:  # any failure: try again until the bound
                result.last_error[client.node] = outcome_of(exc)[1]
            await asyncio.sleep(RETRY_PAUSE)
        result.served_after[client.node] = None

    await asyncio.gather(*(serve(client) for client in clients))
    if health_problem is not None:
        await wait_healthy(health_problem, restarted, result, started)
    return result


async def wait_healthy(
    health_problem: Callable[[str], str | None], nodes: Iterable[str], result: Liveness, started: float
) -> None:
    """A node restarted by the fault (killed, or its files damaged) is not back until its /healthz says
    so: a node recovering from damaged files serves its clients through its peers before it has caught
    up, but cannot vote, and the next fault must not find it so. Within the same bound as the serving."""
    for node in nodes:
        if result.served_after.get(node) is None:
            continue
        deadline = started + result.bound
        while True:
            problem = await asyncio.to_thread(health_problem, node)
            if problem is None:
                served = result.served_after[node] or 0.0
                result.served_after[node] = max(served, time.monotonic() - started)
                break
            if time.monotonic() >= deadline:
                result.served_after[node] = None
                result.last_error[node] = f"serves, but /healthz: {problem}"
                break
            await asyncio.sleep(RETRY_PAUSE)
