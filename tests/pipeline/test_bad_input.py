"""Bad input through Spark: each fault fails the query on the driver with an error naming its cause.

Batch reads fail when Spark plans the partitions; streaming reads fail when the
query starts, before any micro-batch runs (no progress, no output).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from nats.js.api import StreamConfig

from local.ports import free_port
from tests.pipeline.fake_jetstream import FakeJetStream, numbered_messages
from tests.pipeline.servers import JetStreamTarget
from tests.pipeline.streams import create_stream, run

STREAM_NOT_FOUND = r"stream 'NOPE' not found"
NO_DIRECT = r"stream 'NODIRECT' does not allow direct get \(allow_direct is false\)"
UNREACHABLE = r"jetstream option 'servers': none of nats://127\.0\.0\.1:\d+ accepted a NATS connection"
NO_BATCHES = r"stream 'OLD': .*does not support batches"


@pytest.fixture(scope="module")
def no_direct_stream(single_target: JetStreamTarget) -> str:
    config = StreamConfig(name="NODIRECT", subjects=["nodirect.>"], allow_direct=False)
    run(create_stream(single_target.urls, config))
    return "NODIRECT"


@pytest.fixture
def unused_server() -> str:
    """A loopback port nothing listens on: connections are refused at once."""
    return f"nats://127.0.0.1:{free_port()}"


@pytest.fixture
def server_without_batches(core_nats: str) -> Iterator[FakeJetStream]:
    """The scripted stand-in with batch support off, served from its own loop while Spark blocks this one."""
    fake = FakeJetStream(core_nats, "OLD", numbered_messages(10), batch_support=False)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fake-jetstream", daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(fake.start(), loop).result(timeout=30)
    try:
        yield fake
    finally:
        asyncio.run_coroutine_threadsafe(fake.stop(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        loop.close()


def batch_count(spark, servers: str, stream: str) -> int:  # type: ignore[no-untyped-def]
    return spark.read.format("jetstream").option("servers", servers).option("stream", stream).load().count()


def assert_stream_fails_before_any_batch(  # type: ignore[no-untyped-def]
    spark, servers: str, stream: str, tmp_path: Path, pattern: str
) -> None:
    out = tmp_path / "out"
    query = (
        spark.readStream.format("jetstream")
        .option("servers", servers)
        .option("stream", stream)
        .option("connect_timeout", "2")
        .load()
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
    )
    with pytest.raises(Exception, match=pattern):
        started = query.start()
        # The source is built on the query's thread: the failure ends the query instead of start().
        started.awaitTermination(120)
    assert not list(out.glob("*.parquet")), "no micro-batch may have run"


def test_missing_stream_fails_naming_the_stream(spark, single_target: JetStreamTarget, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(Exception, match=STREAM_NOT_FOUND):
        batch_count(spark, single_target.servers, "NOPE")
    assert_stream_fails_before_any_batch(spark, single_target.servers, "NOPE", tmp_path, STREAM_NOT_FOUND)


def test_stream_without_allow_direct_fails_naming_allow_direct(  # type: ignore[no-untyped-def]
    spark, single_target: JetStreamTarget, no_direct_stream: str, tmp_path: Path
) -> None:
    with pytest.raises(Exception, match=NO_DIRECT):
        batch_count(spark, single_target.servers, no_direct_stream)
    assert_stream_fails_before_any_batch(spark, single_target.servers, no_direct_stream, tmp_path, NO_DIRECT)


def test_unreachable_servers_fail_naming_the_servers_option(spark, unused_server: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(Exception, match=UNREACHABLE):
        batch_count(spark, unused_server, "ANY")
    assert_stream_fails_before_any_batch(spark, unused_server, "ANY", tmp_path, UNREACHABLE)


def test_server_without_batches_is_detected(  # type: ignore[no-untyped-def]
    spark, server_without_batches: FakeJetStream, tmp_path: Path
) -> None:
    with pytest.raises(Exception, match=NO_BATCHES):
        batch_count(spark, server_without_batches.url, "OLD")
    # One probe of one message on the driver, no reads by tasks.
    assert [r["batch"] for r in server_without_batches.direct_requests] == [1]
    assert_stream_fails_before_any_batch(spark, server_without_batches.url, "OLD", tmp_path, NO_BATCHES)
    assert len(server_without_batches.direct_requests) == 2
