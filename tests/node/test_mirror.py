"""A mirror_direct mirror on the mirror node: copies its origin and answers the origin's Direct Gets."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import nats
import pytest
from nats.js.api import StreamConfig, StreamSource

from cluster.runtime.workers import node_of
from local.cluster import LocalCluster
from tests.node.cluster_fixtures import local_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(
        tmp_path_factory.mktemp("mirror"),
        nodes=3,
        mirror_nodes=1,
        extra_args=["--direct-get-policy", "local-first"],
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
    assert mirror.cluster is not None and node_of(mirror.cluster.leader) == "m1"
    last = (await js.publish("orig.0", b"after")).seq

    mirror_client = await nats.connect(cluster.spec("m1").client_url)
    try:
        # read-your-writes on the mirror: it answers once it has copied `last`
        reply = await mirror_client.request(
            "$JS.API.DIRECT.GET.ORIG",
            json.dumps({"last_by_subj": "orig.0", "min_last_seq": last}).encode(),
            timeout=10,
        )
        assert reply.headers is not None
        assert node_of(reply.headers["Jetraft-Node"]) == "m1"
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


async def test_sources_aggregate_streams_and_resume_from_their_position(cluster: LocalCluster) -> None:
    nc = await nats.connect(cluster.client_urls[1])
    js = nc.jetstream()
    await js.add_stream(name="SRC_A", subjects=["a.>"], num_replicas=3)
    await js.add_stream(name="SRC_B", subjects=["b.>"], num_replicas=1)
    for i in range(5):
        await js.publish("a.x", b"a%d" % i)
        await js.publish("b.y", b"b%d" % i, headers={"X-Origin": "b"})
    await js.add_stream(
        StreamConfig(
            name="AGG",
            sources=[StreamSource(name="SRC_A"), StreamSource(name="SRC_B", filter_subject="b.y")],
            num_replicas=3,
            allow_direct=True,
        )
    )
    await js.publish("a.x", b"late")
    # every message of both origins arrives once, with its origin and origin sequence
    seen: dict[str, list[bytes]] = {"SRC_A": [], "SRC_B": []}
    last_origin_seq = {"SRC_A": 0, "SRC_B": 0}
    deadline = asyncio.get_running_loop().time() + 15
    while sum(len(v) for v in seen.values()) < 11:
        assert asyncio.get_running_loop().time() < deadline, f"aggregate incomplete: {seen}"
        seq = sum(len(v) for v in seen.values()) + 1
        reply = await nc.request("$JS.API.DIRECT.GET.AGG", json.dumps({"seq": seq}).encode(), timeout=5)
        if (reply.headers or {}).get("Status") == "404":
            await asyncio.sleep(0.05)  # not copied yet
            continue
        origin, origin_seq, *_ = reply.headers["Nats-Stream-Source"].split(" ")
        assert int(origin_seq) > last_origin_seq[origin], "copied out of order or twice"
        last_origin_seq[origin] = int(origin_seq)
        seen[origin].append(reply.data)
        if origin == "SRC_B":
            assert reply.headers["X-Origin"] == "b"
    assert sorted(seen["SRC_A"]) == sorted([b"a0", b"a1", b"a2", b"a3", b"a4", b"late"])
    assert sorted(seen["SRC_B"]) == sorted([b"b%d" % i for i in range(5)])
    info = await js.stream_info("AGG")
    assert info.state.messages == 11
    assert sorted(s.name for s in info.sources or []) == ["SRC_A", "SRC_B"]
    for name in ("AGG", "SRC_A", "SRC_B"):
        await js.delete_stream(name)
    await nc.close()
