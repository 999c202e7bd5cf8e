"""nats-py, unmodified, against a real 3-node jetraft cluster: streams, publishes, reads, bad input."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator

import nats
import pytest
from nats.js.api import StreamConfig
from nats.js.errors import (
    APIError,
    BadRequestError,
    KeyNotFoundError,
    KeyWrongLastSequenceError,
    NotFoundError,
)

from cluster.runtime.workers import node_of
from local.cluster import LocalCluster
from tests.node.cluster_fixtures import (
    direct_get_from_every_replica,
    every_replica_applied,
    local_cluster,
    publish_when_served,
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("js-cluster")) as running:
        yield running


@pytest.fixture
async def nc(cluster: LocalCluster) -> AsyncIterator[nats.NATS]:
    client = await nats.connect(cluster.client_urls[0])
    yield client
    await client.close()


async def test_stream_lifecycle_through_nats_py(nc: nats.NATS, cluster: LocalCluster) -> None:
    js = nc.jetstream()
    info = await js.add_stream(name="LIFE", subjects=["life.>"], num_replicas=3, allow_direct=True)
    assert info.config.num_replicas == 3
    assert info.cluster is not None and node_of(info.cluster.leader) in {"n1", "n2", "n3"}
    peers = [info.cluster.leader] + [p.name for p in info.cluster.replicas or []]
    assert sorted(node_of(peer) for peer in peers) == ["n1", "n2", "n3"]
    # creating again with the same config succeeds and changes nothing
    again = await js.add_stream(name="LIFE", subjects=["life.>"], num_replicas=3, allow_direct=True)
    assert again.config.subjects == ["life.>"]

    acks = [await js.publish(f"life.{i % 3}", f"m{i}".encode()) for i in range(9)]
    assert [a.seq for a in acks] == list(range(1, 10))
    assert {a.stream for a in acks} == {"LIFE"}

    state = (await js.stream_info("LIFE")).state
    assert (state.messages, state.first_seq, state.last_seq) == (9, 1, 9)

    got = await js.get_msg("LIFE", seq=4)
    assert (got.seq, got.subject, got.data) == (4, "life.0", b"m3")
    last = await js.get_msg("LIFE", subject="life.2")
    assert (last.seq, last.data) == (9, b"m8")
    await every_replica_applied(nc, "LIFE", "life.1", 9)
    direct = await js.get_msg("LIFE", subject="life.1", direct=True)
    assert (direct.seq, direct.data) == (8, b"m7")
    assert direct.headers is not None and direct.headers["Nats-Stream"] == "LIFE"

    assert await js.delete_msg("LIFE", 1)
    assert await js.purge_stream("LIFE", subject="life.0")
    state = (await js.stream_info("LIFE")).state
    assert state.messages == 6  # 9 - seq 1 - the other two on life.0 (seq 4, 7)
    with pytest.raises(NotFoundError):
        await js.get_msg("LIFE", seq=4)

    names = await js.streams_info()
    assert "LIFE" in [s.config.name for s in names]
    assert await js.find_stream_name_by_subject("life.7") == "LIFE"

    assert await js.delete_stream("LIFE")
    with pytest.raises(NotFoundError):
        await js.stream_info("LIFE")
    # the name is free again, and the new stream starts empty
    fresh = await js.add_stream(name="LIFE", subjects=["life.>"], num_replicas=3)
    assert fresh.state.messages == 0
    assert (await js.publish("life.x", b"again")).seq == 1
    await js.delete_stream("LIFE")


async def test_every_replica_answers_direct_get(nc: nats.NATS) -> None:
    js = nc.jetstream()
    await js.add_stream(name="SPREAD", subjects=["spread.>"], num_replicas=3, allow_direct=True)
    ack = await js.publish("spread.k", b"v")
    # A follower may not have applied the publish yet (Direct Get may be stale): min_last_seq
    # makes each responder answer only once it has.
    request = json.dumps({"last_by_subj": "spread.k", "min_last_seq": ack.seq}).encode()
    replies = await direct_get_from_every_replica(nc, "SPREAD", request)
    for msg in replies:
        assert msg.headers is not None
        assert msg.data == b"v" and msg.headers["Nats-Sequence"] == str(ack.seq)
    assert {node_of(msg.headers["Jetraft-Node"]) for msg in replies if msg.headers} == {"n1", "n2", "n3"}
    await js.delete_stream("SPREAD")


async def test_kv_bucket_put_get_delete(nc: nats.NATS) -> None:
    js = nc.jetstream()
    kv = await js.create_key_value(bucket="settings", history=3, replicas=3)
    first = await kv.put("colour", b"red")
    second = await kv.put("colour", b"blue")
    assert second == first + 1
    await every_replica_applied(nc, "KV_settings", "$KV.settings.colour", second)
    entry = await kv.get("colour")
    assert (entry.value, entry.revision) == (b"blue", second)
    assert await kv.update("colour", b"green", last=second) == second + 1
    with pytest.raises(KeyWrongLastSequenceError):  # the server's expected-subject-sequence check
        await kv.update("colour", b"pink", last=second)
    await kv.delete("colour")
    deleted = (await js.stream_info("KV_settings")).state.last_seq
    await every_replica_applied(nc, "KV_settings", "$KV.settings.colour", deleted)
    with pytest.raises(KeyNotFoundError):
        await kv.get("colour")
    await js.delete_key_value("settings")


async def test_publish_checks_dedup_and_expectations(nc: nats.NATS) -> None:
    js = nc.jetstream()
    await js.add_stream(name="CHECKS", subjects=["checks.>"], num_replicas=3, max_msg_size=64)
    first = await js.publish("checks.a", b"x", headers={"Nats-Msg-Id": "id-1"})
    dup = await js.publish("checks.a", b"x", headers={"Nats-Msg-Id": "id-1"})
    assert dup.duplicate and dup.seq == first.seq
    with pytest.raises(APIError) as wrong_seq:
        await js.publish("checks.a", b"y", headers={"Nats-Expected-Last-Sequence": "99"})
    assert wrong_seq.value.err_code == 10071
    ok = await js.publish("checks.b", b"z", headers={"Nats-Expected-Last-Subject-Sequence": "0"})
    assert ok.seq == first.seq + 1
    with pytest.raises(APIError) as too_big:
        await js.publish("checks.a", b"0" * 100)
    assert too_big.value.err_code == 10054
    assert (await js.stream_info("CHECKS")).state.messages == 2
    await js.delete_stream("CHECKS")


@pytest.mark.parametrize(
    ("config", "err_code"),
    [
        (StreamConfig(name="TOO_MANY", subjects=["many"], num_replicas=5), 10005),
        # (max_msgs -5 is not refused: nats-server 2.15.1 takes it as -1, unlimited)
        (StreamConfig(name="NEG", subjects=["neg"], max_age=-1), 10052),
    ],
)
async def test_bad_stream_configs_get_jetstream_errors(
    nc: nats.NATS, config: StreamConfig, err_code: int
) -> None:
    js = nc.jetstream()
    with pytest.raises(APIError) as raised:
        await js.add_stream(config)
    assert raised.value.err_code == err_code
    with pytest.raises(NotFoundError):
        await js.stream_info(config.name or "")


@pytest.mark.parametrize(
    ("subject", "body", "err_code"),
    [
        ("$JS.API.STREAM.CREATE.ONE", b'{"name":"OTHER","subjects":["o"]}', 10056),
        ("$JS.API.STREAM.CREATE.ONE", b'{"name":', 10025),
        ("$JS.API.STREAM.INFO.MISSING", b"", 10059),
        ("$JS.API.STREAM.MSG.GET.MISSING", b'{"seq":1}', 10059),
        ("$JS.API.STREAM.DELETE.MISSING", b"", 10059),
    ],
)
async def test_malformed_api_requests_get_error_json(
    nc: nats.NATS, subject: str, body: bytes, err_code: int
) -> None:
    reply = await nc.request(subject, body, timeout=5)
    error = json.loads(reply.data)["error"]
    assert error["err_code"] == err_code
    assert isinstance(error["code"], int) and error["description"]


async def test_overlapping_subjects_are_refused(nc: nats.NATS) -> None:
    js = nc.jetstream()
    await js.add_stream(name="OWNER", subjects=["owned.>"], num_replicas=1)
    with pytest.raises(BadRequestError) as raised:
        await js.add_stream(name="THIEF", subjects=["owned.x"], num_replicas=1)
    assert raised.value.err_code == 10065
    await js.delete_stream("OWNER")


async def test_requests_from_every_node_reach_the_leaders(cluster: LocalCluster) -> None:
    clients = [await nats.connect(url) for url in cluster.client_urls]
    try:
        js = [c.jetstream() for c in clients]
        await js[0].add_stream(name="ANYNODE", subjects=["any.>"], num_replicas=3)
        # right after the create, the stream's interest may not have reached every node yet (nats-server
        # races it the same way): a few bounded tries each
        acks = await asyncio.gather(*(publish_when_served(j, "any.x", b"p") for j in js))
        assert sorted(a.seq for a in acks) == [1, 2, 3]
        for j in js:
            assert (await j.stream_info("ANYNODE")).state.messages == 3
            assert (await j.get_msg("ANYNODE", seq=3)).data == b"p"
        await js[1].delete_stream("ANYNODE")
    finally:
        for c in clients:
            await c.close()
