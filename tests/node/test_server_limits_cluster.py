"""Each node's own `max_file_store` in a three-node cluster, side by side with three nats-server 2.15.1:
n1 may store 1000 bytes, n2 10000, n3 10000. A stream whose max_bytes does not fit on a node is not placed
there; one that needs that node gets nats-server's 10005 "no suitable peers for placement, insufficient
storage"; a stream without max_bytes is placed whatever the room. A stream's leader refuses a publish
once its own node holds more than its limit (10023), whatever the other nodes may hold."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
from nats.aio.msg import Msg

from cluster.runtime.workers import node_of
from local.cluster import LocalCluster, NodeSpec, plan_free_nodes
from local.ports import HOST, free_port_base
from tests.node.reference_server import NATS_SERVER, stop_servers

FILE_LIMITS = {"n1": 1000, "n2": 10000, "n3": 10000}

CREATES: list[dict[str, Any]] = [
    {"name": "A", "num_replicas": 3, "max_bytes": 2000},  # n1 has 1000: 10005
    {"name": "B", "num_replicas": 1, "max_bytes": 2000},  # placed, but not on n1
    {"name": "E", "num_replicas": 3},  # no max_bytes: no room needed
    {"name": "F", "num_replicas": 3, "max_bytes": 5000, "storage": "memory"},  # no memory limit anywhere
    {"name": "G", "num_replicas": 2, "max_bytes": 1500},  # on n2 and n3
    {"name": "H", "num_replicas": 3, "max_bytes": 1000},  # exactly n1's room
]
# What the streams placed on n1 reserve counts too. nats-server's meta leader learns it from each server's
# statsz, sent when a stream is placed but received a moment later (a create right after another may not
# see it yet), so these are jetraft's alone: H's 1000 leave n1 nothing for C, and C2's 500 no room to grow.
AFTER = [
    {"name": "C", "num_replicas": 3, "max_bytes": 1},
    {"name": "C2", "num_replicas": 2, "max_bytes": 500},
]


def _essence(reply: dict[str, Any]) -> dict[str, Any]:
    if "error" in reply:
        return {"error": reply["error"]}
    cluster = reply["cluster"]
    # the machines: a peer is a node, or one worker of a several-worker node (`n1/w1`)
    nodes = {node_of(cluster["leader"]), *(node_of(replica["name"]) for replica in cluster.get("replicas", []))}
    return {"nodes": len(nodes), "on_n1": "n1" in nodes}


async def _publishes(url: str) -> list[Any]:
    """Streams of one replica on n1 and on n2, 400-byte messages to each: n1, the leader of P, refuses the
    fourth (the third crossed its 1000 bytes); n2 takes Q's as it would without n1's limit."""
    nc = await nats.connect(url)
    try:
        for name, node in (("P", "n1"), ("Q", "n2")):
            body = {"name": name, "subjects": [name.lower()], "placement": {"tags": [f"node:{node}"]}}
            reply = json.loads((await nc.request(f"$JS.API.STREAM.CREATE.{name}", json.dumps(body).encode(), timeout=20)).data)
            assert node_of(reply["cluster"]["leader"]) == node, reply
        answers = []
        for subject in ["p"] * 4 + ["q"] * 4:
            answers.append(json.loads((await _request_when_served(nc, subject, b"x" * 400)).data))
        return answers
    finally:
        await nc.close()


async def _request_when_served(nc: nats.NATS, subject: str, payload: bytes) -> Msg:
    """A publish to a stream created a moment ago: its leader's interest may not have reached the client's
    server yet (on nats-server's routes as on jetraft's mesh), and the publish hears "no responders"
    meanwhile. A few bounded tries, as tests/node/cluster_fixtures.py `publish_when_served`."""
    for _ in range(50):
        try:
            return await nc.request(subject, payload, timeout=10)
        except nats.errors.NoRespondersError:
            await asyncio.sleep(0.1)
    raise AssertionError(f"{subject} never served")


async def _creates(url: str, creates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    nc = await nats.connect(url)
    try:
        answers = []
        for body in creates:
            subject = f"$JS.API.STREAM.CREATE.{body['name']}"
            reply = await nc.request(subject, json.dumps({"subjects": [body["name"]], **body}).encode(), timeout=20)
            answers.append(_essence(json.loads(reply.data)))
        return answers
    finally:
        await nc.close()


@contextlib.asynccontextmanager
async def _nats_servers(tmp_path: Path) -> AsyncIterator[str]:
    """Three nats-server with their own max_file_store, routed to each other; the URL of n2 once the
    cluster places R3 streams (each server has heard the others' statsz)."""
    base = free_port_base(6)
    client = {name: base + i for i, name in enumerate(FILE_LIMITS)}
    route = {name: base + 3 + i for i, name in enumerate(FILE_LIMITS)}
    routes = ", ".join(f"nats-route://{HOST}:{port}" for port in route.values())
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for name, limit in FILE_LIMITS.items():
            conf = tmp_path / f"{name}.conf"
            conf.write_text(
                f"server_name: {name}\nlisten: {HOST}:{client[name]}\nserver_tags: ['node:{name}']\n"
                f"jetstream {{ store_dir: '{tmp_path / name}', max_file_store: {limit} }}\n"
                f"cluster {{ name: c, listen: {HOST}:{route[name]}, routes: [{routes}] }}\n"
            )
            with open(tmp_path / f"{name}.log", "ab") as log:
                procs.append(
                    subprocess.Popen(
                        [str(NATS_SERVER), "-c", str(conf)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                    )
                )
        url = f"nats://{HOST}:{client['n2']}"
        await _until_placed(url, procs)
        yield url
    finally:
        await stop_servers(procs)


async def _until_placed(url: str, procs: list[subprocess.Popen[bytes]], within: float = 60.0) -> None:
    """Create and delete an R3 stream until it works: the servers place nothing before they know each
    other (no event to await across processes, so bounded polling)."""
    deadline = time.monotonic() + within
    while True:
        assert all(proc.poll() is None for proc in procs), "a nats-server exited"
        assert time.monotonic() < deadline, f"nats-server cluster placed no R3 stream within {within} s"
        try:
            nc = await nats.connect(url, max_reconnect_attempts=0)
        except Exception:
            await asyncio.sleep(0.2)
            continue
        try:
            body = json.dumps({"name": "WARM", "num_replicas": 3}).encode()
            reply = json.loads((await nc.request("$JS.API.STREAM.CREATE.WARM", body, timeout=10)).data)
            if "error" not in reply:
                await nc.request("$JS.API.STREAM.DELETE.WARM", b"", timeout=10)
                return
        except nats.errors.Error:
            pass
        finally:
            await nc.close()
        await asyncio.sleep(0.2)


class _OwnLimitsCluster(LocalCluster):
    """A local cluster whose every node reads its own TOML file: its max_file_store."""

    def command(self, spec: NodeSpec) -> list[str]:
        conf = self.data_dir.parent / f"{spec.name}.toml"
        conf.write_text(f"max_file_store = {FILE_LIMITS[spec.name]}\n")
        return [*super().command(spec), "--config", str(conf)]


@contextlib.contextmanager
def _jetraft_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    specs = plan_free_nodes(3, 0)
    for spec in specs:
        spec.tags = [f"node:{spec.name}"]
    cluster = _OwnLimitsCluster(specs, tmp_path / "data")
    cluster.start(timeout=60)
    try:
        yield cluster
    finally:
        cluster.stop()


async def test_placement_leaves_out_a_node_without_room_as_nats_server_does(tmp_path: Path) -> None:
    (tmp_path / "ref").mkdir()
    (tmp_path / "jetraft").mkdir()
    async with _nats_servers(tmp_path / "ref") as url:
        expected = await _creates(url, CREATES)
        expected_publishes = await _publishes(url)
    no_room = {"error": {"code": 400, "err_code": 10005, "description": "no suitable peers for placement, insufficient storage"}}
    assert expected == [
        no_room,
        {"nodes": 1, "on_n1": False},
        {"nodes": 3, "on_n1": True},
        {"nodes": 3, "on_n1": True},
        {"nodes": 2, "on_n1": False},
        {"nodes": 3, "on_n1": True},
    ]
    with _jetraft_cluster(tmp_path / "jetraft") as cluster:
        got = await _creates(cluster.client_urls[1], CREATES)
        got_publishes = await _publishes(cluster.client_urls[1])
        after = await _creates(cluster.client_urls[2], AFTER)
        nc = await nats.connect(cluster.client_urls[0])
        try:
            updates = []
            for name, max_bytes in (("H", 999), ("C2", 5501), ("C2", 5502)):
                body = json.dumps({"name": name, "subjects": [name], "num_replicas": 3 if name == "H" else 2,
                                   "max_bytes": max_bytes})  # fmt: skip
                reply = await nc.request(f"$JS.API.STREAM.UPDATE.{name}", body.encode(), timeout=20)
                updates.append(json.loads(reply.data).get("error"))
        finally:
            await nc.close()
    assert got == expected
    insufficient = {"code": 503, "err_code": 10023, "description": "insufficient resources"}
    assert [answer.get("error") for answer in expected_publishes] == [None] * 3 + [insufficient] + [None] * 4
    assert got_publishes == expected_publishes
    assert after == [no_room, {"nodes": 2, "on_n1": False}]
    # shrinking H frees a byte on every node; C2 is on n2 and n3, one of which also holds B: 2000 + G's 1500
    # + H's 999 + C2's 500 leave 5001 there, so C2 may grow to 5501 and no further
    assert updates[0] is None
    assert updates[1:] == [None, {"code": 500, "err_code": 10047, "description": "insufficient storage resources available"}]
