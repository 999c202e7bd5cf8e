"""`JetStreamDataSource`: the PySpark data source registered under the short name `jetstream`.

Batch reads plan a sequence range once and read it in partitions; streaming
reads use `{"next_seq": N}` as the offset (the first sequence not yet read),
so each micro-batch reads the deterministic range `[start, end)` and a query
restarted from its checkpoint neither skips nor repeats a message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator, Sequence
from typing import Any, TypeVar

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

from pipeline.errors import OptionError
from pipeline.nats_client import connect
from pipeline.options import ReadOptions, WriteOptions
from pipeline.partition_reader import read_partition
from pipeline.planning import (
    SequenceRange,
    StreamSnapshot,
    check_stream,
    describe_stream,
    first_seq_at,
    plan_batch_read,
    probe_batch_support,
    split_range,
)
from pipeline.schema import READ_SCHEMA_DDL
from pipeline.sink import JetStreamStreamWriter, JetStreamWriter

try:  # Spark 4.2+: admission control and Trigger.AvailableNow for Python sources
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - Spark 4.0/4.1 call latestOffset() without arguments
    ReadAllAvailable = ReadLimit = ReadMaxRows = None  # type: ignore[assignment,misc]
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]

T = TypeVar("T")

READ_SCHEMA_STRING = (
    "struct<subject:string,seq:bigint,time:timestamp,headers:map<string,array<string>>,"
    "data:binary,stream:string,responder:string>"
)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run one driver-side coroutine on a private loop (Spark calls the data source synchronously)."""
    return asyncio.run(coro)


def _check_read_schema(schema: StructType) -> None:
    if schema.simpleString() != READ_SCHEMA_STRING:
        raise OptionError(
            "schema",
            f"the jetstream source has the fixed schema '{READ_SCHEMA_DDL}', got '{schema.simpleString()}'",
        )


class JetStreamDataSource(DataSource):
    """Read a JetStream stream (Direct Get batches from every replica) or publish rows to one."""

    @classmethod
    def name(cls) -> str:
        return "jetstream"

    def schema(self) -> str:
        return READ_SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        _check_read_schema(schema)
        return JetStreamBatchReader(ReadOptions.parse(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        _check_read_schema(schema)
        return JetStreamStreamReader(ReadOptions.parse(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return JetStreamWriter(WriteOptions.parse(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return JetStreamStreamWriter(WriteOptions.parse(self.options), schema, overwrite)


class JetStreamBatchReader(DataSourceReader):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        plan = run_async(plan_batch_read(self.options))
        if not plan.ranges:
            # An empty range still needs one partition for Spark to produce an empty DataFrame.
            return [SequenceRange(0, 1, 0, self.options.servers, None)]
        return plan.ranges

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SequenceRange)
        if partition.first > partition.last:
            return iter(())
        return read_partition(self.options, partition)


async def _start_offset(options: ReadOptions) -> int:
    nc = await connect(options.servers, options.connect_timeout, name="jetraft-pipeline-planner")
    try:
        snapshot = await check_stream(nc, options)
        if options.start_time is not None:
            at = await first_seq_at(nc, options, options.start_time)
            start = at if at is not None else snapshot.last_seq + 1
        else:
            start = options.start_seq or max(snapshot.first_seq, 1)
        if start <= snapshot.last_seq:
            await probe_batch_support(nc, options, start)
        return start
    finally:
        await nc.close()


async def _snapshot(options: ReadOptions) -> StreamSnapshot:
    nc = await connect(options.servers, options.connect_timeout, name="jetraft-pipeline-planner")
    try:
        return await describe_stream(nc, options.stream, options.request_timeout)
    finally:
        await nc.close()


class JetStreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    """Offsets are `{"next_seq": N}`: everything below N has been handed to Spark."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        # Checked when the query starts, on the driver, so bad options fail before any micro-batch.
        self._initial = run_async(_start_offset(options))
        self._available_now_end: int | None = None

    def initialOffset(self) -> dict[str, int]:
        return {"next_seq": self._initial}

    def _end_now(self) -> int:
        end = run_async(_snapshot(self.options)).last_seq + 1
        if self.options.end_seq is not None:
            end = min(end, self.options.end_seq + 1)
        return end

    def latestOffset(self, start: dict[str, int] | None = None, limit: Any = None) -> dict[str, int]:
        end = self._available_now_end if self._available_now_end is not None else self._end_now()
        if start is not None:
            begin = int(start["next_seq"])
            if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
                # A range of N sequences holds at most N matching messages.
                end = min(end, begin + limit.max_rows)
            end = max(end, begin)
        return {"next_seq": end}

    def getDefaultReadLimit(self) -> Any:
        if self.options.max_messages_per_trigger is not None and ReadMaxRows is not None:
            return ReadMaxRows(self.options.max_messages_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def reportLatestOffset(self) -> dict[str, int] | None:
        return {"next_seq": self._end_now()}

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now_end = self._end_now()

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        first, last = int(start["next_seq"]), int(end["next_seq"]) - 1
        min_last_seq = self.options.min_last_seq if self.options.min_last_seq is not None else last
        count = self.options.partitions or len(self.options.servers)
        return split_range(first, last, count, self.options.servers, min_last_seq)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SequenceRange)
        return read_partition(self.options, partition)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to release: the stream keeps the messages, Spark keeps the offsets."""
