"""The queue workload: unique values published with acknowledgement, all read back at the end.

Every client publishes the next value of one shared counter to one R3
stream; at the end (every fault healed) an ephemeral pull consumer reads the
whole stream back. The set checker says what was lost, duplicated or
unexpected.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from typing import Any

from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType, StreamConfig

from chaos.check.history import Op, OpType
from chaos.check.set_checker import check_set
from chaos.run.clients import PinnedClient, outcome_of
from chaos.run.recorder import HistoryRecorder
from chaos.run.workload import fresh_stream

FINAL_READER = 1_000_000  # the process number of the final read


class QueueWorkload:
    name = "queue"
    stream = "CHAOS_QUEUE"
    subject = "chaos.queue"

    def __init__(self, replicas: int = 3, op_timeout: float = 3.0) -> None:
        self.replicas = replicas
        self.op_timeout = op_timeout
        self.values = itertools.count(1)

    async def setup(self, clients: list[PinnedClient]) -> None:
        config = StreamConfig(
            name=self.stream, subjects=[self.subject], num_replicas=self.replicas, storage=StorageType.FILE
        )
        await fresh_stream(clients[0], config)

    async def operate(
        self, process: int, client: PinnedClient, rng: random.Random, recorder: HistoryRecorder
    ) -> OpType:
        value = next(self.values)
        invoke = recorder.invoke(process, "add", value, node=client.node)
        try:
            ack = await client.js.publish(self.subject, b"%d" % value, timeout=self.op_timeout)
        except Exception as exc:  # every failure is an outcome to record
            kind, why = outcome_of(exc)
            recorder.complete(invoke, kind, value, error=why)
            return kind
        recorder.complete(invoke, OpType.OK, value, seq=ack.seq)
        return OpType.OK

    async def final_read(
        self, clients: list[PinnedClient], recorder: HistoryRecorder, timeout: float
    ) -> None:
        """Read the whole stream through the first node that manages it within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        for client in itertools.cycle(clients):
            if time.monotonic() > deadline:
                break
            invoke = recorder.invoke(FINAL_READER, "read", node=client.node)
            try:
                values = await asyncio.wait_for(self._read_all(client), max(1.0, deadline - time.monotonic()))
            except Exception as exc:  # try the next node
                kind, why = outcome_of(exc)
                recorder.complete(invoke, kind, error=why)
                await asyncio.sleep(0.5)
                continue
            recorder.complete(invoke, OpType.OK, values)
            return

    async def _read_all(self, client: PinnedClient) -> list[int]:
        info = await client.js.stream_info(self.stream)
        last = info.state.last_seq
        if last == 0:
            return []
        config = ConsumerConfig(
            ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL, inactive_threshold=30.0
        )
        sub = await client.js.pull_subscribe(self.subject, durable=None, stream=self.stream, config=config)
        values: list[int] = []
        highest = 0
        try:
            while highest < last:
                try:
                    batch = await sub.fetch(1000, timeout=5)
                except NatsTimeoutError as exc:
                    raise NatsTimeoutError(f"read back stalled at sequence {highest} of {last}") from exc
                for msg in batch:
                    highest = max(highest, msg.metadata.sequence.stream)
                    values.append(int(msg.data))
        finally:
            await sub.unsubscribe()
        return values

    def check(self, ops: list[Op], time_limit: float) -> dict[str, Any]:
        result = check_set(ops)
        return {"valid": result.valid, "set": result.to_json()}
