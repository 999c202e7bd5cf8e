"""A deleted stream's and consumer's Raft groups leave /metrics: a deleted group's leader no longer shows
`jetraft_raft_is_leader 1`, and a node that creates and deletes streams does not pile up their series."""

from __future__ import annotations

import asyncio
from pathlib import Path

import nats
from nats.js.api import ConsumerConfig, StreamConfig

from tests.chaos.node_metrics import scrape
from tests.node.cluster_fixtures import local_cluster


def _groups(http_url: str) -> set[str]:
    return {labels["group"] for name, labels, _ in scrape(http_url) if name.startswith("jetraft_raft_") and "group" in labels}


async def test_a_deleted_streams_groups_leave_the_metrics(tmp_path: Path) -> None:
    with local_cluster(tmp_path, nodes=1) as cluster:
        http_url = cluster.specs[0].http_url
        nc = await nats.connect(cluster.specs[0].client_url)
        try:
            js = nc.jetstream(timeout=10)
            await js.add_stream(StreamConfig(name="GONE", subjects=["gone.>"]))
            await js.add_consumer("GONE", ConsumerConfig(durable_name="worker"))
            await js.add_stream(StreamConfig(name="KEPT", subjects=["kept.>"]))
            before = await asyncio.to_thread(_groups, http_url)
            assert any(group.startswith("S-GONE-") for group in before), before
            assert any(group.startswith("C-GONE-worker-") for group in before), before
            await js.delete_stream("GONE")
            after: set[str] = set()
            for _ in range(100):  # the groups stop as the delete is applied; bounded
                after = await asyncio.to_thread(_groups, http_url)
                if not any("GONE" in group for group in after):
                    break
                await asyncio.sleep(0.1)
            assert not any("GONE" in group for group in after), after
            assert any(group.startswith("S-KEPT-") for group in after) and "_meta_" in after
        finally:
            await nc.close()
