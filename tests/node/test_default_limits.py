"""A node whose config sets no `max_memory_store` / `max_file_store` holds nats-server's own defaults (75% of
the machine's memory, 75% of the disk available at start) and enforces them as nats-server 2.15.1 does: a
memory stream of a terabyte is refused, not reserved (cluster/runtime/default_limits.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import nats

from cluster.runtime.default_limits import default_limits
from local.ports import HOST
from tests.node.cluster_fixtures import local_cluster
from tests.node.test_server_limits import on_both_with_limits, varz_and_jsz
from tests.pipeline.servers import NatsServerProcesses

TIB = 1 << 40
GIB = 1 << 30

# beyond any machine this suite runs on, and well within it
STANDALONE: list[tuple[str, dict[str, Any]]] = [
    ("CREATE", {"name": "HUGE_MEM", "storage": "memory", "max_bytes": TIB}),
    ("CREATE", {"name": "MEM", "storage": "memory", "max_bytes": GIB}),
    ("CREATE", {"name": "HUGE_FILE", "max_bytes": 1 << 50}),
    ("CREATE", {"name": "FILE", "max_bytes": GIB}),
    ("UPDATE", {"name": "MEM", "storage": "memory", "max_bytes": TIB}),
]
CLUSTERED: list[tuple[str, dict[str, Any]]] = [
    ("CREATE", {"name": "HUGE_MEM", "storage": "memory", "max_bytes": TIB, "num_replicas": 3}),
    ("CREATE", {"name": "HUGE_FILE", "max_bytes": 1 << 50, "num_replicas": 3}),
    ("CREATE", {"name": "MEM", "storage": "memory", "max_bytes": GIB, "num_replicas": 3}),
    ("UPDATE", {"name": "MEM", "storage": "memory", "max_bytes": TIB, "num_replicas": 3}),
]


def test_the_defaults_are_three_quarters_of_memory_and_of_the_available_disk(tmp_path: Path) -> None:
    memory, storage = default_limits(str(tmp_path / "not" / "made" / "yet"))
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert memory == physical // 4 * 3
    disk = os.statvfs(tmp_path)
    available = disk.f_bavail * disk.f_bsize // 4 * 3
    assert abs(storage - available) <= 0.01 * available  # read a moment apart; others write meanwhile
    assert default_limits(str(tmp_path / "not" / "made" / "yet")) == (memory, storage)  # read once


async def _ask(url: str, requests: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Each request's error (or "ok"); both fixtures hand over a cluster whose meta leader places streams."""
    nc = await nats.connect(url)
    answers: list[Any] = []
    try:
        for op, body in requests:
            subject = f"$JS.API.STREAM.{op}.{body['name']}"
            payload = json.dumps({"subjects": [body["name"].lower()], **body}).encode()
            reply = json.loads((await nc.request(subject, payload, timeout=10)).data)
            answers.append((op, body["name"], reply.get("error", "ok")))
    finally:
        await nc.close()
    return answers


async def _standalone(client_port: int, http_port: int) -> list[Any]:
    answers = await _ask(f"nats://{HOST}:{client_port}", STANDALONE)
    varz, jsz = await varz_and_jsz(http_port)
    config = varz["jetstream"]["config"]
    answers.append(
        {"reserved": (jsz["reserved_memory"], jsz["reserved_storage"]), "max_memory": config["max_memory"]}
    )
    answers.append(config["max_storage"])
    return answers


async def test_a_node_without_limits_refuses_what_nats_server_refuses(tmp_path: Path) -> None:
    expected, got = await on_both_with_limits(tmp_path, "", _standalone)
    codes = [
        answer[2] if answer[2] == "ok" else answer[2]["err_code"] for answer in expected[: len(STANDALONE)]
    ]
    assert codes == [10028, "ok", 10047, "ok", 10028]
    assert expected[-2]["reserved"] == (GIB, GIB)
    assert got[:-1] == expected[:-1]
    # the disk's available space moves between the two starts: the same reading within a percent
    assert abs(got[-1] - expected[-1]) <= 0.01 * expected[-1]


async def test_a_cluster_without_limits_places_what_nats_server_places(tmp_path: Path) -> None:
    with NatsServerProcesses(3, tmp_path / "reference") as reference:
        expected = await _ask(reference.target().urls[0], CLUSTERED)
    with local_cluster(tmp_path / "jetraft", nodes=3) as cluster:
        got = await _ask(cluster.client_urls[0], CLUSTERED)
    assert [answer[2] if answer[2] == "ok" else answer[2]["err_code"] for answer in expected] == [
        10005,
        10005,
        "ok",
        10028,
    ]
    assert got == expected
