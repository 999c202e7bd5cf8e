"""Stream creation on one node: one fsync per create (the meta entry and the new group's first term and
entry written together, `MetaService._start_with_entry`), a create that was answered survives a kill -9
straight after, and a new stream's first leader serves at once (its log holds nothing from an earlier
term: no ReadIndex round to wait for before it answers, see `RaftCore.nothing_before_term`)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from nats.js.errors import NoStreamResponseError, NotFoundError

from local.cluster import LocalCluster
from tests.chaos.node_metrics import scrape, value
from tests.node.cluster_fixtures import local_cluster

STREAMS = 25


@pytest.fixture
def one_node(tmp_path: Path) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path, nodes=1) as running:
        yield running


@pytest.fixture
def one_process(tmp_path: Path) -> Iterator[LocalCluster]:
    """One node of one worker, whatever $JETRAFT_TEST_WORKERS says: the one-fsync create writes the meta
    entry and the new group's start in the one process that leads the meta group and holds the replica;
    with several workers the stream may be placed on another worker, a process of its own with its own
    Raft log (each such create costs that worker's fsyncs too, by design)."""
    with local_cluster(tmp_path, nodes=1, workers=1) as running:
        yield running


async def _create_streams(url: str) -> None:
    nc = await nats.connect(url)
    try:
        jsm = nc.jsm()
        for index in range(STREAMS):
            info = await jsm.add_stream(name=f"made_{index}", subjects=[f"made.{index}"], max_msgs=1000 + index)
            assert info.config.name == f"made_{index}"
            assert info.state.messages == 0
    finally:
        await nc.close()


async def _check_streams(url: str) -> None:
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        infos = await js.streams_info()
        assert sorted(info.config.name for info in infos) == sorted(f"made_{i}" for i in range(STREAMS))
        # each with the config it was created with
        for info in infos:
            index = info.config.name.removeprefix("made_")
            assert info.config.subjects == [f"made.{index}"], info.config
            assert info.config.max_msgs == 1000 + int(index), info.config
        # each restarted stream takes a publish and keeps it
        for index in (0, STREAMS - 1):
            ack = await js.publish(f"made.{index}", b"after the crash", timeout=10)
            assert (ack.stream, ack.seq) == (f"made_{index}", 1)
            msg = await js.get_msg(f"made_{index}", 1)
            assert msg.data == b"after the crash"
    finally:
        await nc.close()


def test_streams_whose_create_was_answered_survive_a_kill_9_right_after(one_node: LocalCluster) -> None:
    url = one_node.client_urls[0]
    asyncio.run(_create_streams(url))
    one_node.kill_node("n1")  # straight after the last reply: nothing had time to settle
    one_node.restart_node("n1")
    one_node.wait_ready(timeout=60)
    asyncio.run(_check_streams(url))


async def _publish_right_after_each_create(url: str) -> None:
    nc = await nats.connect(url)
    try:
        jsm, js = nc.jsm(), nc.jetstream()
        for index in range(10):
            await jsm.add_stream(name=f"fresh_{index}", subjects=[f"fresh.{index}"], allow_direct=True)
            # the leader answered the create: it already answers Direct Gets (nothing there yet, as
            # nats-server says), takes publishes and serves its API
            with pytest.raises(NotFoundError):
                await jsm.get_msg(f"fresh_{index}", 1, direct=True)
            ack = await js.publish(f"fresh.{index}", b"first", timeout=5)
            assert ack.seq == 1
            info = await jsm.stream_info(f"fresh_{index}")
            assert info.state.messages == 1 and info.state.first_seq == 1
            msg = await jsm.get_msg(f"fresh_{index}", 1, direct=True)
            assert msg.data == b"first"
    finally:
        await nc.close()


def test_a_new_stream_serves_publishes_info_and_direct_gets_straight_after_its_create(
    one_node: LocalCluster,
) -> None:
    asyncio.run(_publish_right_after_each_create(one_node.client_urls[0]))


async def _create_some(url: str, prefix: str, count: int) -> None:
    nc = await nats.connect(url)
    try:
        jsm = nc.jsm()
        for index in range(count):
            await jsm.add_stream(name=f"{prefix}_{index}")
    finally:
        await nc.close()


def test_a_create_on_one_node_costs_one_fsync(one_process: LocalCluster) -> None:
    url, http_url = one_process.client_urls[0], one_process.spec("n1").http_url
    asyncio.run(_create_some(url, "warm", 2))  # the meta group's own start is behind us
    before = value(scrape(http_url), "jetraft_raft_log_fsyncs_total", node="n1")
    asyncio.run(_create_some(url, "counted", 10))
    after = value(scrape(http_url), "jetraft_raft_log_fsyncs_total", node="n1")
    # each create must be durable before its answer, so at least one each; one after the other, the
    # meta entry and the new group's start took two
    assert 10 <= after - before <= 11, after - before


async def _race_two_creates(url: str) -> None:
    nc = await nats.connect(url)
    try:
        requests = [
            nc.request(
                "$JS.API.STREAM.CREATE.RACED",
                json.dumps({"name": "RACED", "subjects": [subject], "storage": "file"}).encode(),
                timeout=10,
            )
            for subject in ("raced.a", "raced.b")
        ]
        replies = [json.loads(reply.data) for reply in await asyncio.gather(*requests)]
        won = [reply for reply in replies if "error" not in reply]
        lost = [reply for reply in replies if "error" in reply]
        assert len(won) == 1 and len(lost) == 1, replies
        assert lost[0]["error"]["err_code"] == 10058  # stream name already in use
        winner = won[0]["config"]["subjects"][0]
        loser = "raced.b" if winner == "raced.a" else "raced.a"
        js = nc.jetstream()
        assert (await js.publish(winner, b"x", timeout=5)).seq == 1
        # nothing of the refused create is left listening
        with pytest.raises(NoStreamResponseError):
            await js.publish(loser, b"y", timeout=5)
        info = await nc.jsm().stream_info("RACED")
        assert info.config.subjects == [winner] and info.state.messages == 1
    finally:
        await nc.close()


def test_of_two_creates_of_one_name_at_once_one_is_refused_and_leaves_nothing(one_node: LocalCluster) -> None:
    asyncio.run(_race_two_creates(one_node.client_urls[0]))
