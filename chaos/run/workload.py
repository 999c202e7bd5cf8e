"""What every workload shares: the worker loop over one pinned client, and the stream set-up."""

from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Any, Protocol

from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.api import StreamConfig
from nats.js.errors import NotFoundError

from chaos.check.history import Op, OpType
from chaos.readafterwrite.scenario import add_stream_when_placed
from chaos.run.clients import PinnedClient
from chaos.run.recorder import HistoryRecorder

# pause after an operation that did not succeed: a node without a leader answers "no responders" at once
FAILURE_BACKOFF = 0.05


class Workload(Protocol):
    name: str
    stream: str  # the stream whose leader the leader faults aim at

    async def setup(self, clients: list[PinnedClient]) -> None: ...

    async def operate(
        self, process: int, client: PinnedClient, rng: random.Random, recorder: HistoryRecorder
    ) -> OpType:
        """One operation (or a read and the compare-and-set that uses it); the last one's outcome."""
        ...

    async def final_read(
        self, clients: list[PinnedClient], recorder: HistoryRecorder, timeout: float
    ) -> None: ...

    def check(self, ops: list[Op], time_limit: float) -> dict[str, Any]:
        """The checkers' results; `valid` is True, False, or None when a checker could not decide."""
        ...


async def run_worker(
    workload: Workload,
    thread: int,
    stride: int,
    client: PinnedClient,
    recorder: HistoryRecorder,
    stop: asyncio.Event,
    seed: int,
) -> None:
    """Operations until `stop`, one at a time. After an indeterminate one the worker takes a new process
    number (thread + k * stride), as Jepsen does: the old operation may still be in flight."""
    rng = random.Random(seed)
    process = thread
    while not stop.is_set():
        outcome = await workload.operate(process, client, rng, recorder)
        if outcome is OpType.INFO:
            process += stride
        if outcome is not OpType.OK:
            await asyncio.sleep(FAILURE_BACKOFF)


async def fresh_stream(client: PinnedClient, config: StreamConfig, attempts: int = 5) -> None:
    """The stream, created anew (a copy left from an earlier run on the same data is deleted).

    The delete is the cluster's first request of a run: on a loaded machine a cluster that has just
    started can take longer than the client's timeout to answer it (one run in a hundred at a load
    average of 12 on two cores), so it is asked again a few times, as the create is."""
    assert config.name is not None
    for attempt in range(attempts):
        try:
            with contextlib.suppress(NotFoundError):
                await client.js.delete_stream(config.name)
            break
        except NatsTimeoutError:
            if attempt == attempts - 1:
                raise
    await add_stream_when_placed(client.js, config)
