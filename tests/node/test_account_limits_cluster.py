"""The account's max_storage across a three-node cluster: a stream's leader refuses a publish once the
other streams, led on other nodes, hold what the account may store (it hears their usage every second)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import nats

from local.cluster import LocalCluster, plan_free_nodes
from local.ports import HOST

LIMITS = "accounts: { A: { users: [ {user: a, password: a} ], jetstream: { max_file: 300 } } }\n"
STORED = 4 * 71  # four messages of subject `s` and 40 bytes


async def _usage_report_with(nc: nats.NATS, stream: str, size: int, reports: int) -> None:
    """Until `reports` usage reports in a row (one a second) have said `stream` holds `size` bytes: by the
    second, the first has reached every node."""
    seen: asyncio.Queue[dict[str, list[object]]] = asyncio.Queue()

    async def on_report(msg: nats.aio.msg.Msg) -> None:
        await seen.put(json.loads(msg.data))

    sub = await nc.subscribe("$JSR.USAGE", cb=on_report)
    try:
        matching = 0
        async with asyncio.timeout(30):
            while matching < reports:
                report = await seen.get()
                if stream in report:
                    matching = matching + 1 if report[stream][1] == size else 0
    finally:
        await sub.unsubscribe()


class ApiCountReports:
    """The latest API counts each node reported on $JSR.APIUSAGE (a node reports when its counts change)."""

    def __init__(self) -> None:
        self.latest: dict[str, tuple[int, int]] = {}
        self.changed = asyncio.Event()

    async def on_report(self, msg: nats.aio.msg.Msg) -> None:
        node, total, errors = json.loads(msg.data)
        self.latest[node] = (total, errors)
        self.changed.set()

    async def add_up_to(self, total: int, errors: int) -> None:
        async with asyncio.timeout(30):
            while (sum(t for t, _ in self.latest.values()), sum(e for _, e in self.latest.values())) != (total, errors):
                self.changed.clear()
                await self.changed.wait()


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
            reports = ApiCountReports()
            await nc.subscribe("$JSR.APIUSAGE", cb=reports.on_report)
            await nc.flush()
            for name, node in (("S", specs[1].name), ("T", specs[2].name)):
                body = {"name": name, "subjects": [name.lower()], "placement": {"tags": [f"node:{node}"]}}
                reply = await nc.request(f"$JS.API.STREAM.CREATE.{name}", json.dumps(body).encode(), timeout=30)
                assert json.loads(reply.data)["cluster"]["leader"] == node
            for seq in range(1, 5):
                reply = await nc.request("s", b"x" * 40, timeout=10)
                assert json.loads(reply.data) == {"stream": "S", "seq": seq}
            await _usage_report_with(nc, "S", STORED, reports=2)
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
            await reports.add_up_to(total=3, errors=1)
            info = json.loads((await nc.request("$JS.API.INFO", b"", timeout=10)).data)
            assert (info["api"]["total"], info["api"]["errors"]) == (3, 1)
        finally:
            await nc.close()
    finally:
        cluster.stop()
