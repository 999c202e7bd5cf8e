"""Stream RePublish on a 3-node cluster: every stored message reaches a subscriber on another node exactly once."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import nats
import pytest
from nats.js.api import RePublish, StreamConfig, StreamSource

from cluster.runtime.workers import node_of
from local.cluster import LocalCluster
from tests.node.cluster_fixtures import local_cluster, subscribe_on_follower

PUBLISHES = 30
RECEIVE_TIMEOUT = 10.0
BURST = 300


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("republish")) as running:
        yield running


async def test_each_stored_message_is_republished_once_in_order(cluster: LocalCluster) -> None:
    nc = await nats.connect(cluster.client_urls[0])
    js = nc.jetstream()
    await js.add_stream(
        StreamConfig(name="RP", subjects=["rp_in.>"], num_replicas=3, republish=RePublish(dest="rp_out.>"))
    )
    sub_client, received = await subscribe_on_follower(cluster, js, "RP", "rp_out.>")
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
    sub_client, received = await subscribe_on_follower(cluster, js, "RPH", "rph_out.*")
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
    sub_client, received = await subscribe_on_follower(cluster, js, "RPM", "rpm_out.>")
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


async def test_every_stored_message_is_republished_across_leader_changes(cluster: LocalCluster) -> None:
    """Publishes stream in while leadership moves, by a stepdown and by killing the leader: whatever was
    stored reaches the subscriber, even what the old leader had in flight and the new one committed
    (see cluster/stream/republish.py for the guarantee)."""
    nc = await nats.connect(cluster.client_urls[0])
    js = nc.jetstream()
    await js.add_stream(
        StreamConfig(name="RPL", subjects=["rpl_in.*"], num_replicas=3, republish=RePublish(dest="rpl_out.>"))
    )
    sub_client, received = await subscribe_on_follower(cluster, js, "RPL", "rpl_out.>")
    await nc.close()
    js = sub_client.jetstream()
    sent = 0

    async def publish_burst() -> None:
        # no waiting for acks: many proposals are in flight when leadership moves
        nonlocal sent
        for _ in range(BURST):
            await sub_client.publish(f"rpl_in.{sent % 4}", b"%d" % sent)
            sent += 1
        await sub_client.flush()

    try:
        await publish_burst()
        reply = await sub_client.request("$JS.API.STREAM.LEADER.STEPDOWN.RPL", b"", timeout=10)
        assert b'"success":true' in reply.data, reply.data
        await publish_burst()
        leader = await _leader_elsewhere(cluster, sub_client, js, "RPL")
        for _ in range(BURST):
            await sub_client.publish(f"rpl_in.{sent % 4}", b"%d" % sent)
            sent += 1
        cluster.kill_node(leader)
        await publish_burst()
        info = await _stream_info_when_led(js, "RPL")
        cluster.restart_node(leader)
        stored = info.state.last_seq
        assert info.state.messages == stored > 0  # nothing deleted: every sequence up to last_seq is a message
        seen: dict[int, int] = {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while len(seen) < stored:
            remaining = deadline - loop.time()
            try:
                msg = await asyncio.wait_for(received.get(), max(remaining, 0.01))
            except TimeoutError:
                missing = sorted(set(range(1, stored + 1)) - set(seen))
                raise AssertionError(f"{len(missing)} of {stored} never republished: {missing[:20]}") from None
            assert msg.headers is not None
            seq = int(msg.headers["Nats-Sequence"])
            index = int(msg.data)
            assert msg.subject == f"rpl_out.rpl_in.{index % 4}" == "rpl_out." + msg.headers["Nats-Subject"]
            seen[seq] = seen.get(seq, 0) + 1
        assert sorted(seen) == list(range(1, stored + 1))
    finally:
        await sub_client.close()
        cluster.wait_ready()


async def _leader_elsewhere(
    cluster: LocalCluster, client: nats.NATS, js: nats.js.JetStreamContext, stream: str
) -> str:
    """The stream's leader, once it is not the node `client` is connected to (stepping it down if so)."""
    assert client.connected_url is not None
    own = next(spec.name for spec in cluster.specs if spec.client_port == client.connected_url.port)
    for _ in range(10):
        info = await _stream_info_when_led(js, stream)
        assert info.cluster is not None and info.cluster.leader
        if node_of(info.cluster.leader) != own:
            return info.cluster.leader
        await client.request(f"$JS.API.STREAM.LEADER.STEPDOWN.{stream}", b"", timeout=10)
    raise AssertionError(f"{stream}'s leadership stays on {own}")


async def _stream_info_when_led(js: nats.js.JetStreamContext, stream: str) -> nats.js.api.StreamInfo:
    for _ in range(100):
        try:
            info = await js.stream_info(stream)
        except (nats.js.errors.ServiceUnavailableError, TimeoutError):
            await asyncio.sleep(0.1)  # between leaders
            continue
        if info.cluster is not None and info.cluster.leader:
            return info
    raise AssertionError(f"{stream} has no leader")
