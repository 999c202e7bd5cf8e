"""STREAM.SNAPSHOT and STREAM.RESTORE on jetraft nodes: a stream taken out and put back whole, through
the wire protocol nats-server uses and through the nats CLI's `nats backup stream` / `backup restore`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import StreamConfig

from local.cluster import node_available
from tests.cli.natscli import find_cli, run_cli
from tests.node.cluster_fixtures import local_cluster, log_problems

pytestmark = pytest.mark.skipif(not node_available(), reason="needs `jetraft node`")
TIMEOUT = 10.0


async def _snapshot(
    nc: nats.NATS, stream: str, chunk_size: int = 1024, **options: Any
) -> tuple[dict[str, Any], bytes, list[str | None]]:
    """The snapshot's answer, the archive's bytes and the end marker's status."""
    inbox = nc.new_inbox()
    data = bytearray()
    ended: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()

    async def on_chunk(msg: Any) -> None:
        if not msg.data:
            if not ended.done():
                ended.set_result((msg.headers or {}).get("Status"))
            return
        data.extend(msg.data)
        if msg.reply:
            await nc.publish(msg.reply, b"")

    sub = await nc.subscribe(inbox, cb=on_chunk)
    try:
        body = {"deliver_subject": inbox, "chunk_size": chunk_size, **options}
        reply = await nc.request(f"$JS.API.STREAM.SNAPSHOT.{stream}", json.dumps(body).encode(), timeout=TIMEOUT)
        answer = json.loads(reply.data)
        if "error" in answer:
            return answer, b"", []
        status = await asyncio.wait_for(ended, TIMEOUT)
    finally:
        await sub.unsubscribe()
    return answer, bytes(data), [status]


async def _restore(nc: nats.NATS, stream: str, config: dict[str, Any], data: bytes) -> dict[str, Any]:
    reply = await nc.request(f"$JS.API.STREAM.RESTORE.{stream}", json.dumps({"config": config}).encode(), timeout=TIMEOUT)
    answer = json.loads(reply.data)
    assert answer.get("deliver_subject", "").startswith(f"$JS.SNAPSHOT.RESTORE.{stream}."), answer
    for i in range(0, len(data), 4096):
        ack = await nc.request(answer["deliver_subject"], data[i : i + 4096], timeout=TIMEOUT)
        assert ack.data == b""
    final = await nc.request(answer["deliver_subject"], b"", timeout=60)
    result: dict[str, Any] = json.loads(final.data)
    return result


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
    with local_cluster(tmp_path / "cluster", nodes=nodes) as cluster:
        nc = await nats.connect(cluster.client_urls[0])
        try:
            js = nc.jetstream(timeout=TIMEOUT)
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
        finally:
            await nc.close()
        assert log_problems(cluster) == []


async def test_a_corrupt_or_foreign_archive_restores_nothing(tmp_path: Path) -> None:
    with local_cluster(tmp_path / "cluster", nodes=1) as cluster:
        nc = await nats.connect(cluster.client_urls[0])
        try:
            js = nc.jetstream(timeout=TIMEOUT)
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
        finally:
            await nc.close()


async def test_a_snapshot_that_would_lose_consumers_is_refused(tmp_path: Path) -> None:
    with local_cluster(tmp_path / "cluster", nodes=1) as cluster:
        nc = await nats.connect(cluster.client_urls[0])
        try:
            js = nc.jetstream(timeout=TIMEOUT)
            await js.add_stream(StreamConfig(name="S", subjects=["s"]))
            await js.publish("s", b"x")
            await js.add_consumer("S", durable_name="C")
            answer, _, _ = await _snapshot(nc, "S")
            assert answer["error"]["err_code"] == 10064
            assert "no_consumers" in answer["error"]["description"]
            answer, archive, _ = await _snapshot(nc, "S", no_consumers=True, jsck=True)
            assert answer["state"]["consumer_count"] == 1 and archive
            await js.add_stream(StreamConfig(name="M", subjects=["m"], storage="memory"))
            answer, _, _ = await _snapshot(nc, "M")
            assert answer["error"] == {"code": 500, "err_code": 10064, "description": "snapshot failed: no impl"}
            # as a lone nats-server (a clustered one leaves it unanswered: only a stream leader answers)
            answer, _, _ = await _snapshot(nc, "NONE")
            assert answer["error"] == {"code": 404, "err_code": 10059, "description": "stream not found"}
        finally:
            await nc.close()


async def test_the_nats_cli_backs_up_and_restores_a_stream(tmp_path: Path) -> None:
    cli = find_cli()
    if cli is None:
        pytest.skip("no nats CLI (make nats-cli)")
    with local_cluster(tmp_path / "cluster", nodes=1) as cluster:
        url = cluster.client_urls[0]
        nc = await nats.connect(url)
        try:
            js = nc.jetstream(timeout=TIMEOUT)
            await js.add_stream(StreamConfig(name="ORDERS", subjects=["orders.>"]))
            for i in range(500):
                await js.publish(f"orders.{i % 3}", b"%d" % i * 100)
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
            msg = await js.get_msg("ORDERS", 500)
            assert msg.data == b"499" * 100
        finally:
            await nc.close()
