"""Executor side of a read: one asyncio loop and one NATS connection per Spark partition.

Spark calls `read(partition)` in a Python worker and pulls record batches from
the returned iterator; the loop runs only while the next chunk of messages is
being fetched, and is closed with the connection when the iterator ends or is
abandoned.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import pyarrow as pa

from pipeline.direct_get import DirectGetRangeReader
from pipeline.nats_client import connect
from pipeline.options import ReadOptions
from pipeline.planning import SequenceRange
from pipeline.schema import RecordBatchBuilder

ROWS_PER_RECORD_BATCH = 8192


def read_partition(options: ReadOptions, part: SequenceRange) -> Iterator[pa.RecordBatch]:
    loop = asyncio.new_event_loop()
    try:
        nc = loop.run_until_complete(
            connect(part.servers, options.connect_timeout, name=f"jetraft-pipeline-reader-{part.index}")
        )
        reader = DirectGetRangeReader(
            nc,
            options.stream,
            options.subject,
            options.batch_size,
            options.max_bytes,
            options.request_timeout,
            part.min_last_seq,
        )
        chunks = reader.read_range(part.first, part.last)
        builder = RecordBatchBuilder(options.stream)
        try:
            while True:
                try:
                    chunk = loop.run_until_complete(anext(chunks))
                except StopAsyncIteration:
                    break
                builder.extend(chunk)
                if len(builder) >= ROWS_PER_RECORD_BATCH:
                    yield builder.flush()
            if len(builder):
                yield builder.flush()
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(chunks.aclose())
            with contextlib.suppress(Exception):
                loop.run_until_complete(nc.close())
    finally:
        loop.close()
