"""A stream's num_replicas changed by STREAM.UPDATE, side by side with a 3-node nats-server 2.15.1: the
stream and its consumers scale down and up as nats-server's do (jetraft refused it with 10061 before),
keeping their messages and acknowledgements."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

from cluster.runtime.workers import node_of
from tests.node.cluster_fixtures import local_cluster
from tests.pipeline.servers import NatsServerProcesses

API = "$JS.API."
STREAM = {"name": "SCALE", "subjects": ["scale.>"]}


@pytest.fixture(scope="module")
def urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with (
        local_cluster(tmp_path_factory.mktemp("scale")) as cluster,
        NatsServerProcesses(3, Path(tmp_path_factory.mktemp("scale-reference"))) as reference,
    ):
        yield {"jetraft": cluster.client_urls[1], "nats-server": reference.target().urls[0]}


async def request(nc: nats.NATS, subject: str, body: Any = b"") -> dict[str, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    for _ in range(100):  # a new cluster's meta leader, or a group's leader, may still be on its way
        try:
            answer = json.loads((await nc.request(subject, data, timeout=5)).data)
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
            answer = None
        if answer is not None and answer.get("error", {}).get("code") != 503:
            return answer
        await asyncio.sleep(0.1)
    raise AssertionError(f"{subject}: no answer")


def members(info: dict[str, Any]) -> set[str]:
    cluster = info.get("cluster") or {}
    return {node_of(m) for m in [cluster.get("leader"), *(r["name"] for r in cluster.get("replicas", []))] if m}


async def scaled(nc: nats.NATS, replicas: int) -> list[Any]:
    """Once the stream has `replicas` members (bounded): how many, its messages, and for each consumer
    its members and config num_replicas."""
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        info = await request(nc, f"{API}STREAM.INFO.SCALE")
        consumers = [await request(nc, f"{API}CONSUMER.INFO.SCALE.{name}") for name in ("D", "E")]
        expected = [replicas, min(replicas, consumers[1]["config"].get("num_replicas", 0))]
        seen = [len(members(info)), *(len(members(c)) for c in consumers)]
        if seen == [replicas, *expected] or asyncio.get_running_loop().time() > deadline:
            return [
                seen,
                info["state"]["messages"],
                [c["config"].get("num_replicas", 0) for c in consumers],
                consumers[0]["ack_floor"]["stream_seq"],
            ]
        await asyncio.sleep(0.2)


async def scale_down_and_up(url: str) -> list[Any]:
    nc = await nats.connect(url)
    js = nc.jetstream()
    assert "error" not in await request(nc, f"{API}STREAM.CREATE.SCALE", {**STREAM, "num_replicas": 3})
    for i in range(10):
        await js.publish("scale.k", b"%d" % i)
    durable = {"ack_policy": "explicit"}
    for name, extra in (("D", {}), ("E", {"num_replicas": 3})):
        body = {"stream_name": "SCALE", "config": {"durable_name": name, **durable, **extra}}
        assert "error" not in await request(nc, f"{API}CONSUMER.DURABLE.CREATE.SCALE.{name}", body)
    for msg in await (await js.pull_subscribe_bind("D", "SCALE")).fetch(3, timeout=5):
        await msg.ack_sync()
    out: list[Any] = [await scaled(nc, 3)]
    for replicas in (1, 3, 2):
        answer = await request(nc, f"{API}STREAM.UPDATE.SCALE", {**STREAM, "num_replicas": replicas})
        assert answer["config"]["num_replicas"] == replicas, answer
        out.append(await scaled(nc, replicas))
        await js.publish("scale.k", b"after %d" % replicas)
    too_many = await request(nc, f"{API}STREAM.UPDATE.SCALE", {**STREAM, "num_replicas": 5})
    out.append(too_many["error"])
    await request(nc, f"{API}STREAM.DELETE.SCALE")
    await nc.close()
    return out


def test_a_stream_and_its_consumers_scale_as_on_nats_server(urls: dict[str, str]) -> None:
    seen = {kind: asyncio.run(scale_down_and_up(url)) for kind, url in urls.items()}
    assert seen["jetraft"] == seen["nats-server"]
    # down to one and back: every message and D's acks kept, E's own num_replicas brought down to 1
    assert seen["jetraft"][1] == [[1, 1, 1], 10, [0, 1], 3]
    assert seen["jetraft"][2] == [[3, 3, 1], 11, [0, 1], 3]
    assert seen["jetraft"][-1]["err_code"] == 10005


async def test_a_scaled_down_streams_departed_nodes_keep_nothing(tmp_path: Path) -> None:
    """The replicas that leave stop answering Direct Gets: every answer after the scale-down comes from
    the one node left."""
    with local_cluster(tmp_path) as cluster:
        nc = await nats.connect(cluster.client_urls[0])
        js = nc.jetstream()
        await js.add_stream(name="DOWN", subjects=["down.>"], num_replicas=3, allow_direct=True)
        await js.publish("down.k", b"v")
        await js.update_stream(name="DOWN", subjects=["down.>"], num_replicas=1, allow_direct=True)
        left = await _answering(nc)
        assert len(left) == 1
        await nc.close()


async def _answering(nc: nats.NATS) -> set[str]:
    """The nodes answering DOWN's Direct Gets once only one does (bounded)."""
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        answered = set()
        for _ in range(30):
            msg = await nc.request(f"{API}DIRECT.GET.DOWN", b'{"seq":1}', timeout=5)
            assert msg.headers is not None and msg.data == b"v"
            answered.add(node_of(msg.headers["Jetraft-Node"]))
        if len(answered) == 1 or asyncio.get_running_loop().time() > deadline:
            return answered
        await asyncio.sleep(0.2)
