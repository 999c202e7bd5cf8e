"""jetraft's stream archive (cluster/backup/archive.py) and the snapshot and restore requests' checks."""

from __future__ import annotations

import json

import pytest

from cluster.api.errors import ApiError
from cluster.backup.archive import (
    ArchivedConsumer,
    ArchivedMessage,
    ArchiveError,
    ArchiveHeader,
    ArchiveWriter,
    archive_kind,
    read_archive,
    unframe,
)
from cluster.backup.restore_batch import join_restore_batch, split_restore_batch
from cluster.backup.snapshot import SnapshotRequest, chunking, parse_snapshot_request
from cluster.meta.restore import RESTORING_SUBJECT_PREFIX, rebuilding_config, restore_config

HEADER = ArchiveHeader("S", {"name": "S", "subjects": ["s.>"]}, {"messages": 3}, 1, 5)
MESSAGES = [
    ArchivedMessage(1, 1_000, "s.a", b"", b"one"),
    ArchivedMessage(2, 2_000, "s.b", b"NATS/1.0\r\nX: 1\r\n\r\n", b""),
    ArchivedMessage(4, 4_000, "s.a", b"", bytes(range(256)) * 100),
]


CONSUMERS = [ArchivedConsumer("C", {"durable_name": "C", "ack_policy": "explicit"}, 7, b'{"started":true}')]


def _archive(messages: list[ArchivedMessage] = MESSAGES, take_every: int = 1) -> bytes:
    writer = ArchiveWriter()
    writer.header(HEADER)
    out = bytearray()
    for i, msg in enumerate(messages):
        writer.message(msg.seq, msg.ts_ns, msg.subject, msg.headers or None, msg.payload)
        if i % take_every == 0:
            out += writer.take()
    for consumer in CONSUMERS:
        writer.consumer(consumer)
    writer.end()
    return bytes(out + writer.take(final=True))


def _pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("piece", [1, 7, 1024, 1 << 20])
def test_an_archive_reads_back_as_written_whatever_the_chunks(piece: int) -> None:
    data = _archive(take_every=2)
    records = list(read_archive(unframe(_pieces(data, piece))))
    assert records == [HEADER, *MESSAGES, *CONSUMERS]


def test_an_archive_is_snappy_framed_as_an_s2_reader_accepts_it() -> None:
    data = _archive()
    assert data.startswith(b"\xff\x06\x00\x00sNaPpY")
    assert archive_kind(data) == "jetraft"
    assert archive_kind(b"\xff\x06\x00\x00S2sTwO" + b"\x00" * 8) == "nats-server"
    assert archive_kind(b"garbage") == "unknown"


def test_an_altered_byte_is_refused() -> None:
    raw = bytearray(b"".join(unframe([_archive()])))
    raw[-1000] ^= 0xFF  # inside the last message's payload: the records stay well-formed, the digest tells
    with pytest.raises(ArchiveError, match="digest"):
        list(read_archive([bytes(raw)]))


def test_a_cut_archive_is_refused() -> None:
    data = _archive()
    with pytest.raises(ArchiveError):
        list(read_archive(unframe([data[: len(data) // 2]])))
    raw = b"".join(unframe([data]))
    with pytest.raises(ArchiveError, match="ends early"):
        list(read_archive([raw[:-10]]))


def test_an_archive_without_its_end_or_with_bytes_after_it_is_refused() -> None:
    writer = ArchiveWriter()
    writer.header(HEADER)
    raw = b"".join(unframe([writer.take(final=True)]))
    with pytest.raises(ArchiveError, match="ends early"):
        list(read_archive([raw]))
    whole = b"".join(unframe([_archive()]))
    with pytest.raises(ArchiveError, match="after the archive's end"):
        list(read_archive([whole + b"x"]))


def test_a_nats_server_archive_is_not_read_as_ours() -> None:
    with pytest.raises(ArchiveError, match="nats-server"):
        list(unframe([b"\xff\x06\x00\x00S2sTwO\x01\x08\x00\x00abcdNATS"]))
    with pytest.raises(ArchiveError, match="not a jetraft"):
        list(read_archive([b"NATSARC1" + b"\x00" * 16]))


def test_chunk_and_window_are_clamped_as_nats_server_clamps_them() -> None:
    assert chunking(SnapshotRequest("x")) == (128 * 1024, 64)  # 8 MiB window / 128 KiB chunks
    assert chunking(SnapshotRequest("x", chunk_size=10, window_size=10)) == (1024, 1)
    assert chunking(SnapshotRequest("x", chunk_size=1 << 30, window_size=1 << 30)) == (1 << 20, 32)
    assert chunking(SnapshotRequest("x", chunk_size=4096, window_size=2048)) == (4096, 1)


@pytest.mark.parametrize(
    ("body", "err_code"),
    [
        ({"deliver_subject": ""}, 10015),
        ({"deliver_subject": "a.*"}, 10015),
        ({"deliver_subject": "a b"}, 10015),
        ({"deliver_subject": 5}, 10025),
        ({"deliver_subject": "a", "chunk_size": "big"}, 10025),
        ({"deliver_subject": "a", "surprise": 1}, 10025),
    ],
)
def test_a_snapshot_request_is_checked_as_nats_server_checks_it(body: object, err_code: int) -> None:
    with pytest.raises(ApiError) as caught:
        parse_snapshot_request(json.dumps(body).encode())
    assert caught.value.err_code == err_code


def test_a_snapshot_request_keeps_every_setting() -> None:
    body = {"deliver_subject": "in.1", "no_consumers": True, "chunk_size": 2048, "window_size": 4096, "jsck": True}
    assert parse_snapshot_request(json.dumps(body).encode()) == SnapshotRequest("in.1", True, 2048, 4096, True)


@pytest.mark.parametrize(
    ("payload", "err_code"),
    [
        (b"", 10003),
        (b"{}", 10003),
        (b"nope", 10025),
        (b'{"config":{"name":"OTHER"}}', 10056),
        (b'{"config":{"name":"S","mirror":{"name":"O"}}}', 10062),
        (b'{"config":{"name":"S","sources":[{"name":"O"}]}}', 10062),
    ],
)
def test_a_restore_request_is_checked_before_any_chunk(payload: bytes, err_code: int) -> None:
    with pytest.raises(ApiError) as caught:
        restore_config("S", payload)
    assert caught.value.err_code == err_code


def test_a_restore_without_a_config_name_takes_the_subjects() -> None:
    assert restore_config("S", b'{"config":{"subjects":["s"]}}') == {"name": "S", "subjects": ["s"]}


def test_a_stream_is_rebuilt_where_no_client_publishes_and_nothing_acts_on_its_messages() -> None:
    wanted = {"name": "S", "subjects": ["s.>"], "sealed": True, "republish": {"src": ">", "dest": "r.>"}}
    wanted["subject_transform"] = {"src": "s.>", "dest": "t.>"}
    building = rebuilding_config(wanted, "tok")
    assert building == {"name": "S", "subjects": [RESTORING_SUBJECT_PREFIX + "tok"], "sealed": False}
    assert wanted["subjects"] == ["s.>"] and wanted["sealed"]  # the requested config is left as it was


def test_a_restore_batch_splits_into_its_entries() -> None:
    entries = [b"a", b"", b"bc" * 100]
    assert list(split_restore_batch(join_restore_batch(entries))) == entries
    with pytest.raises(ValueError, match="cut short"):
        list(split_restore_batch(join_restore_batch(entries)[:-1]))
