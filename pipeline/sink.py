"""The `jetstream` sink: publish DataFrame rows to JetStream with PubAcks and deduplication.

Each row becomes one message on its `subject` column (or the `subject`
option), with its `headers` column and a `Nats-Msg-Id` built from the task's
partition, the row's index in it and a digest of its content. A retried task,
or the same write run again, publishes the same ids, which the stream drops as
duplicates within its duplicate_window; different data never shares an id.
PubAcks are awaited with at most `max_in_flight` publishes outstanding.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import nats.aio.client
import nats.errors
import nats.js.errors
import orjson
from pyspark import TaskContext
from pyspark.sql import Row
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, MapType, StringType, StructType

from pipeline.errors import OptionError, PipelineError, PublishError
from pipeline.nats_client import RepeatedHeaders, connect
from pipeline.options import WriteOptions
from subjects.grammar import is_valid_subject

MSG_ID_HEADER = "Nats-Msg-Id"
# Spark sets this local property on the tasks of each streaming micro-batch.
STREAMING_BATCH_ID_PROPERTY = "streaming.sql.batchId"


@dataclass(frozen=True, slots=True)
class SinkColumns:
    """Where the sink finds its inputs in each row."""

    data: int
    subject: int | None
    headers: int | None
    data_is_text: bool
    headers_multi: bool


def sink_columns(schema: StructType, options: WriteOptions) -> SinkColumns:
    """Check the DataFrame's columns against what the sink publishes; raises OptionError naming the column."""
    fields = {field.name: (index, field.dataType) for index, field in enumerate(schema.fields)}
    if "data" not in fields:
        raise OptionError(
            "data",
            f"the jetstream sink needs a 'data' column (binary or string); got {schema.simpleString()}",
        )
    data_index, data_type = fields["data"]
    if not isinstance(data_type, BinaryType | StringType):
        raise OptionError("data", f"column 'data' must be binary or string, not {data_type.simpleString()}")
    subject_index = None
    if "subject" in fields:
        subject_index, subject_type = fields["subject"]
        if not isinstance(subject_type, StringType):
            raise OptionError(
                "subject", f"column 'subject' must be a string, not {subject_type.simpleString()}"
            )
    elif options.subject is None:
        raise OptionError("subject", "is required when the DataFrame has no 'subject' column")
    headers_index = None
    headers_multi = False
    if "headers" in fields:
        headers_index, headers_type = fields["headers"]
        value_type = headers_type.valueType if isinstance(headers_type, MapType) else None
        headers_multi = isinstance(value_type, ArrayType) and isinstance(value_type.elementType, StringType)
        if not (
            isinstance(headers_type, MapType)
            and isinstance(headers_type.keyType, StringType)
            and (isinstance(value_type, StringType) or headers_multi)
        ):
            raise OptionError(
                "headers",
                "column 'headers' must be map<string,string> or map<string,array<string>>, "
                f"not {headers_type.simpleString()}",
            )
    return SinkColumns(
        data_index, subject_index, headers_index, isinstance(data_type, StringType), headers_multi
    )


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    subject: str
    data: bytes
    headers: list[tuple[str, str]]


def message_id(prefix: str, scope: str, row_index: int, message: OutgoingMessage) -> str:
    """Stable for the same row at the same place; differs as soon as the content does."""
    digest = hashlib.blake2b(digest_size=8)
    digest.update(message.subject.encode())
    for name, value in message.headers:
        digest.update(b"\0" + name.encode() + b"\0" + value.encode())
    digest.update(b"\1" + message.data)
    return f"{prefix}:{scope}:{row_index}:{digest.hexdigest()}"


def outgoing_messages(
    rows: Iterable[Row], columns: SinkColumns, default_subject: str | None
) -> Iterator[OutgoingMessage]:
    for index, row in enumerate(rows):
        subject = row[columns.subject] if columns.subject is not None else None
        subject = subject or default_subject
        if subject is None:
            raise PublishError(
                f"row {index}: no subject (the 'subject' column is null and no 'subject' option)"
            )
        if not is_valid_subject(subject):
            raise PublishError(f"row {index}: {subject!r} is not a valid subject to publish to")
        raw = row[columns.data]
        if raw is None:
            data = b""
        elif columns.data_is_text:
            data = raw.encode()
        else:
            data = bytes(raw)
        headers: list[tuple[str, str]] = []
        raw_headers = row[columns.headers] if columns.headers is not None else None
        if raw_headers:
            for name, value in raw_headers.items():
                if value is None:
                    continue
                if columns.headers_multi:
                    headers.extend((name, item) for item in value if item is not None)
                else:
                    headers.append((name, value))
        yield OutgoingMessage(subject, data, headers)


@dataclass
class PublishSummary(WriterCommitMessage):
    """What one task published: stored messages and duplicates the stream dropped."""

    partition: int
    stored: int = 0
    duplicates: int = 0


