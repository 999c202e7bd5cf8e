"""The DataFrame schema of a stream read, and the conversion of Direct Get replies into Arrow batches.

Handing Spark Arrow record batches instead of Python tuples keeps the
per-message cost in the reader to building a few Python lists.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from functools import lru_cache

import pyarrow as pa

from pipeline.direct_get import DirectMessage

READ_SCHEMA_DDL = (
    "subject string, seq long, time timestamp, headers map<string,array<string>>, "
    "data binary, stream string, responder string"
)

ARROW_SCHEMA = pa.schema(
    [
        pa.field("subject", pa.string()),
        pa.field("seq", pa.int64()),
        pa.field("time", pa.timestamp("us", tz="UTC")),
        pa.field("headers", pa.map_(pa.string(), pa.list_(pa.string()))),
        pa.field("data", pa.binary()),
        pa.field("stream", pa.string()),
        pa.field("responder", pa.string()),
    ]
)


@lru_cache(maxsize=4096)
def _epoch_seconds(prefix: str) -> int:
    """Seconds since the epoch of 'YYYY-MM-DDTHH:MM:SS' (UTC); cached since a read sees few distinct seconds."""
    return int(datetime.fromisoformat(prefix).replace(tzinfo=UTC).timestamp())


def rfc3339_to_micros(stamp: str) -> int:
    """Nats-Time-Stamp (RFC 3339, nanoseconds, 'Z') into microseconds since the epoch; sub-µs digits dropped."""
    if len(stamp) >= 20 and stamp[-1] == "Z" and stamp[10] == "T":
        seconds = _epoch_seconds(stamp[:19])
        if stamp[19] == ".":
            digits = stamp[20:-1]
            micros = int((digits + "000000")[:6]) if digits else 0
        else:
            micros = 0
        return seconds * 1_000_000 + micros
    # Offsets other than Z are legal RFC 3339; nats-server never sends them, but stay correct if one does.
    text = stamp
    dot = text.find(".")
    if dot >= 0:
        end = dot + 1
        while end < len(text) and text[end].isdigit():
            end += 1
        text = text[: min(end, dot + 7)] + text[end:]
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def grouped_headers(fields: list[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """[(name, value), ...] into [(name, [values...]), ...], first-seen order of names."""
    grouped: dict[str, list[str]] = {}
    for name, value in fields:
        grouped.setdefault(name, []).append(value)
    return list(grouped.items())


class RecordBatchBuilder:
    """Accumulates messages column by column and emits `pyarrow.RecordBatch`es of ARROW_SCHEMA."""

    def __init__(self, stream: str) -> None:
        self._stream = stream
        self._reset()

    def _reset(self) -> None:
        self.subjects: list[str] = []
        self.seqs: list[int] = []
        self.times: list[int] = []
        self.headers: list[list[tuple[str, list[str]]]] = []
        self.data: list[bytes] = []
        self.responders: list[str | None] = []

    def __len__(self) -> int:
        return len(self.seqs)

    def extend(self, messages: Iterable[DirectMessage]) -> None:
        for msg in messages:
            self.subjects.append(msg.subject)
            self.seqs.append(msg.seq)
            self.times.append(rfc3339_to_micros(msg.time))
            self.headers.append(grouped_headers(msg.headers) if msg.headers else [])
            self.data.append(msg.data)
            self.responders.append(msg.responder)

    def flush(self) -> pa.RecordBatch:
        count = len(self.seqs)
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array(self.subjects, pa.string()),
                pa.array(self.seqs, pa.int64()),
                pa.array(self.times, pa.timestamp("us", tz="UTC")),
                pa.array(self.headers, ARROW_SCHEMA.field("headers").type),
                pa.array(self.data, pa.binary()),
                pa.array([self._stream] * count, pa.string()),
                pa.array(self.responders, pa.string()),
            ],
            schema=ARROW_SCHEMA,
        )
        self._reset()
        return batch
