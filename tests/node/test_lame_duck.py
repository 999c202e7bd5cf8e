"""Lame duck mode (SIGUSR2, as nats-server's `--signal ldm`): the node stops taking clients, hands its
stream leaderships over, tells its clients with an INFO `ldm: true` (nats-py's lame_duck_mode_cb), closes
them after the grace period and exits 0; its clients reconnect to the other nodes and carry on. Before,
SIGUSR2's default action killed the node at once, and `lame_duck_duration`/`lame_duck_grace_period` in a
config file were refused."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import nats
import pytest

from cluster.node.config import ConfigError, NodeConfig, load_nats_conf
from cluster.node.lame_duck import close_interval
from cluster.runtime.workers import node_of
from local.cluster import LocalCluster
from local.ports import free_port_base
from tests.node.cluster_fixtures import local_cluster, log_problems, publish_when_served
from tests.node.config_file_node import node_config_text

LAME_DUCK_CONF = 'lame_duck_duration: "30s"\nlame_duck_grace_period: "1s"\n'


async def stream_leader(nc: nats.NATS, stream: str) -> str:
    info = json.loads((await nc.request(f"$JS.API.STREAM.INFO.{stream}", b"", timeout=10)).data)
    return info["cluster"]["leader"]


def refused(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(2)
        try:
            sock.connect((host, port))
        except ConnectionRefusedError:
            return True
        return False


async def test_a_node_in_lame_duck_mode_hands_over_and_lets_its_clients_go(tmp_path: Path) -> None:
    conf = tmp_path / "lame-duck.conf"
    conf.write_text(LAME_DUCK_CONF)
    with local_cluster(tmp_path / "cluster", extra_args=["--config", str(conf)]) as cluster:
        await _lame_duck_scenario(cluster)


async def _lame_duck_scenario(cluster: LocalCluster) -> None:
    admin = await nats.connect(cluster.client_urls[0])
    js = admin.jetstream(timeout=10)
    await js.add_stream(name="LDM", subjects=["ldm.>"], num_replicas=3)
    await publish_when_served(js, "ldm.a", b"before")
    leaving = node_of(await stream_leader(admin, "LDM"))
    spec = cluster.spec(leaving)
    stayer = next(s for s in cluster.specs if s.name != leaving)
    await admin.close()

    told, reconnected = asyncio.Event(), asyncio.Event()

    async def lame_duck_mode_cb() -> None:
        told.set()

    async def reconnected_cb() -> None:
        reconnected.set()

    client = await nats.connect(
        spec.client_url,
        lame_duck_mode_cb=lame_duck_mode_cb,
        reconnected_cb=reconnected_cb,
        reconnect_time_wait=0.2,
        max_reconnect_attempts=-1,
    )
    other = await nats.connect(stayer.client_url)
    try:
        proc = cluster.procs[leaving]
        proc._jetraft_expected_exit = True  # type: ignore[attr-defined]
        signalled = time.monotonic()
        proc.send_signal(signal.SIGUSR2)
        # the leadership moves, and the clients are told (after it on one process; each worker of a
        # several-worker node goes its own way, so a client of the other worker may hear first)
        await asyncio.wait_for(told.wait(), 10)
        assert client.is_connected and client.connected_url.port == spec.client_port
        deadline = time.monotonic() + 10
        while node_of(leader := await stream_leader(other, "LDM")) == leaving:
            assert time.monotonic() < deadline, f"{leader} still leads LDM"
            await asyncio.sleep(0.1)
        assert await asyncio.to_thread(refused, "127.0.0.1", spec.client_port)
        ack = await other.jetstream(timeout=10).publish("ldm.b", b"while leaving")
        assert ack.seq == 2
        # after the grace period (1 s) its clients are closed; they find the other nodes (connect_urls)
        await asyncio.wait_for(reconnected.wait(), 20)
        assert client.connected_url.port != spec.client_port
        assert (await client.jetstream(timeout=10).publish("ldm.c", b"after")).seq == 3
        assert await asyncio.to_thread(proc.wait, 30) == 0
        assert time.monotonic() - signalled < 30
    finally:
        await client.close()
        await other.close()
    cluster.restart_node(leaving)
    await asyncio.to_thread(cluster.wait_ready, 60.0)
    assert log_problems(cluster) == []


@pytest.mark.parametrize(
    ("conf", "error"),
    [
        ('lame_duck_duration: "5s"', "invalid lame_duck_duration of 5s, minimum is 30 seconds"),
        ("lame_duck_duration: abc", "error parsing lame_duck_duration: time: invalid duration"),
        ('lame_duck_grace_period: "-5s"', "invalid lame_duck_grace_period, needs to be positive"),
        (
            'lame_duck_duration: "30s"\nlame_duck_grace_period: "40s"',
            "lame duck grace period (40s) should be strictly lower than lame duck duration (30s)",
        ),
    ],
)
def test_lame_duck_settings_are_refused_in_nats_servers_words(tmp_path: Path, conf: str, error: str) -> None:
    path = tmp_path / "bad.conf"
    path.write_text(conf + "\n")
    with pytest.raises(ConfigError, match=error.replace("(", r"\(").replace(")", r"\)")):
        NodeConfig(name="n1", **load_nats_conf(str(path))).validate()


def test_lame_duck_settings_are_taken_and_spread_the_closes(tmp_path: Path) -> None:
    path = tmp_path / "ldm.conf"
    path.write_text('lame_duck_duration: "1m30s"\nlame_duck_grace_period: "2.5s"\n')
    config = NodeConfig(name="n1", **load_nats_conf(str(path)))
    config.validate()
    assert (config.lame_duck_duration, config.lame_duck_grace_period) == (90.0, 2.5)
    assert NodeConfig(name="n1").lame_duck_duration == 120.0  # nats-server's defaults: 2m, 10s
    assert NodeConfig(name="n1").lame_duck_grace_period == 10.0
    assert close_interval(clients=2, duration_s=30, grace_s=1) == 1.0  # at most a second apart
    assert close_interval(clients=290, duration_s=30, grace_s=1) == pytest.approx(0.1)
    assert close_interval(clients=3, duration_s=10, grace_s=10) == pytest.approx(1 / 3)


def _catches_sigusr2(pid: int) -> bool:
    """Whether the process has a handler for SIGUSR2 (the SigCgt mask of /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGUSR2 - 1)))
    return False


