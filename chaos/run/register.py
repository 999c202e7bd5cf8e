"""The register workload: keys of a KV bucket, read with STREAM.MSG.GET, written with put and compare-and-set.

Each key is a register. Values are unique (one shared counter), so a
revision names a value and the bucket's compare-and-set (`update` with the
revision last read, which sends `Nats-Expected-Last-Subject-Sequence`) is a
compare-and-set on the value. Reads are the leader's coherent
STREAM.MSG.GET (last by subject) and must be linearizable; Direct Gets on
the same keys are recorded as `direct-read` and only counted for staleness,
since any replica may answer them.
"""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

from nats.js.api import DiscardPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError
from nats.js.kv import KeyValue

from chaos.check.history import Op, OpType
from chaos.check.linearizable import check_register
from chaos.check.staleness import check_staleness
from chaos.run.clients import PinnedClient, node_of_reply, outcome_of
from chaos.run.recorder import HistoryRecorder
from chaos.run.workload import fresh_stream

# the mix of operations, by cumulative probability
READ, DIRECT_READ, WRITE = 0.35, 0.55, 0.75  # the rest: a read and a compare-and-set on its result


class RegisterWorkload:
    name = "register"
    bucket = "chaos"
    stream = "KV_chaos"

    def __init__(self, keys: int = 5, replicas: int = 3, op_timeout: float = 3.0) -> None:
        self.keys = [f"r{i}" for i in range(keys)]
        self.replicas = replicas
        self.op_timeout = op_timeout
        self.values = itertools.count(1)
        self.buckets: dict[str, KeyValue] = {}

    def subject(self, key: str) -> str:
        return f"$KV.{self.bucket}.{key}"

    async def setup(self, clients: list[PinnedClient]) -> None:
        # the stream a KV bucket is (history 1), made directly so creation can be retried while placing
        config = StreamConfig(
            name=self.stream,
            subjects=[f"$KV.{self.bucket}.>"],
            num_replicas=self.replicas,
            storage=StorageType.FILE,
            max_msgs_per_subject=1,
            discard=DiscardPolicy.NEW,
            allow_rollup_hdrs=True,
            deny_delete=True,
            allow_direct=True,
        )
        await fresh_stream(clients[0], config)
        for client in clients:
            self.buckets[client.node] = await client.js.key_value(self.bucket)

    async def operate(
        self, process: int, client: PinnedClient, rng: random.Random, recorder: HistoryRecorder
    ) -> OpType:
        key = rng.choice(self.keys)
        roll = rng.random()
        if roll < READ:
            return (await self.read(process, client, key, recorder))[0]
        if roll < DIRECT_READ:
            return await self.direct_read(process, client, key, recorder)
        if roll < WRITE:
            return await self.write(process, client, key, recorder)
        outcome, value, revision = await self.read(process, client, key, recorder)
        if outcome is not OpType.OK:
            return outcome
        return await self.cas(process, client, key, value, revision, recorder)

    async def read(
        self, process: int, client: PinnedClient, key: str, recorder: HistoryRecorder
    ) -> tuple[OpType, int | None, int]:
        invoke = recorder.invoke(process, "read", key=key, node=client.node)
        try:
            msg = await client.js.get_msg(self.stream, subject=self.subject(key), direct=False)
        except NotFoundError:
            recorder.complete(invoke, OpType.OK, None, seq=0)
            return OpType.OK, None, 0
        except Exception as exc:  # every failure is an outcome to record
            kind, why = outcome_of(exc)
            recorder.complete(invoke, kind, error=why)
            return kind, None, 0
        value = int(msg.data or b"0")
        recorder.complete(invoke, OpType.OK, value, seq=msg.seq)
        return OpType.OK, value, msg.seq or 0

    async def direct_read(
        self, process: int, client: PinnedClient, key: str, recorder: HistoryRecorder
    ) -> OpType:
        invoke = recorder.invoke(process, "direct-read", key=key, node=client.node)
        request = json.dumps({"last_by_subj": self.subject(key)}).encode()
        try:
            reply = await client.nc.request(
                f"$JS.API.DIRECT.GET.{self.stream}", request, timeout=self.op_timeout
            )
        except Exception as exc:
            kind, why = outcome_of(exc)
            recorder.complete(invoke, kind, error=why)
            return kind
        headers = reply.headers or {}
        responder = node_of_reply(headers, client.node)
        status = headers.get("Status")
        if status == "404":
            recorder.complete(invoke, OpType.OK, None, seq=0, node=responder)
            return OpType.OK
        if status is not None or "Nats-Sequence" not in headers:
            recorder.complete(invoke, OpType.INFO, error=f"status {status}", node=responder)
            return OpType.INFO
        recorder.complete(
            invoke, OpType.OK, int(reply.data or b"0"), seq=int(headers["Nats-Sequence"]), node=responder
        )
        return OpType.OK

    async def write(self, process: int, client: PinnedClient, key: str, recorder: HistoryRecorder) -> OpType:
        value = next(self.values)
        invoke = recorder.invoke(process, "write", value, key=key, node=client.node)
        try:
            revision = await self.buckets[client.node].put(key, b"%d" % value)
        except Exception as exc:
            kind, why = outcome_of(exc)
            recorder.complete(invoke, kind, value, error=why)
            return kind
        recorder.complete(invoke, OpType.OK, value, seq=revision)
        return OpType.OK

    async def cas(
        self,
        process: int,
        client: PinnedClient,
        key: str,
        expected: int | None,
        revision: int,
        recorder: HistoryRecorder,
    ) -> OpType:
        new = next(self.values)
        invoke = recorder.invoke(process, "cas", (expected, new), key=key, node=client.node)
        try:
            written = await self.buckets[client.node].update(key, b"%d" % new, last=revision)
        except Exception as exc:
            kind, why = outcome_of(exc)
            recorder.complete(invoke, kind, (expected, new), error=why)
            return kind
        recorder.complete(invoke, OpType.OK, (expected, new), seq=written)
        return OpType.OK

    async def final_read(
        self, clients: list[PinnedClient], recorder: HistoryRecorder, timeout: float
    ) -> None:
        """Nothing more to read: every read during the run is checked."""

    def check(self, ops: list[Op], time_limit: float) -> dict[str, Any]:
        linearizability = check_register(ops, time_limit=time_limit)
        verdict = linearizability.to_json()
        valid = {"linearizable": True, "not-linearizable": False}.get(verdict["verdict"])
        return {
            "valid": valid,
            "linearizability": verdict,
            "direct_get_staleness": check_staleness(ops).to_json(),
        }
