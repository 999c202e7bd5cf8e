"""Driver-side planning: check the stream, fix the sequence range, split it into partitions.

Everything here runs before any Spark task starts, so a missing stream, a
stream without allow_direct, unreachable servers or a server without Direct
Get batches fail the query with an error that names the option or stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import nats.aio.client
import nats.errors
import orjson
from pyspark.sql.datasource import InputPartition

from pipeline.direct_get import DirectGetRangeReader
from pipeline.errors import (
    BatchNotSupportedError,
    DirectGetError,
    DirectGetNotAllowedError,
    PipelineError,
    StreamNotFoundError,
)
from pipeline.nats_client import MultiValueHeaderClient, connect
from pipeline.options import ReadOptions

ERR_STREAM_NOT_FOUND = 10059
ERR_NO_MESSAGE_FOUND = 10037


@dataclass(frozen=True, slots=True)
class StreamSnapshot:
    """What STREAM.INFO (answered by the stream leader) said when the query was planned."""

    name: str
    first_seq: int
    last_seq: int
    messages: int
    allow_direct: bool


@dataclass(frozen=True)
class SequenceRange(InputPartition):
    """One Spark partition: stream sequences first..last (inclusive), read through `servers` in order."""

    index: int
    first: int
    last: int
    servers: tuple[str, ...]
    min_last_seq: int | None

    def __repr__(self) -> str:
        return f"SequenceRange(#{self.index} {self.first}..{self.last} via {self.servers[0]})"


def split_range(
    first: int, last: int, partitions: int, servers: tuple[str, ...], min_last_seq: int | None
) -> list[SequenceRange]:
    """Split first..last into at most `partitions` contiguous ranges of near-equal length.

    Partition i dials servers[i % n] first: nats-server answers a queue-group
    request from a local member when it has one, so rotating the entry server
    is what spreads Direct Get load over the replicas there.
    """
    count = last - first + 1
    if count <= 0:
        return []
    parts = max(1, min(partitions, count))
    base, extra = divmod(count, parts)
    ranges = []
    start = first
    for index in range(parts):
        size = base + (1 if index < extra else 0)
        shift = index % len(servers)
        ranges.append(
            SequenceRange(index, start, start + size - 1, servers[shift:] + servers[:shift], min_last_seq)
        )
        start += size
    return ranges


async def api_request(
    nc: nats.aio.client.Client, subject: str, body: bytes, timeout: float
) -> dict[str, object]:
    try:
        msg = await nc.request(subject, body, timeout=timeout)
    except nats.errors.NoRespondersError:
        raise PipelineError(f"{subject}: no responders; is JetStream enabled on the servers?") from None
    except nats.errors.TimeoutError:
        raise PipelineError(f"{subject}: no reply within {timeout:g}s") from None
    return orjson.loads(msg.data)


async def describe_stream(nc: nats.aio.client.Client, stream: str, timeout: float) -> StreamSnapshot:
    reply = await api_request(nc, f"$JS.API.STREAM.INFO.{stream}", b"", timeout)
    error = reply.get("error")
    if isinstance(error, dict):
        if error.get("err_code") == ERR_STREAM_NOT_FOUND:
            raise StreamNotFoundError(f"jetstream option 'stream': stream '{stream}' not found")
        raise PipelineError(f"stream info for '{stream}' failed: {error.get('description')}")
    config = reply["config"]
    state = reply["state"]
    assert isinstance(config, dict) and isinstance(state, dict)
    return StreamSnapshot(
        name=stream,
        first_seq=int(state.get("first_seq", 0)),
        last_seq=int(state.get("last_seq", 0)),
        messages=int(state.get("messages", 0)),
        allow_direct=bool(config.get("allow_direct", False)),
    )


async def first_seq_at(nc: nats.aio.client.Client, options: ReadOptions, start_time: datetime) -> int | None:
    """The first sequence at or after start_time (matching the filter), asked of the leader once."""
    request: dict[str, object] = {"start_time": start_time.isoformat().replace("+00:00", "Z")}
    if options.subject is not None:
        request["next_by_subj"] = options.subject
    reply = await api_request(
        nc, f"$JS.API.STREAM.MSG.GET.{options.stream}", orjson.dumps(request), options.request_timeout
    )
    error = reply.get("error")
    if isinstance(error, dict):
        if error.get("err_code") == ERR_NO_MESSAGE_FOUND:
            return None
        raise PipelineError(f"option 'start_time': the server refused it: {error.get('description')}")
    message = reply["message"]
    assert isinstance(message, dict)
    return int(message["seq"])


async def check_stream(nc: nats.aio.client.Client, options: ReadOptions) -> StreamSnapshot:
    """The stream exists and allows direct get; raises otherwise."""
    snapshot = await describe_stream(nc, options.stream, options.request_timeout)
    if not snapshot.allow_direct:
        raise DirectGetNotAllowedError(
            f"jetstream option 'stream': stream '{options.stream}' does not allow direct get "
            "(allow_direct is false), so no replica can serve reads; enable allow_direct on the stream"
        )
    return snapshot


async def probe_batch_support(nc: MultiValueHeaderClient, options: ReadOptions, seq: int) -> None:
    """One batch request of one message: raises BatchNotSupportedError on a server without batches."""
    reader = DirectGetRangeReader(
        nc, options.stream, options.subject, 1, options.max_bytes, options.request_timeout
    )
    try:
        await reader.fetch_batch(max(seq, 1), 1)
    except (DirectGetError, BatchNotSupportedError) as exc:
        raise type(exc)(f"stream '{options.stream}': {exc}") from exc
    finally:
        await reader.close()


@dataclass(frozen=True, slots=True)
class ReadPlan:
    snapshot: StreamSnapshot
    first: int
    last: int
    ranges: list[SequenceRange]


def default_partitions(options: ReadOptions) -> int:
    """Two partitions per entry server unless the 'partitions' option says otherwise."""
    return options.partitions or 2 * len(options.servers)


async def plan_batch_read(options: ReadOptions) -> ReadPlan:
    nc = await connect(options.servers, options.connect_timeout, name="jetraft-pipeline-planner")
    try:
        snapshot = await check_stream(nc, options)
        first = max(options.start_seq or snapshot.first_seq, snapshot.first_seq, 1)
        if options.start_time is not None:
            at = await first_seq_at(nc, options, options.start_time)
            first = at if at is not None else snapshot.last_seq + 1
        last = min(options.end_seq or snapshot.last_seq, snapshot.last_seq)
        if first <= last:
            await probe_batch_support(nc, options, first)
        min_last_seq = options.min_last_seq if options.min_last_seq is not None else last
        ranges = split_range(first, last, default_partitions(options), options.servers, min_last_seq)
        return ReadPlan(snapshot, first, last, ranges)
    finally:
        await nc.close()
