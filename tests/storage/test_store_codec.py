"""Record layout, snapshot framing and timestamp formatting."""

from __future__ import annotations

import dataclasses
import struct

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.config import StoreConfig
from storage.errors import CorruptStoreError
from storage.model import StoredMsg, msg_size
from storage.nats_time import ZERO_TIME, format_optional_ts, format_rfc3339_nano, parse_rfc3339_nano
from storage.record import decode_record, encode_record, record_header
from storage.snapshot import SnapshotHeader, SnapshotReader, encode_snapshot

HDR = b"NATS/1.0\r\nA: b\r\n\r\n"


def test_record_is_the_deep_dive_layout() -> None:
    record = encode_record(b"a.bc", None, b"hello", 7, 123)
    assert len(record) == 39 == msg_size(4, None, 5)
    length, seq, ts, subject_len = struct.unpack_from("<IQqH", record)
    assert (length, seq, ts, subject_len) == (39, 7, 123, 4)
    assert record[22:26] == b"a.bc" and record[26:31] == b"hello"
    with_headers = encode_record(b"a.bc", HDR, b"hello", 8, 124)
    assert len(with_headers) == 39 + 4 + len(HDR)
    assert struct.unpack_from("<I", with_headers)[0] == (len(with_headers) | 0x8000_0000)


@settings(max_examples=100, deadline=None)
@given(
    st.text(alphabet="abc.$é", min_size=1, max_size=20),
    st.one_of(st.none(), st.binary(max_size=40)),
    st.binary(max_size=200),
    st.integers(1, 2**63 - 1),
    st.integers(-(2**63), 2**63 - 1),
)
def test_record_round_trip(subject: str, headers: bytes | None, payload: bytes, seq: int, ts: int) -> None:
    record = encode_record(subject.encode(), headers, payload, seq, ts)
    assert decode_record(record) == StoredMsg(subject, headers, payload, seq, ts)
    assert record_header(record) == (seq, ts, subject.encode())


def test_damaged_records_are_detected() -> None:
    record = encode_record(b"a", HDR, b"payload", 1, 1)
    for damaged in (record[:-1], record[:10], record[:25] + b"X" + record[26:], b""):
        with pytest.raises(CorruptStoreError):
            decode_record(damaged)


def header(messages: int, total: int) -> SnapshotHeader:
    """Messages 1..messages (first_seq 1 fits both an empty and a full store)."""
    return SnapshotHeader(StoreConfig(max_msgs=5), 1, messages, 99, messages, total, b"\x01")


def test_snapshot_framing_survives_any_chunking() -> None:
    records = [encode_record(b"s", None, bytes([i]) * i, i, i) for i in range(1, 30)]
    data = b"".join(encode_snapshot(header(29, sum(map(len, records))), records))
    for size in (1, 7, 64, len(data)):
        reader = SnapshotReader(data[i : i + size] for i in range(0, len(data), size))
        assert reader.header.config.max_msgs == 5
        assert reader.header.metadata == b"\x01"
        assert list(reader.records()) == records


def test_snapshot_refuses_a_store_that_changed_while_streaming() -> None:
    records = [encode_record(b"s", None, b"", 1, 1)]
    with pytest.raises(CorruptStoreError):
        list(encode_snapshot(header(2, 60), records))


def test_snapshot_header_must_be_consistent() -> None:
    bad = SnapshotHeader(StoreConfig(), 5, 2, 0, 3, 90, None)
    chunks = encode_snapshot(bad, [])
    with pytest.raises(CorruptStoreError):
        SnapshotReader(chunks)


@pytest.mark.parametrize(
    ("ts_ns", "text"),
    [
        (0, "1970-01-01T00:00:00Z"),
        (1_795_000_000_220_065_209, "2026-11-18T11:06:40.220065209Z"),
        (1_795_000_000_500_000_000, "2026-11-18T11:06:40.5Z"),
        (1_795_000_000_000_000_001, "2026-11-18T11:06:40.000000001Z"),
    ],
)
def test_rfc3339_nano_like_go(ts_ns: int, text: str) -> None:
    assert format_rfc3339_nano(ts_ns) == text
    assert parse_rfc3339_nano(text) == ts_ns


def test_rfc3339_parsing_with_offsets_and_zero_time() -> None:
    assert parse_rfc3339_nano("2026-11-22T14:19:00.420995000Z") == parse_rfc3339_nano(
        "2026-11-22T16:19:00.420995+02:00"
    )
    assert format_optional_ts(0) == ZERO_TIME
    for bad in (
        "yesterday",
        "2026-11-22 14:19:00Z",
        "2026-11-22T14:19:00.1234567891Z",
        "2026-13-01T00:00:00Z",
    ):
        with pytest.raises(ValueError):
            parse_rfc3339_nano(bad)


def test_store_config_json_names_every_field_and_reads_back() -> None:
    # to_json_dict lists the fields one by one: a field added to StoreConfig must be added there too
    config = StoreConfig(
        max_msgs=5,
        max_bytes=6,
        max_age_ns=7,
        max_msg_size=8,
        max_msgs_per_subject=9,
        discard="new",
        discard_new_per_subject=True,
        allow_msg_ttl=True,
        subject_delete_marker_ttl_ns=10,
    )
    written = config.to_json_dict()
    assert set(written) == {field.name for field in dataclasses.fields(StoreConfig)}
    assert written["discard"] == "new" and type(written["discard"]) is str
    assert StoreConfig.from_json_dict(orjson.loads(orjson.dumps(written))) == config
