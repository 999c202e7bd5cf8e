"""A one-node cluster's meta group has one voter: the node leads it as soon as it starts, not after an
election timeout (1-2 s during which its /healthz and its JetStream API would wait)."""

from __future__ import annotations

import inspect
import json
from datetime import datetime
from pathlib import Path

from cluster.runtime.context import GROUP_OPTIONS
from raft.driver import RaftHost
from tests.node.config_file_node import node_from_config

# the shortest election timeout a meta group waits for before campaigning on its own
SHORTEST_ELECTION_S = GROUP_OPTIONS.election_tick * inspect.signature(RaftHost).parameters["tick_interval"].default


def _seconds(log_path: Path, event: str, after: float = 0.0) -> float:
    """When the log's first `event` after `after` (unix seconds) was written."""
    for line in log_path.read_text().splitlines():
        if not line.startswith("{"):
            continue
        record = json.loads(line)
        at = datetime.fromisoformat(record["timestamp"].replace("Z", "+00:00")).timestamp()
        if record.get("event") == event and at > after:
            return at
    raise AssertionError(f"no {event} in {log_path}")


async def test_a_lone_node_leads_its_meta_group_at_once_on_first_start_and_on_restart(tmp_path: Path) -> None:
    assert SHORTEST_ELECTION_S >= 0.5
    after = 0.0
    for _ in range(2):  # a fresh node, then the same node on its data
        async with node_from_config(tmp_path, "") as node:
            started = _seconds(node.log_path, "node_started", after)
            led = _seconds(node.log_path, "meta_leader", after)
        # well below the election timeout it would otherwise wait for (old code: 1.0-2.0 s)
        assert led - started < SHORTEST_ELECTION_S / 2, (started, led)
        after = max(started, led)
