"""A node of two worker processes (`jetraft node --workers 2`), three such nodes: the supervisor's
health and metrics, host-aware placement, connections and CPU spread over a node's workers, a worker
restarted after a crash, and no worker outliving its supervisor."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from cluster.runtime.workers import node_of
from local.cluster import LocalCluster, plan_free_nodes

WORKERS = 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    running = LocalCluster(plan_free_nodes(3, 0, workers=WORKERS), tmp_path_factory.mktemp("workers"))
    running.start(timeout=90)
    try:
        yield running
    finally:
        running.stop()


def _health(cluster: LocalCluster, node: str) -> dict:
    # asked again until healthy, bounded: a worker's replicas just created (or restarted) report 503
    # until they have caught up, which takes seconds on a loaded machine
    seen: list[dict] = []

    def healthy() -> bool:
        body = cluster.health(node, timeout=5.0)
        if body is not None:
            seen.append(body)
        return body is not None

    cluster.wait_until(healthy, 60, f"{node} to be healthy")
    return seen[-1]


def _worker_pids(cluster: LocalCluster, node: str) -> dict[str, int]:
    return {name: int(pid) for name, pid in _health(cluster, node)["pids"].items()}


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far (/proc/<pid>/stat fields 14 and 15)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_the_node_answers_health_and_metrics_for_every_worker(cluster: LocalCluster) -> None:
    body = _health(cluster, "n1")
    assert body["node"] == "n1"
    assert sorted(body["workers"]) == ["n1/w0", "n1/w1"]
    assert all(worker["status"] == "ok" for worker in body["workers"].values())
    # the meta group is led by some node's worker 0: one voter per machine
    assert body["meta_leader_worker"].endswith("/w0") and body["meta_leader"] == node_of(body["meta_leader_worker"])
    with urllib.request.urlopen(f"{cluster.spec('n1').http_url}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    for worker in ("n1/w0", "n1/w1"):
        assert f'jetraft_worker_up{{node="n1",worker="{worker}"}} 1.0' in text
        assert f'jetraft_raft_term{{group="_meta_",node="{worker}",worker="{worker}"}}' in text


async def test_replicas_of_a_group_sit_on_different_machines_and_spread_over_workers(
    cluster: LocalCluster,
) -> None:
    nc = await nats.connect(cluster.client_urls[0])
    try:
        js = nc.jetstream()
        replicas: dict[str, list[str]] = {}
        for index in range(4):
            name = f"PLACED{index}"
            await js.add_stream(name=name, subjects=[f"placed.{index}.>"], num_replicas=3)
            info = await js.stream_info(name)
            assert info.cluster is not None and info.cluster.leader
            replicas[name] = [info.cluster.leader, *(peer.name for peer in info.cluster.replicas or [])]
            assert (await js.publish(f"placed.{index}.x", b"v")).seq == 1
        for name, peers in replicas.items():
            assert sorted(node_of(peer) for peer in peers) == ["n1", "n2", "n3"], (name, peers)
        used = {peer for peers in replicas.values() for peer in peers}
        assert used == {f"n{node}/w{worker}" for node in (1, 2, 3) for worker in range(WORKERS)}, replicas
        for name in replicas:
            await js.delete_stream(name)
    finally:
        await nc.close()


async def test_clients_of_one_node_land_on_every_worker(cluster: LocalCluster) -> None:
    seen: set[str] = set()
    clients = []
    try:
        for _ in range(40):  # SO_REUSEPORT hashes each connection: all 40 on one worker is 2^-39
            nc = await nats.connect(cluster.client_urls[0])
            clients.append(nc)
            seen.add(nc._server_info["server_name"])
            assert nc._server_info["connect_urls"][0] == cluster.client_urls[0].removeprefix("nats://")
            if len(seen) == WORKERS:
                break
        assert seen == {"n1/w0", "n1/w1"}
    finally:
        for nc in clients:
            await nc.close()


async def test_a_node_s_load_spreads_over_its_workers(cluster: LocalCluster, record_property) -> None:
    nc = await nats.connect(cluster.client_urls[0])
    js = nc.jetstream()
    streams = ["CPU_A", "CPU_B"]
    for index, name in enumerate(streams):
        await js.add_stream(name=name, subjects=[f"cpu.{index}.>"], num_replicas=3, allow_direct=True)
    await nc.close()
    pids = _worker_pids(cluster, "n1")
    before = {name: _cpu_seconds(pid) for name, pid in pids.items()}

    async def client(number: int) -> int:
        conn = await nats.connect(cluster.client_urls[0])
        conn_js = conn.jetstream()
        done = 0
        deadline = time.monotonic() + 4.0
        try:
            while time.monotonic() < deadline:
                acks = [conn_js.publish(f"cpu.{(number + k) % 2}.x", b"x" * 64) for k in range(20)]
                done += len(await asyncio.gather(*acks))
        finally:
            await conn.close()
        return done

    published = sum(await asyncio.gather(*(client(number) for number in range(8))))
    used = {name: _cpu_seconds(pid) - before[name] for name, pid in pids.items()}
    total = sum(used.values())
    record_property("worker_cpu_seconds", json.dumps(used))
    record_property("published", published)
    print(f"n1 workers' CPU during {published} publishes: {used}")
    assert published > 0 and total > 0
    for name, seconds in used.items():
        assert seconds >= 0.2 * total, f"{name} did {seconds:.2f} s of n1's {total:.2f} s: {used}"


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def test_a_crashed_worker_is_restarted(cluster: LocalCluster) -> None:
    old = _worker_pids(cluster, "n2")["n2/w1"]
    os.kill(old, signal.SIGKILL)

    def restarted() -> bool:
        body = cluster.health("n2")
        return body is not None and body.get("pids", {}).get("n2/w1") not in (None, old)

    _wait(restarted, 60, "n2/w1 to be restarted and healthy")
    with urllib.request.urlopen(f"{cluster.spec('n2').http_url}/metrics", timeout=5) as resp:
        assert 'jetraft_worker_restarts_total{node="n2",worker="n2/w1"} 1.0' in resp.read().decode()


def test_workers_die_with_a_killed_supervisor(cluster: LocalCluster) -> None:
    pids = _worker_pids(cluster, "n3")
    cluster.kill_node("n3")  # SIGKILL: the supervisor runs no handler
    _wait(lambda: not any(_alive(pid) for pid in pids.values()), 10, f"n3's workers {pids} to exit")
    cluster.restart_node("n3")
    cluster.wait_ready(90, ["n3"])
    assert sorted(_worker_pids(cluster, "n3")) == ["n3/w0", "n3/w1"]


def test_a_stopped_node_leaves_no_worker_running(cluster: LocalCluster) -> None:
    pids = _worker_pids(cluster, "n1")
    cluster.kill_node("n1", signal.SIGTERM)
    assert cluster.procs["n1"].returncode == 0
    assert not [pid for pid in pids.values() if _alive(pid)]
