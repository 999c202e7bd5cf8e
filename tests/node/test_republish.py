"""Stream RePublish on a 3-node cluster: every stored message reaches a subscriber on another node exactly once."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import nats
import pytest
from nats.aio.msg import Msg
from nats.js.api import RePublish, StreamConfig, StreamSource

from local.cluster import LocalCluster
from tests.node.cluster_fixtures import local_cluster

PUBLISHES = 30
RECEIVE_TIMEOUT = 10.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("republish")) as running:
        yield running


async def _subscribe_on_follower(
    cluster: LocalCluster, js: nats.js.JetStreamContext, stream: str, dest: str
) -> tuple[nats.NATS, asyncio.Queue[Msg]]:
    """A subscriber on `dest` on a node that does not lead `stream`, once its interest reaches the leader."""
    info = await js.stream_info(stream)
    assert info.cluster is not None and info.cluster.leader
    leader = info.cluster.leader
    follower = next(spec for spec in cluster.specs if spec.name != leader)
    sub_client = await nats.connect(follower.client_url)
    received: asyncio.Queue[Msg] = asyncio.Queue()
    await sub_client.subscribe(dest, cb=received.put)
    await sub_client.flush()
    leader_client = await nats.connect(cluster.spec(leader).client_url)
    try:
        probe = dest.replace(">", "probe")
        for _ in range(100):
            await leader_client.publish(probe, b"")
            try:
                first = await asyncio.wait_for(received.get(), 0.2)
            except TimeoutError:
                continue
            assert first.subject == probe
            break
        else:
            raise AssertionError(f"{dest} interest never reached the leader {leader}")
    finally:
        await leader_client.close()
    while not received.empty():  # later probes still on their way
        assert received.get_nowait().subject == probe
    return sub_client, received


async def test_each_stored_message_is_republished_once_in_order(cluster: LocalCluster) -> None:
    nc = await nats.connect(cluster.client_urls[0])
    js = nc.jetstream()
    await js.add_stream(
        StreamConfig(name="RP", subjects=["rp_in.>"], num_replicas=3, republish=RePublish(dest="rp_out.>"))
    )
    sub_client, received = await _subscribe_on_follower(cluster, js, "RP", "rp_out.>")
    try:
        last_on_subject: dict[str, int] = {}
        expected = []
        for i in range(PUBLISHES):
            subject = f"rp_in.{i % 3}"
            ack = await js.publish(subject, b"m%d" % i, headers={"X-Order": str(i)})
            expected.append((subject, ack.seq, last_on_subject.get(subject, 0), b"m%d" % i))
            last_on_subject[subject] = ack.seq
        duplicate = await js.publish("rp_in.0", b"m0", headers={"Nats-Msg-Id": "once"})
        again = await js.publish("rp_in.0", b"m0", headers={"Nats-Msg-Id": "once"})
        assert again.duplicate and again.seq == duplicate.seq
        expected.append(("rp_in.0", duplicate.seq, last_on_subject["rp_in.0"], b"m0"))

        for subject, seq, previous, payload in expected:
            msg = await asyncio.wait_for(received.get(), RECEIVE_TIMEOUT)
            assert msg.subject == f"rp_out.{subject}"
            assert msg.data == payload
            headers = msg.headers or {}
            assert headers["Nats-Stream"] == "RP"
            assert headers["Nats-Subject"] == subject
            assert int(headers["Nats-Sequence"]) == seq
            assert int(headers["Nats-Last-Sequence"]) == previous
            assert headers["Nats-Time-Stamp"].endswith("Z")
            assert "Nats-Msg-Size" not in headers
        # one more stored message: the next to arrive is it, so nothing was sent twice meanwhile
        sentinel = await js.publish("rp_in.sentinel", b"end")
        msg = await asyncio.wait_for(received.get(), RECEIVE_TIMEOUT)
        assert msg.headers is not None and int(msg.headers["Nats-Sequence"]) == sentinel.seq
        assert received.empty()
    finally:
        await sub_client.close()
        await nc.close()


async def test_headers_only_republish(cluster: LocalCluster) -> None:
    nc = await nats.connect(cluster.client_urls[1])
    js = nc.jetstream()
    await js.add_stream(
        StreamConfig(
            name="RPH",
            subjects=["rph_in.*"],
            num_replicas=3,
            republish=RePublish(src="rph_in.*", dest="rph_out.{{wildcard(1)}}", headers_only=True),
        )
    )
    sub_client, received = await _subscribe_on_follower(cluster, js, "RPH", "rph_out.*")
    try:
        acks = [await js.publish(f"rph_in.k{i}", b"x" * (i + 1)) for i in range(5)]
        for i, ack in enumerate(acks):
            msg = await asyncio.wait_for(received.get(), RECEIVE_TIMEOUT)
            assert msg.subject == f"rph_out.k{i}"
            assert msg.data == b""
            assert msg.headers is not None
            assert int(msg.headers["Nats-Sequence"]) == ack.seq
            assert msg.headers["Nats-Msg-Size"] == str(i + 1)
            assert msg.headers["Nats-Last-Sequence"] == "0"
    finally:
        await sub_client.close()
        await nc.close()


async def test_mirror_republishes_what_it_copies(cluster: LocalCluster) -> None:
    """As nats-server does: messages a mirror copies from its origin are republished by the mirror's
    leader, naming the mirror, with the origin's sequences."""
    nc = await nats.connect(cluster.client_urls[2])
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name="RPO", subjects=["rpo.*"], num_replicas=3))
    await js.add_stream(
        StreamConfig(
            name="RPM", mirror=StreamSource(name="RPO"), num_replicas=3, republish=RePublish(dest="rpm_out.>")
        )
    )
    sub_client, received = await _subscribe_on_follower(cluster, js, "RPM", "rpm_out.>")
    try:
        acks = [await js.publish(f"rpo.{i % 2}", b"c%d" % i) for i in range(6)]
        for i, ack in enumerate(acks):
            msg = await asyncio.wait_for(received.get(), RECEIVE_TIMEOUT)
            assert msg.subject == f"rpm_out.rpo.{i % 2}"
            assert msg.data == b"c%d" % i
            assert msg.headers is not None
            assert msg.headers["Nats-Stream"] == "RPM"
            assert int(msg.headers["Nats-Sequence"]) == ack.seq
            assert int(msg.headers["Nats-Last-Sequence"]) == (acks[i - 2].seq if i >= 2 else 0)
    finally:
        await sub_client.close()
        await nc.close()
