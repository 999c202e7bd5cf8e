"""`jetstream { sync_interval: always }`: nats-server's setting for an fsync before every acknowledgement,
which is what a jetraft node does to every Raft log write. The setting is taken, and /varz and /jsz report
the node's durability as nats-server reports it when so configured."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.node.test_server_limits import on_both_with_limits, varz_and_jsz


async def _sync_fields(_client_port: int, http_port: int) -> list[dict[str, Any]]:
    varz, jsz = await varz_and_jsz(http_port)
    return [
        {key: config.get(key) for key in ("sync_interval", "sync_always")}
        for config in (varz["jetstream"]["config"], jsz["config"])
    ]


async def test_sync_always_is_taken_and_reported_as_nats_server_reports_it(tmp_path: Path) -> None:
    expected, got = await on_both_with_limits(tmp_path, "sync_interval: always", _sync_fields)
    # nats-server keeps its default interval beside the flag
    assert expected == [{"sync_interval": 120_000_000_000, "sync_always": True}] * 2
    assert got == expected
