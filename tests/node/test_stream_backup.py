"""STREAM.SNAPSHOT and STREAM.RESTORE on jetraft nodes: a stream taken out and put back whole, through
the wire protocol nats-server uses and through the nats CLI's `nats backup stream` / `backup restore`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import ConsumerConfig, StreamConfig

from local.cluster import LocalCluster, node_available
from tests.cli.natscli import find_cli, run_cli
from tests.node.backup_client import restore_archive, take_snapshot
from tests.node.cluster_fixtures import local_cluster, log_problems

pytestmark = pytest.mark.skipif(not node_available(), reason="needs `jetraft node`")
TIMEOUT = 10.0


async def _snapshot(
    nc: nats.NATS, stream: str, chunk_size: int = 1024, **options: Any
) -> tuple[dict[str, Any], bytes, list[str | None]]:
    """The snapshot's answer, the archive's bytes and the end marker's status."""
    taken = await take_snapshot(nc, stream, chunk_size=chunk_size, **options)
    return taken.answer, taken.archive, [] if "error" in taken.answer else [taken.status]


async def _restore(nc: nats.NATS, stream: str, config: dict[str, Any], data: bytes) -> dict[str, Any]:
    return await restore_archive(nc, stream, config, data)


@contextlib.asynccontextmanager
async def _connected(
    tmp_path: Path, nodes: int = 1, client_on: int = 0
) -> AsyncIterator[tuple[LocalCluster, nats.NATS, Any]]:
    """A cluster of `nodes`, a client on one of them and its JetStream context; stopped after."""
    with local_cluster(tmp_path / "cluster", nodes=nodes) as cluster:
        nc = await nats.connect(cluster.client_urls[client_on])
        try:
            yield cluster, nc, nc.jetstream(timeout=TIMEOUT)
        finally:
            await nc.close()


async def _messages(js: Any, stream: str, first: int, last: int) -> list[Any]:
    out = []
    for seq in range(first, last + 1):
        try:
            msg = await js.get_msg(stream, seq)
        except nats.js.errors.NotFoundError:
            out.append(None)
            continue
        out.append((msg.subject, msg.data, dict(msg.headers or {}), msg.time if hasattr(msg, "time") else None))
    return out


@pytest.mark.parametrize("nodes", [1, 3])
async def test_a_snapshot_restores_the_same_stream_message_for_message(tmp_path: Path, nodes: int) -> None:
    async with _connected(tmp_path, nodes=nodes) as (cluster, nc, js):
        await js.add_stream(StreamConfig(name="ORDERS", subjects=["orders.>"], num_replicas=nodes))
        for i in range(300):
            headers = {"Nats-Msg-Id": f"id-{i}"} if i % 7 == 0 else None
            await js.publish(f"orders.{i % 5}", b"order %d " % i * (1 + i % 40), headers=headers)
        await js.delete_msg("ORDERS", 5)
        await js.purge_stream("ORDERS", keep=250)  # first_seq 51, with 5 gone already
        await js.delete_msg("ORDERS", 300)  # the last sequence stays 300 with nothing there
        before = await js.stream_info("ORDERS")
        stored = await _messages(js, "ORDERS", 51, 300)

        answer, archive, ended = await _snapshot(nc, "ORDERS", no_consumers=True)
        assert answer["type"] == "io.nats.jetstream.api.v1.stream_snapshot_response"
        assert answer["config"]["name"] == "ORDERS" and answer["state"]["last_seq"] == 300
        assert ended == ["204"]  # full chunks went, so the end marker says 204 as nats-server's
        await js.delete_stream("ORDERS")

        final = await _restore(nc, "ORDERS", answer["config"], archive)
        assert final["type"] == "io.nats.jetstream.api.v1.stream_create_response"
        assert "error" not in final, final
        after = await js.stream_info("ORDERS")
        assert after.state == before.state
        assert after.config.subjects == ["orders.>"]
        assert await _messages(js, "ORDERS", 51, 300) == stored
        # the restored stream takes publishes after its last sequence, and knows its msg ids
        ack = await js.publish("orders.1", b"new", headers={"Nats-Msg-Id": "id-294"})
        assert ack.duplicate and ack.seq == 295
        ack = await js.publish("orders.1", b"new")
        assert ack.seq == 301
    assert log_problems(cluster) == []


