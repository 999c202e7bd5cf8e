"""The account's max_storage across a three-node cluster: a stream's leader refuses a publish once the
other streams, led on other nodes, hold what the account may store (it hears their usage every second)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import nats

from cluster.runtime.workers import node_of
from local.cluster import LocalCluster, plan_free_nodes
from local.ports import HOST
from tests.chaos.node_metrics import scrape, value

LIMITS = "accounts: { A: { users: [ {user: a, password: a} ], jetstream: { max_file: 300 } } }\n"
STORED = 4 * 71  # four messages of subject `s` and 40 bytes


def _until(check: Callable[[], bool], what: str, within: float = 30.0) -> None:
    """Poll another process's /metrics (nothing to await across processes), bounded."""
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {within} s"
        time.sleep(0.1)


def _heard(cluster: LocalCluster, member: str, stream: str) -> float:
    """What cluster member `member` (a node, or one worker of it: each worker hears the reports and
    counts alone) last heard `stream` holds (the leaders' usage reports, one a second)."""
    samples = scrape(cluster.spec(member).http_url)
    return value(samples, "jetraft_account_stream_bytes", node=member, stream=stream)


def _api_counts(cluster: LocalCluster, member: str) -> tuple[float, float]:
    samples = scrape(cluster.spec(member).http_url)
    return (
        value(samples, "jetraft_account_api_responses", node=member, kind="total"),
        value(samples, "jetraft_account_api_responses", node=member, kind="errors"),
    )


async def test_a_stream_led_elsewhere_counts_against_the_accounts_storage(tmp_path: Path) -> None:
    conf = tmp_path / "limits.conf"
    conf.write_text(LIMITS)
    specs = plan_free_nodes(3, 0)
    for spec in specs:
        spec.tags = [f"node:{spec.name}"]
    cluster = LocalCluster(specs, tmp_path / "data", extra_args=["--config", str(conf)])
    cluster.start(timeout=60)
    try:
        nc = await nats.connect(f"nats://a:a@{HOST}:{specs[0].client_port}")
        try:
            leaders = {}
            for name, node in (("S", specs[1].name), ("T", specs[2].name)):
                body = {"name": name, "subjects": [name.lower()], "placement": {"tags": [f"node:{node}"]}}
                reply = await nc.request(f"$JS.API.STREAM.CREATE.{name}", json.dumps(body).encode(), timeout=30)
                leaders[name] = json.loads(reply.data)["cluster"]["leader"]
                assert node_of(leaders[name]) == node
            for seq in range(1, 5):
                reply = await nc.request("s", b"x" * 40, timeout=10)
                assert json.loads(reply.data) == {"stream": "S", "seq": seq}
            # T's leader (n3) has heard what S holds, led on n2: a report, which every node got
            _until(lambda: _heard(cluster, leaders["T"], "S") == STORED, "n3 to hear S's usage")
            reply = await nc.request("t", b"x" * 40, timeout=10)
            assert json.loads(reply.data) == {
                "error": {"code": 400, "err_code": 10002, "description": "resource limits exceeded for account"},
                "stream": "T",
                "seq": 0,
            }
            reply = await nc.request("s", b"x" * 40, timeout=10)
            assert json.loads(reply.data)["error"]["err_code"] == 10002
            # ACCOUNT INFO's api counts add up what every node answered: the two creates (each answered by
            # its stream's new leader, on n2 and n3) and one error from the meta leader
            reply = await nc.request("$JS.API.STREAM.CREATE.U", b"{", timeout=10)
            assert json.loads(reply.data)["error"]["err_code"] == 10025
            meta = cluster.meta_leader_member()
            assert meta is not None
            _until(lambda: _api_counts(cluster, meta) == (3, 1), "the meta leader to hear every node's count")
            info = json.loads((await nc.request("$JS.API.INFO", b"", timeout=10)).data)
            assert (info["api"]["total"], info["api"]["errors"]) == (3, 1)
        finally:
            await nc.close()
    finally:
        cluster.stop()
