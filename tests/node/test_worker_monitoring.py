"""A two-worker node's HTTP port answers nats-server's monitoring endpoints for the node as a whole:
its own name and ports, clients of both workers in one /connz with cids no two workers share, the
streams each worker holds in one /jsz, and a worker that does not answer left out and named, without
the request hanging."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

from local.cluster import LocalCluster
from tests.node.cluster_fixtures import connect_to_member, local_cluster, publish_when_served

WORKERS = 2


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(Path(tmp_path_factory.mktemp("worker-monitoring")), nodes=1, workers=WORKERS) as running:
        yield running


def get(cluster: LocalCluster, endpoint: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(f"{cluster.spec('n1').http_url}/{endpoint}", timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


async def test_the_nodes_endpoints_show_both_workers_as_one_server(node: LocalCluster) -> None:
    clients = [
        await connect_to_member(node, "n1/w0", name="on-w0"),
        await connect_to_member(node, "n1/w1", name="on-w1"),
    ]
    try:
        js = clients[0].jetstream(timeout=10)
        for name in ("ONE", "TWO"):  # one R1 stream per worker: each goes to the worker with fewer groups
            await js.add_stream(name=name, subjects=[f"{name.lower()}.>"])
            await publish_when_served(js, f"{name.lower()}.x", b"m")
        await clients[1].subscribe("watched.*")
        await clients[1].flush()

        status, varz = get(node, "varz")
        assert status == 200
        spec = node.spec("n1")
        assert varz["server_name"] == "n1" and varz["port"] == spec.client_port and varz["http_port"] == spec.http_port
        assert varz["connections"] >= 2 and "unanswered_workers" not in varz
        assert varz["jetstream"]["config"]["store_dir"].endswith("/n1")

        _, connz = get(node, "connz?subs=1")
        ours = {c["name"]: c for c in connz["connections"] if c.get("name") in ("on-w0", "on-w1")}
        assert set(ours) == {"on-w0", "on-w1"} and connz["total"] == varz["connections"]
        # worker i of 2 numbers its clients i+1, i+3, ...: each cid names one client of the node
        assert ours["on-w0"]["cid"] % WORKERS == 1 and ours["on-w1"]["cid"] % WORKERS == 0
        assert "watched.*" in ours["on-w1"]["subscriptions_list"]
        for client in clients:
            cid = client._server_info["client_id"]
            _, one = get(node, f"connz?cid={cid}")
            assert [c["cid"] for c in one["connections"]] == [cid] and one["total"] == 1
        _, page = get(node, "connz?limit=1&offset=1")
        assert page["num_connections"] == 1 and page["connections"][0]["cid"] == connz["connections"][1]["cid"]
        assert get(node, "connz?sort=nonsense") == (400, "invalid sorting option: nonsense")

        _, jsz = get(node, "jsz?streams=true")
        assert jsz["streams"] == 2 and jsz["messages"] == 2
        streams = jsz["account_details"][0]["stream_detail"]
        assert [s["name"] for s in streams] == ["ONE", "TWO"]
        assert {s["cluster"]["leader"] for s in streams} == {"n1/w0", "n1/w1"}
        _, subsz = get(node, "subsz?subs=1&test=watched.x")
        assert [s["cid"] for s in subsz["subscriptions_list"]] == [ours["on-w1"]["cid"]]
        _, accstatz = get(node, "accstatz")
        (global_account,) = accstatz["account_statz"]
        assert global_account["conns"] == varz["connections"]
    finally:
        for client in clients:
            await client.close()


def test_a_worker_that_does_not_answer_is_left_out_and_named(tmp_path: Path) -> None:
    """On a node of its own: a worker frozen past the route ping timeout (3 s) loses its sibling's route
    and so, until it redials, the interest the other tests here rely on."""
    with local_cluster(tmp_path, nodes=1, workers=WORKERS) as node:
        _freeze_a_worker_and_ask(node)


def _freeze_a_worker_and_ask(node: LocalCluster) -> None:
    _, health = get(node, "healthz")
    frozen = int(health["pids"]["n1/w1"])
    os.kill(frozen, signal.SIGSTOP)
    try:
        started = time.monotonic()
        status, varz = get(node, "varz")
        assert time.monotonic() - started < 8  # the worker's ask is bounded (2 s), never a hang
        assert status == 200 and varz["server_name"] == "n1"
        assert varz["unanswered_workers"] == ["n1/w1"]
    finally:
        os.kill(frozen, signal.SIGCONT)


async def replies_to_each(
    nc: nats.NATS, subjects: list[str], payload: bytes = b"{}", within: float = 10.0, extra: float = 2.0
) -> list[list[Any]]:
    """Every reply to one request on each of `subjects`, all asked at once: gathered until each has one,
    then `extra` seconds more for any second answer (a server answers at once or not at all)."""
    prefix, replies = nc.new_inbox(), asyncio.Queue[Any]()
    sub = await nc.subscribe(f"{prefix}.*", cb=replies.put)
    for index, subject in enumerate(subjects):
        await nc.publish(subject, payload, reply=f"{prefix}.{index}")
    got: list[list[Any]] = [[] for _ in subjects]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    settled: float | None = None
    try:
        while (left := (settled or deadline) - loop.time()) > 0:
            try:
                msg = await asyncio.wait_for(replies.get(), left)
            except TimeoutError:
                break
            # an empty message is the server's no-responders status: nobody serves that subject
            got[int(msg.subject.rsplit(".", 1)[-1])].append(json.loads(msg.data) if msg.data else msg.headers)
            if settled is None and all(got):
                settled = loop.time() + extra
    finally:
        await sub.unsubscribe()
    return got


async def test_sys_requests_are_answered_once_by_the_node_with_its_bodies(node: LocalCluster) -> None:
    """`$SYS.REQ.SERVER.PING` and its kinds, and the node's id (the one its answers give) or a worker's (in
    its clients' INFO), are answered once, by the node: its name, its id, and the bodies its HTTP port
    merges from both workers, as one nats-server answers for its server."""
    clients = [await connect_to_member(node, member) for member in ("n1/w0", "n1/w1")]
    try:
        _, varz = get(node, "varz")
        node_id = varz["server_id"]
        worker_id = clients[1]._server_info["server_id"]
        subjects = [
            "$SYS.REQ.SERVER.PING",
            "$SYS.REQ.SERVER.PING.VARZ",
            "$SYS.REQ.SERVER.PING.CONNZ",
            "$SYS.REQ.SERVER.PING.JSZ",
            "$SYS.REQ.SERVER.PING.HEALTHZ",
            f"$SYS.REQ.SERVER.{node_id}.SUBSZ",
            f"$SYS.REQ.SERVER.{worker_id}.ROUTEZ",
        ]
        answers = await replies_to_each(clients[0], subjects)
        assert [len(replies) for replies in answers] == [1] * len(subjects), answers
        (statsz, varz_over_nats, connz, jsz, health, subsz, routez) = [replies[0] for replies in answers]
        for answer in (statsz, varz_over_nats, connz, jsz, health, subsz, routez):
            assert "server" in answer, (subjects, answers)
            assert (answer["server"]["name"], answer["server"]["id"]) == ("n1", node_id)
        assert varz_over_nats["data"]["server_name"] == "n1" and varz_over_nats["data"]["server_id"] == node_id
        cids = {c._server_info["client_id"] for c in clients}
        assert cids <= {c["cid"] for c in connz["data"]["connections"]}
        assert statsz["statsz"]["connections"] >= 2 and statsz["statsz"]["active_servers"] == 1
        assert jsz["data"]["server_id"] == node_id
        assert health["data"]["status"] == "ok" and health["data"]["status_code"] == 200
        assert subsz["data"]["server_id"] == node_id and routez["data"]["server_name"] == "n1"
        # a bad query is refused once, with the endpoint's words
        [[refusal]] = await replies_to_each(clients[0], ["$SYS.REQ.SERVER.PING.CONNZ"], b'{"sort": "nonsense"}')
        assert refusal["error"] == {"code": 400, "description": "invalid sorting option: nonsense"}
        assert refusal["server"]["name"] == "n1"
    finally:
        for client in clients:
            await client.close()


def counts(node: LocalCluster) -> tuple[int, int]:
    _, varz = get(node, "varz")
    _, subsz = get(node, "subsz")
    assert "jetraft_worker_interest" not in varz and "jetraft_worker_interest" not in subsz
    return varz["subscriptions"], subsz["num_subscriptions"]


def settled_counts(node: LocalCluster) -> tuple[int, int]:
    """The node's counts once two reads a moment apart agree: the clients an earlier test closed leave
    the workers' indexes on the workers' own time (bounded)."""
    last = counts(node)
    for _ in range(50):
        time.sleep(0.2)
        now = counts(node)
        if now == last:
            return now
        last = now
    raise AssertionError(f"the node's subscription count never settled: {last}")


async def test_the_nodes_subscriptions_count_each_subscription_once(node: LocalCluster) -> None:
    """Each worker's index holds its siblings' interest too; the node counts each client's subscription
    once, as one server's index does: three on one worker and five on the other add eight, in /varz and
    in /subsz, once each worker has heard of the other's (a message across proves it)."""
    clients = [await connect_to_member(node, member) for member in ("n1/w0", "n1/w1")]
    try:
        before = settled_counts(node)
        subjects = [[f"counted.w0.{i}" for i in range(3)], [f"counted.w1.{i}" for i in range(5)]]
        received: list[asyncio.Queue[Any]] = [asyncio.Queue(), asyncio.Queue()]
        for client, own, queue in zip(clients, subjects, received, strict=True):
            for subject in own:
                await client.subscribe(subject, cb=queue.put)
            await client.flush()
        # each worker holds the other's interest once a message from it reaches every subscription: the
        # interest travels between the workers on its own time, and a message sent before it is dropped
        # (nobody there yet), so each subject is sent again until it arrives (bounded)
        for sender, other in ((0, 1), (1, 0)):
            for subject in subjects[other]:
                for _ in range(100):
                    await clients[sender].publish(subject, b"x")
                    try:
                        got = await asyncio.wait_for(received[other].get(), 0.2)
                    except TimeoutError:
                        continue
                    if got.subject == subject:
                        break
                else:
                    raise AssertionError(f"{subject} never reached worker {other}'s client")
        after = counts(node)
        assert (after[0] - before[0], after[1] - before[1]) == (8, 8)
    finally:
        for client in clients:
            await client.close()