async def test_a_corrupt_or_foreign_archive_restores_nothing(tmp_path: Path) -> None:
    async with _connected(tmp_path) as (_cluster, nc, js):
        await js.add_stream(StreamConfig(name="S", subjects=["s"]))
        for i in range(100):
            await js.publish("s", b"%d" % i * 50)
        answer, archive, _ = await _snapshot(nc, "S")
        await js.delete_stream("S")
        altered = bytearray(archive)
        altered[len(altered) // 2] ^= 0xFF
        for data in (bytes(altered), archive[: len(archive) // 2], b"\xff\x06\x00\x00S2sTwO" + b"\x00" * 40):
            final = await _restore(nc, "S", answer["config"], data)
            assert final["error"]["err_code"] == 10062, final
            assert final["error"]["description"].startswith("restore failed: ")
            with pytest.raises(nats.js.errors.NotFoundError):
                await js.stream_info("S")
        # and the intact archive still restores
        final = await _restore(nc, "S", answer["config"], archive)
        assert final["state"]["messages"] == 100


def _consumer_state(info: Any) -> dict[str, Any]:
    return {
        "delivered": (info.delivered.consumer_seq, info.delivered.stream_seq),
        "ack_floor": (info.ack_floor.consumer_seq, info.ack_floor.stream_seq),
        "num_ack_pending": info.num_ack_pending,
        "num_redelivered": info.num_redelivered,
        "num_pending": info.num_pending,
        "config": (info.config.durable_name, info.config.filter_subject, info.config.ack_wait),
    }


@pytest.mark.parametrize("nodes", [1, 3])
async def test_consumers_come_back_where_they_were(tmp_path: Path, nodes: int) -> None:
    async with _connected(tmp_path, nodes=nodes, client_on=-1) as (cluster, nc, js):
        await js.add_stream(StreamConfig(name="JOBS", subjects=["jobs.>"], num_replicas=nodes))
        for i in range(20):
            await js.publish(f"jobs.{i % 2}", b"job %d" % i)
        work = await js.pull_subscribe("jobs.>", durable="WORK", config=ConsumerConfig(ack_wait=1.0))
        batch = await work.fetch(8, timeout=TIMEOUT)
        redelivery_due = time.monotonic() + 1.0  # the ack wait runs from the delivery
        for msg in batch[:5]:
            await msg.ack_sync()  # 6, 7 and 8 stay delivered and unacknowledged
        odd = await js.pull_subscribe("jobs.1", durable="ODD")
        for msg in await odd.fetch(3, timeout=TIMEOUT):
            await msg.ack_sync()
        before = {name: _consumer_state(await js.consumer_info("JOBS", name)) for name in ("WORK", "ODD")}
        answer, archive, _ = await _snapshot(nc, "JOBS")
        assert answer["state"]["consumer_count"] == 2
        await js.delete_stream("JOBS")

        final = await _restore(nc, "JOBS", answer["config"], archive)
        assert "error" not in final, final
        assert final["state"]["consumer_count"] == 2
        after = {name: _consumer_state(await js.consumer_info("JOBS", name)) for name in ("WORK", "ODD")}
        assert after == before
        # WORK's unacknowledged three come again once their ack wait (a timer: nothing to await but
        # the time) has run from their delivery before the snapshot
        await asyncio.sleep(max(0.0, redelivery_due - time.monotonic()) + 0.2)
        work = await js.pull_subscribe("jobs.>", durable="WORK")
        again = await work.fetch(3, timeout=TIMEOUT)
        assert [m.metadata.sequence.stream for m in again] == [6, 7, 8]
        assert all(m.metadata.num_delivered == 2 for m in again)
        odd = await js.pull_subscribe("jobs.1", durable="ODD")
        [next_odd] = await odd.fetch(1, timeout=TIMEOUT)
        assert next_odd.data == b"job 7"  # the fourth on jobs.1
    assert log_problems(cluster) == []


async def test_what_nats_server_refuses_to_snapshot(tmp_path: Path) -> None:
    async with _connected(tmp_path) as (_cluster, nc, js):
        await js.add_stream(StreamConfig(name="S", subjects=["s"]))
        await js.publish("s", b"x")
        answer, archive, _ = await _snapshot(nc, "S", jsck=True)
        assert answer["state"]["messages"] == 1 and archive
        await js.add_stream(StreamConfig(name="M", subjects=["m"], storage="memory"))
        answer, _, _ = await _snapshot(nc, "M")
        assert answer["error"] == {"code": 500, "err_code": 10064, "description": "snapshot failed: no impl"}
        # as a lone nats-server (a clustered one leaves it unanswered: only a stream leader answers)
        answer, _, _ = await _snapshot(nc, "NONE")
        assert answer["error"] == {"code": 404, "err_code": 10059, "description": "stream not found"}


async def test_the_nats_cli_backs_up_and_restores_a_stream(tmp_path: Path) -> None:
    cli = find_cli()
    if cli is None:
        pytest.skip("no nats CLI (make nats-cli)")
    async with _connected(tmp_path) as (cluster, _nc, js):
        url = cluster.client_urls[0]
        await js.add_stream(StreamConfig(name="ORDERS", subjects=["orders.>"]))
        for i in range(500):
            await js.publish(f"orders.{i % 3}", b"%d" % i * 100)
        sub = await js.pull_subscribe("orders.>", durable="SHIP")
        for msg in await sub.fetch(10, timeout=TIMEOUT):
            await msg.ack_sync()
        before = (await js.stream_info("ORDERS")).state
        target = tmp_path / "backup"
        backup = await asyncio.to_thread(
            run_cli, cli, url, ["backup", "stream", "ORDERS", str(target), "--no-progress"], 60.0
        )
        assert backup.returncode == 0, backup.output
        assert (target / "backup.json").exists()
        await js.delete_stream("ORDERS")
        restore = await asyncio.to_thread(
            run_cli, cli, url, ["backup", "restore", "stream", str(target), "--no-progress"], 60.0
        )
        assert restore.returncode == 0, restore.output
        assert (await js.stream_info("ORDERS")).state == before
        shipped = await js.consumer_info("ORDERS", "SHIP")  # the CLI backs consumers up by default
        assert (shipped.ack_floor.stream_seq, shipped.num_pending) == (10, 490)
        msg = await js.get_msg("ORDERS", 500)
        assert msg.data == b"499" * 100


@pytest.mark.parametrize("retention", ["workqueue", "interest"])
async def test_retention_streams_restore_with_their_consumers(tmp_path: Path, retention: str) -> None:
    """The rebuilt stream has no consumer until its messages are back: none of them may be dropped for
    want of interest meanwhile, nor acknowledged ones come back."""
    async with _connected(tmp_path) as (_cluster, nc, js):
        await js.add_stream(StreamConfig(name="Q", subjects=["q.>"], retention=retention))
        sub = await js.pull_subscribe("q.>", durable="C")
        for i in range(10):
            await js.publish("q.x", b"%d" % i)
        for msg in (await sub.fetch(5, timeout=TIMEOUT))[:3]:
            await msg.ack_sync()
        before = ((await js.stream_info("Q")).state, _consumer_state(await js.consumer_info("Q", "C")))
        assert before[0].first_seq == 4 and before[0].messages == 7
        answer, archive, _ = await _snapshot(nc, "Q")
        await js.delete_stream("Q")
        assert "error" not in await _restore(nc, "Q", answer["config"], archive)
        after = ((await js.stream_info("Q")).state, _consumer_state(await js.consumer_info("Q", "C")))
        assert after == before


async def test_an_upload_that_stops_or_asks_no_ack_is_abandoned(tmp_path: Path) -> None:
    async with _connected(tmp_path) as (cluster, nc, js):
        log = cluster.log_dir / "n1.log"
        config = {"name": "S", "subjects": ["s"]}
        for abandoned, mistake in enumerate(("no reply", "stall"), start=1):
            reply = await nc.request("$JS.API.STREAM.RESTORE.S", json.dumps({"config": config}).encode())
            deliver = json.loads(reply.data)["deliver_subject"]
            await nc.request(deliver, b"\xff\x06\x00\x00sNaPpY", timeout=TIMEOUT)  # a first chunk, taken
            if mistake == "no reply":
                await nc.publish(deliver, b"more")  # nats-server: each chunk needs a reply subject
                await nc.flush()
            for _ in range(80):  # a stall is declared after 5 s without a chunk; bounded at 8 s
                if log.read_text().count("stream_restore_abandoned") >= abandoned:
                    break
                await asyncio.sleep(0.1)
            assert log.read_text().count("stream_restore_abandoned") == abandoned, mistake
            with pytest.raises(nats.errors.NoRespondersError):
                await nc.request(deliver, b"late", timeout=TIMEOUT)
            with pytest.raises(nats.js.errors.NotFoundError):
                await js.stream_info("S")
        spools = list(cluster.data_dir.rglob("restores"))  # where the uploads were spooled (a node's or
        assert spools  # a worker's data directory)
        assert not [file for spool in spools for file in spool.iterdir()]  # and no spool file is left


async def test_a_client_that_stops_acking_gets_no_flow_response(tmp_path: Path) -> None:
    """A window of one chunk: the second waits for the first's ack, which never comes; after five seconds
    the snapshot ends with nats-server's 408 "No Flow Response"."""
    async with _connected(tmp_path) as (_cluster, nc, js):
        await js.add_stream(StreamConfig(name="S", subjects=["s"]))
        for i in range(50):
            await js.publish("s", bytes(range(256)) * (1 + i % 3))  # compresses little: several chunks
        inbox = nc.new_inbox()
        chunks: list[Any] = []
        ended: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        async def keep(msg: Any) -> None:
            if msg.data:
                chunks.append(msg)
            elif not ended.done():
                ended.set_result(msg.headers)

        await nc.subscribe(inbox, cb=keep)
        body = {"deliver_subject": inbox, "chunk_size": 1024, "window_size": 1024}
        await nc.request("$JS.API.STREAM.SNAPSHOT.S", json.dumps(body).encode(), timeout=TIMEOUT)
        headers = await asyncio.wait_for(ended, 10)  # the flow timeout is five seconds
        assert headers == {"Status": "408", "Description": "No Flow Response"}
        assert len(chunks) == 1 and chunks[0].reply.startswith("$JS.SNAPSHOT.ACK.S.")


async def test_a_snapshot_holds_the_stream_as_it_was_when_it_began(tmp_path: Path) -> None:
    """Publishes go on while the archive is read: the restored stream ends at the last sequence the
    snapshot's answer gave, every message up to it in place."""
    async with _connected(tmp_path) as (_cluster, nc, js):
        await js.add_stream(StreamConfig(name="S", subjects=["s.>"]))
        for i in range(2000):
            await js.publish_async(f"s.{i % 4}", b"%d" % i * 20)
        await js.publish("s.0", b"last before")
        stop = asyncio.Event()

        async def keep_publishing() -> int:
            count = 0
            while not stop.is_set() and count < 5000:  # bounded
                await js.publish("s.1", b"during")
                count += 1
            return count

        writer = asyncio.create_task(keep_publishing())
        taken = await take_snapshot(nc, "S", chunk_size=1024, window_size=4096)
        stop.set()
        assert await writer > 0
        last = taken.answer["state"]["last_seq"]
        assert last >= 2001
        await js.delete_stream("S")
        final = await restore_archive(nc, "S", taken.answer["config"], taken.archive)
        assert (final["state"]["last_seq"], final["state"]["messages"]) == (last, last)
        assert (await js.get_msg("S", 2001)).data == b"last before"