def _has_loaded_aiohttp(pid: int) -> bool:
    """aiohttp's compiled parser is mapped: the process is past the imports of `jetraft node` (and of its
    supervisor), which come before the event loop and the handler it sets."""
    return "aiohttp" in Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize(
    "entry", [["-m", "cluster.node.command"], ["-m", "cli.main", "node"]], ids=["module", "jetraft-node"]
)
def test_lame_duck_asked_while_the_node_starts_begins_once_it_is_up(
    tmp_path: Path, entry: list[str], workers: int
) -> None:
    """A SIGUSR2 in the node's first second (its imports) killed it with the signal's default action: the
    handler came with the event loop. Now the process holds it from its first moments."""
    port = free_port_base(2 + workers)
    conf = tmp_path / "node.conf"
    conf.write_text(
        node_config_text(port, port + 1, port + 2, tmp_path / "data", "jetstream: enabled\n" + LAME_DUCK_CONF)
    )
    with open(tmp_path / "node.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, *entry, "--config", str(conf), "--workers", str(workers)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 30
        while not _catches_sigusr2(proc.pid):  # no event to await in another process: read its status
            assert proc.poll() is None and time.monotonic() < deadline, "the node never held SIGUSR2"
            time.sleep(0.002)
        proc.send_signal(signal.SIGUSR2)
        # early: the process is still importing
        assert not _has_loaded_aiohttp(proc.pid)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    logged = (tmp_path / "node.log").read_text()
    assert ("supervisor_lame_duck" if workers > 1 else "lame_duck_entered") in logged
