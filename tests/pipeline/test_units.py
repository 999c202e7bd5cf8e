"""Pure parts of the pipeline: options, range splitting, Arrow conversion, sink message ids and columns."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from pipeline.direct_get import DirectMessage
from pipeline.errors import OptionError
from pipeline.options import ReadOptions, WriteOptions, parse_servers
from pipeline.planning import split_range
from pipeline.schema import ARROW_SCHEMA, RecordBatchBuilder, rfc3339_to_micros
from pipeline.sink import OutgoingMessage, message_id, outgoing_messages, sink_columns

SERVERS = "nats://127.0.0.1:4222,127.0.0.1:4223"


def test_servers_are_normalised_and_checked() -> None:
    assert parse_servers(SERVERS) == ("nats://127.0.0.1:4222", "nats://127.0.0.1:4223")
    for bad in (None, "", " , ", "http://127.0.0.1:80", "nats://127.0.0.1", "nats://:4222"):
        with pytest.raises(OptionError, match="option 'servers'"):
            parse_servers(bad)


def test_read_options_parse_and_name_the_faulty_option() -> None:
    options = ReadOptions.parse(
        {"servers": SERVERS, "stream": "ORDERS", "subject": "orders.*", "start_seq": "5", "end_seq": "9"}
    )
    assert (options.stream, options.subject, options.start_seq, options.end_seq) == (
        "ORDERS",
        "orders.*",
        5,
        9,
    )
    assert ReadOptions.parse({"servers": SERVERS, "stream": "S", "subject": ">"}).subject is None
    cases = {
        "stream": {"servers": SERVERS},
        "start_seq": {"servers": SERVERS, "stream": "S", "start_seq": "abc"},
        "end_seq": {"servers": SERVERS, "stream": "S", "start_seq": "10", "end_seq": "3"},
        "subject": {"servers": SERVERS, "stream": "S", "subject": "a..b"},
        "partitions": {"servers": SERVERS, "stream": "S", "partitions": "0"},
        "batch_size": {"servers": SERVERS, "stream": "S", "batch_size": "-1"},
        "start_time": {"servers": SERVERS, "stream": "S", "start_time": "yesterday"},
        "max_bytes": {"servers": SERVERS, "stream": "S", "max_bytes": str(1 << 30)},
        "request_timeout": {"servers": SERVERS, "stream": "S", "request_timeout": "0"},
    }
    for option, raw in cases.items():
        with pytest.raises(OptionError, match=f"option '{option}'"):
            ReadOptions.parse(raw)
    with pytest.raises(OptionError, match=r"option 'start_time'.*start_seq"):
        ReadOptions.parse(
            {"servers": SERVERS, "stream": "S", "start_seq": "1", "start_time": "2024-01-01T00:00:00Z"}
        )
    with pytest.raises(OptionError, match=r"option 'start_time'.*2262"):
        ReadOptions.parse({"servers": SERVERS, "stream": "S", "start_time": "2999-01-01T00:00:00Z"})


def test_start_time_keeps_microseconds_of_a_nanosecond_stamp() -> None:
    options = ReadOptions.parse(
        {"servers": SERVERS, "stream": "S", "start_time": "2024-11-04T23:45:02.060192123Z"}
    )
    assert options.start_time == datetime(2024, 11, 4, 23, 45, 2, 60192, tzinfo=UTC)


def test_write_options() -> None:
    assert WriteOptions.parse({"servers": SERVERS, "subject": "out.x"}).subject == "out.x"
    with pytest.raises(OptionError, match="option 'subject'"):
        WriteOptions.parse({"servers": SERVERS, "subject": "out.*"})
    with pytest.raises(OptionError, match="option 'max_in_flight'"):
        WriteOptions.parse({"servers": SERVERS, "max_in_flight": "0"})
    with pytest.raises(OptionError, match="option 'msg_id_prefix'"):
        WriteOptions.parse({"servers": SERVERS, "msg_id_prefix": "a:b"})


def test_split_range_covers_every_sequence_once_and_rotates_servers() -> None:
    servers = ("a", "b", "c")
    ranges = split_range(10, 109, 6, servers, 109)
    covered = [seq for r in ranges for seq in range(r.first, r.last + 1)]
    assert covered == list(range(10, 110))
    assert max(r.last - r.first for r in ranges) - min(r.last - r.first for r in ranges) <= 1
    assert [r.servers[0] for r in ranges] == ["a", "b", "c", "a", "b", "c"]
    assert all(sorted(r.servers) == list(servers) for r in ranges)
    assert len(split_range(1, 3, 8, servers, None)) == 3
    assert split_range(5, 4, 3, servers, None) == []


def test_rfc3339_stamps_to_microseconds() -> None:
    def micros(moment: datetime) -> int:
        return int(moment.timestamp()) * 1_000_000 + moment.microsecond

    assert rfc3339_to_micros("2026-11-22T14:19:00.220065209Z") == micros(
        datetime(2026, 11, 22, 14, 19, 0, 220065, tzinfo=UTC)
    )
    assert rfc3339_to_micros("2026-11-22T14:19:00Z") == micros(datetime(2026, 11, 22, 14, 19, tzinfo=UTC))
    assert rfc3339_to_micros("2026-11-22T14:19:00.5Z") == micros(
        datetime(2026, 11, 22, 14, 19, 0, 500000, tzinfo=UTC)
    )
    assert rfc3339_to_micros("2026-11-22T15:19:00.000001+01:00") == micros(
        datetime(2026, 11, 22, 14, 19, 0, 1, tzinfo=UTC)
    )


def test_record_batches_follow_the_schema() -> None:
    builder = RecordBatchBuilder("S")
    builder.extend(
        [
            DirectMessage(
                "a.b", 7, "2026-01-01T00:00:01.000002Z", [("K", "1"), ("K", "2"), ("L", "x")], b"\x00d", None
            ),
            DirectMessage("a.c", 8, "2026-01-01T00:00:02Z", [], b"", "n2"),
        ]
    )
    batch = builder.flush()
    assert batch.schema == ARROW_SCHEMA
    rows = batch.to_pylist()
    assert rows[0]["headers"] == [("K", ["1", "2"]), ("L", ["x"])]
    assert rows[0]["data"] == b"\x00d" and rows[0]["stream"] == "S" and rows[0]["responder"] is None
    assert rows[1]["responder"] == "n2" and rows[1]["headers"] == []
    assert len(builder) == 0


def test_message_ids_are_stable_per_place_and_content() -> None:
    message = OutgoingMessage("out.a", b"x", [("H", "1")])
    same = OutgoingMessage("out.a", b"x", [("H", "1")])
    assert message_id("p", "3", 5, message) == message_id("p", "3", 5, same)
    variants = {
        message_id("p", "3", 5, message),
        message_id("p", "4", 5, message),
        message_id("p", "3", 6, message),
        message_id("p", "3", 5, OutgoingMessage("out.a", b"y", [("H", "1")])),
        message_id("p", "3", 5, OutgoingMessage("out.b", b"x", [("H", "1")])),
        message_id("p", "3", 5, OutgoingMessage("out.a", b"x", [("H", "2")])),
        message_id("q", "3", 5, message),
    }
    assert len(variants) == 7


def test_sink_columns_are_checked_by_name_and_type() -> None:
    options = WriteOptions.parse({"servers": SERVERS})
    schema = StructType(
        [
            StructField("data", StringType()),
            StructField("subject", StringType()),
            StructField("headers", MapType(StringType(), ArrayType(StringType()))),
        ]
    )
    columns = sink_columns(schema, options)
    assert (columns.data, columns.subject, columns.headers, columns.data_is_text, columns.headers_multi) == (
        0,
        1,
        2,
        True,
        True,
    )
    rows = [("x", "out.a", {"H": ["1", "2"]}), (None, "out.b", None)]
    assert list(outgoing_messages(rows, columns, None)) == [  # type: ignore[arg-type]
        OutgoingMessage("out.a", b"x", [("H", "1"), ("H", "2")]),
        OutgoingMessage("out.b", b"", []),
    ]
    with pytest.raises(OptionError, match="'data'"):
        sink_columns(StructType([StructField("payload", BinaryType())]), options)
    with pytest.raises(OptionError, match="'data'"):
        sink_columns(StructType([StructField("data", IntegerType())]), options)
    with pytest.raises(OptionError, match="option 'subject'"):
        sink_columns(StructType([StructField("data", BinaryType())]), options)
    with pytest.raises(OptionError, match="'headers'"):
        sink_columns(
            StructType([StructField("data", BinaryType()), StructField("headers", StringType())]),
            WriteOptions.parse({"servers": SERVERS, "subject": "o"}),
        )