async def publish_all(
    nc: nats.aio.client.Client,
    messages: Iterable[OutgoingMessage],
    options: WriteOptions,
    scope: str,
    summary: PublishSummary,
) -> PublishSummary:
    js = nc.jetstream(timeout=options.ack_timeout, publish_async_max_pending=options.max_in_flight)
    failures: list[BaseException] = []

    def on_ack(future: asyncio.Future[Any]) -> None:
        if future.cancelled():
            failures.append(PublishError("a publish was cancelled before its PubAck"))
            return
        error = future.exception()
        if error is not None:
            failures.append(error)
        elif future.result().duplicate:
            summary.duplicates += 1
        else:
            summary.stored += 1

    for index, message in enumerate(messages):
        if failures:
            break
        headers = list(message.headers)
        if not any(name == MSG_ID_HEADER for name, _ in headers):
            headers.append((MSG_ID_HEADER, message_id(options.msg_id_prefix, scope, index, message)))
        try:
            future = await js.publish_async(
                message.subject,
                message.data,
                wait_stall=options.ack_timeout,
                headers=RepeatedHeaders(headers),
            )
        except nats.js.errors.TooManyStalledMsgsError:
            raise PublishError(
                f"{options.max_in_flight} publishes waited {options.ack_timeout:g}s for PubAcks (option 'ack_timeout')"
            ) from None
        except nats.errors.Error as exc:
            raise PublishError(f"row {index} on {message.subject!r}: {exc}") from exc
        future.add_done_callback(on_ack)
    try:
        await asyncio.wait_for(js.publish_async_completed(), options.ack_timeout)
    except TimeoutError:
        raise PublishError(
            f"PubAcks still missing after {options.ack_timeout:g}s (option 'ack_timeout')"
        ) from None
    if failures:
        raise PublishError(_describe_failure(failures[0])) from failures[0]
    return summary


def _describe_failure(error: BaseException) -> str:
    if isinstance(error, nats.js.errors.NoStreamResponseError):
        return "no stream captures the subject (no PubAck responder, 503)"
    if isinstance(error, nats.js.errors.APIError):
        return f"the stream refused a publish: {error.description} (err_code {error.err_code})"
    return f"publish failed: {error!r}"


def write_partition(
    rows: Iterator[Row], options: WriteOptions, columns: SinkColumns, scope_prefix: str = ""
) -> PublishSummary:
    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    scope = f"{scope_prefix}{partition}"
    summary = PublishSummary(partition)

    async def run() -> PublishSummary:
        nc = await connect(
            options.servers, options.connect_timeout, name=f"jetraft-pipeline-writer-{partition}"
        )
        try:
            return await publish_all(
                nc, outgoing_messages(rows, columns, options.subject), options, scope, summary
            )
        finally:
            await nc.close()

    return asyncio.run(run())


async def check_sink_target(options: WriteOptions) -> None:
    """Servers reachable, and (when the subject is an option) some stream captures that subject."""
    nc = await connect(options.servers, options.connect_timeout, name="jetraft-pipeline-planner")
    try:
        if options.subject is None:
            return
        try:
            msg = await nc.request(
                "$JS.API.STREAM.NAMES",
                orjson.dumps({"subject": options.subject}),
                timeout=options.connect_timeout,
            )
        except nats.errors.NoRespondersError:
            raise PipelineError(
                "$JS.API.STREAM.NAMES: no responders; is JetStream enabled on the servers?"
            ) from None
        reply = orjson.loads(msg.data)
        if not reply.get("streams"):
            raise OptionError("subject", f"no stream captures subject '{options.subject}'")
    finally:
        await nc.close()


class JetStreamWriter(DataSourceWriter):
    def __init__(self, options: WriteOptions, schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise OptionError("mode", "a stream is append-only: use mode('append'), not overwrite")
        self.options = options
        self.columns = sink_columns(schema, options)
        asyncio.run(check_sink_target(options))

    def write(self, iterator: Iterator[Row]) -> PublishSummary:
        return write_partition(iterator, self.options, self.columns)


class JetStreamStreamWriter(DataSourceStreamWriter):
    """Streaming sink: the micro-batch id joins the message id, so a replayed batch is deduplicated."""

    def __init__(self, options: WriteOptions, schema: StructType, overwrite: bool) -> None:
        self.options = options
        self.columns = sink_columns(schema, options)
        asyncio.run(check_sink_target(options))

    def write(self, iterator: Iterator[Row]) -> PublishSummary:
        context = TaskContext.get()
        batch_id = context.getLocalProperty(STREAMING_BATCH_ID_PROPERTY) if context is not None else None
        return write_partition(iterator, self.options, self.columns, scope_prefix=f"b{batch_id or 0}.")

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """PubAcks were awaited in the tasks; nothing is left to commit."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Published messages cannot be taken back; a rerun of the batch is deduplicated by Nats-Msg-Id."""
