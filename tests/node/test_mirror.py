"""A mirror_direct mirror on the mirror node: copies its origin and answers the origin's Direct Gets."""

from __future__ import annotations

import json
from collections.abc import Iterator

import nats
import pytest
from nats.js.api import StreamConfig, StreamSource

from cluster.local_cluster import LocalCluster
from tests.node.cluster_fixtures import local_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(
        tmp_path_factory.mktemp("mirror"), nodes=3, mirror_nodes=1, extra_args=["--direct-get-policy", "local-first"]
    ) as running:
        yield running


async def test_mirror_copies_origin_and_answers_its_direct_gets(cluster: LocalCluster) -> None:
    nc = await nats.connect(cluster.client_urls[0])
    js = nc.jetstream()
    await js.add_stream(name="ORIG", subjects=["orig.>"], num_replicas=3, allow_direct=True)
    for i in range(20):
        await js.publish(f"orig.{i % 4}", b"v%d" % i)
    mirror = await js.add_stream(
        StreamConfig(name="ORIG_M", mirror=StreamSource(name="ORIG"), mirror_direct=True, num_replicas=1)
    )
    assert mirror.cluster is not None and mirror.cluster.leader == "m1"
    last = (await js.publish("orig.0", b"after")).seq

    mirror_client = await nats.connect(cluster.spec("m1").client_url)
    try:
        # read-your-writes on the mirror: it answers once it has copied `last`
        reply = await mirror_client.request(
            "$JS.API.DIRECT.GET.ORIG", json.dumps({"last_by_subj": "orig.0", "min_last_seq": last}).encode(), timeout=10
        )
        assert reply.headers is not None
        assert reply.headers["Jetraft-Node"] == "m1"
        assert reply.headers["Jetraft-Role"] == "mirror"
        assert reply.headers["Nats-Stream"] == "ORIG_M"
        assert int(reply.headers["Nats-Sequence"]) == last and reply.data == b"after"
    finally:
        await mirror_client.close()

    info = await js.stream_info("ORIG_M")
    assert info.state.messages == 21 and info.state.last_seq == last
    assert info.mirror is not None and info.mirror.name == "ORIG"
    with pytest.raises(nats.js.errors.APIError):
        await js.publish("orig.0", b"x", stream="ORIG_M")  # a mirror takes no publishes
    await js.delete_stream("ORIG_M")
    await js.delete_stream("ORIG")
    await nc.close()
