"""A stream's Raft role series and last sequence in /metrics, kept in plain numbers by its replica and
exported at each scrape (cluster/stream/replica.py `report_metrics`): what a scrape shows follows what
happened since the last one."""

from __future__ import annotations

import asyncio
from pathlib import Path

import nats
from nats.js.api import StreamConfig

from cluster.runtime.workers import node_of
from tests.chaos.node_metrics import scrape, value
from tests.node.cluster_fixtures import local_cluster


async def test_a_scrape_shows_the_streams_leadership_and_last_sequence(tmp_path: Path) -> None:
    with local_cluster(tmp_path, nodes=1) as cluster:
        spec = cluster.specs[0]
        nc = await nats.connect(spec.client_url)
        try:
            js = nc.jetstream(timeout=10)
            await js.add_stream(StreamConfig(name="SERIES", subjects=["series.>"]))
            for n in range(3):
                await js.publish("series.a", str(n).encode())
            samples = await asyncio.to_thread(scrape, spec.http_url)
            groups = {labels["group"] for name, labels, _ in samples if name == "jetraft_raft_is_leader"}
            group = next(group for group in groups if group.startswith("S-SERIES-"))
            # the member holding the R1 stream: the node itself, or one of its workers
            member = next(
                labels["node"] for name, labels, _ in samples if name == "jetraft_raft_is_leader" and labels["group"] == group
            )
            assert node_of(member) == spec.name
            assert value(samples, "jetraft_raft_is_leader", group=group, node=member) == 1
            assert value(samples, "jetraft_raft_leader_changes_total", group=group, node=member) == 1
            assert value(samples, "jetraft_raft_term", group=group, node=member) >= 1
            assert value(samples, "jetraft_stream_last_seq", stream="SERIES", role="leader") == 3

            for n in range(2):
                await js.publish("series.b", str(n).encode())
            samples = await asyncio.to_thread(scrape, spec.http_url)
            assert value(samples, "jetraft_stream_last_seq", stream="SERIES", role="leader") == 5
            # counted once, not again at each scrape
            assert value(samples, "jetraft_raft_leader_changes_total", group=group, node=member) == 1
            assert value(samples, "jetraft_raft_is_leader", group=group, node=member) == 1
        finally:
            await nc.close()
