"""RePublish's transform and header block against what nats-server 2.15 sent (captured with a raw subscriber)."""

from __future__ import annotations

import pytest

from cluster.stream.config import RePublish
from cluster.stream.republish import (
    Outgoing,
    Republisher,
    StoredForRepublish,
    republish_headers,
    republish_subject,
    republish_transform,
)
from gateway.headers import decode_headers
from storage.model import StoredMsg
from storage.nats_time import parse_rfc3339_nano
from subjects.transform import SubjectTransform, TransformError

# HMSG bodies nats-server 2.15 sent to a subscriber on the destination (header block, payload)
SERVER_WITH_OWN_HEADERS = (
    b"NATS/1.0\r\nNats-Msg-Id: o1.aS1\r\nX-Custom: v\r\nNats-Stream: S1\r\nNats-Subject: o1.a\r\n"
    b"Nats-Sequence: 1\r\nNats-Time-Stamp: 2026-11-23T11:39:04.338657584Z\r\nNats-Last-Sequence: 0\r\n\r\n"
)
SERVER_PLAIN = (
    b"NATS/1.0\r\nNats-Stream: L\r\nNats-Subject: l.x\r\nNats-Sequence: 4\r\n"
    b"Nats-Time-Stamp: 2026-11-23T11:39:48.802546709Z\r\nNats-Last-Sequence: 2\r\n\r\n"
)
SERVER_HEADERS_ONLY = (
    b"NATS/1.0\r\nNats-Msg-Id: o7.aS7\r\nX-Custom: v\r\nNats-Stream: S7\r\nNats-Subject: o7.a\r\n"
    b"Nats-Sequence: 1\r\nNats-Time-Stamp: 2026-11-23T11:39:04.355111178Z\r\nNats-Last-Sequence: 0\r\n"
    b"Nats-Msg-Size: 5\r\n\r\n"
)
SERVER_TRIMMED_FRACTION = (
    b"NATS/1.0\r\nNats-Stream-Source: S6 1 > > o6.a YK0L4STN\r\nNats-Stream: SRC\r\nNats-Subject: o6.a\r\n"
    b"Nats-Sequence: 1\r\nNats-Time-Stamp: 2026-11-23T11:39:04.47344739Z\r\nNats-Last-Sequence: 0\r\n\r\n"
)
OWN_HEADERS = b"NATS/1.0\r\nNats-Msg-Id: o1.aS1\r\nX-Custom: v\r\n\r\n"


def _ts(text: str) -> int:
    return parse_rfc3339_nano(text)


def test_header_block_matches_the_server_byte_for_byte() -> None:
    assert (
        republish_headers(OWN_HEADERS, "S1", "o1.a", 1, _ts("2026-11-23T11:39:04.338657584Z"), 0)
        == SERVER_WITH_OWN_HEADERS
    )
    assert republish_headers(None, "L", "l.x", 4, _ts("2026-11-23T11:39:48.802546709Z"), 2) == SERVER_PLAIN
    own = OWN_HEADERS.replace(b"o1.aS1", b"o7.aS7")
    headers_only = republish_headers(own, "S7", "o7.a", 1, _ts("2026-11-23T11:39:04.355111178Z"), 0, 5)
    assert headers_only == SERVER_HEADERS_ONLY
    source = b"NATS/1.0\r\nNats-Stream-Source: S6 1 > > o6.a YK0L4STN\r\n\r\n"
    trimmed = republish_headers(source, "SRC", "o6.a", 1, _ts("2026-11-23T11:39:04.47344739Z"), 0)
    assert trimmed == SERVER_TRIMMED_FRACTION


@pytest.mark.parametrize(
    ("src", "dest", "subject", "expected"),
    [
        ("", "rp.s1.>", "o1.a.b", "rp.s1.o1.a.b"),  # empty src is ">"
        ("o2.*.*", "rp.s2.$2.$1", "o2.x.y", "rp.s2.y.x"),
        ("o3.*", "rp.s3.{{wildcard(1)}}.{{ wildcard(1) }}", "o3.x", "rp.s3.x.x"),
        ("e3.*", "rp.e3.{{Wildcard(1)}}", "e3.q", "rp.e3.q"),
        ("e7.*.*", "rp.e7.{{wildcard(2)}}", "e7.a.b", "rp.e7.b"),
        ("o5.*", "rp.s5.fixed", "o5.x", "rp.s5.fixed"),  # no reference: everything to the literal
        ("o6.a", "rp.s6", "o6.a", "rp.s6"),
        ("e8.>", "rp.e8.>", "e8.a.b.c", "rp.e8.a.b.c"),
        ("o6.a", "rp.s6", "o6.b", None),  # src does not match: not republished
        ("e8.>", "rp.e8.>", "e8", None),
        ("o2.*.*", "rp.$1", "o2.x", None),
    ],
)
def test_subject_transform_as_the_server_maps(src: str, dest: str, subject: str, expected: str | None) -> None:
    assert SubjectTransform.compile(src, dest).apply(subject) == expected


@pytest.mark.parametrize(
    ("src", "dest"),
    [
        ("o4.*", "rp.s4.*"),  # the server rejects `*` in the destination
        (">", "rp.s10"),  # src's `>` needs one in dest
        ("e2.a", "rp.>"),  # and dest's `>` one in src
        ("e1.*", "rp.e1.$2"),  # no second wildcard
        ("e6.a", "rp.e6.$1"),  # no wildcard at all
    ],
)
def test_transforms_the_server_rejects(src: str, dest: str) -> None:
    with pytest.raises(TransformError):
        SubjectTransform.compile(src, dest)


def _stored(subject: str, seq: int, payload: bytes = b"x") -> StoredMsg:
    return StoredMsg(subject=subject, headers=None, payload=payload, seq=seq, ts_ns=seq)


def _stored_for(subject: str, previous: int, payload: bytes = b"x") -> StoredForRepublish:
    transform = republish_transform(RePublish(dest="rp.>"))
    assert transform is not None
    dest = republish_subject(transform, subject)
    assert dest is not None
    return StoredForRepublish(dest, subject, b"", payload, previous)


def _seqs(out: list[Outgoing]) -> list[int]:
    return [int(decode_headers(o.headers).get("Nats-Sequence") or 0) for o in out]


def test_a_live_leader_republishes_what_it_applies_and_records_its_position_one_marker_at_a_time() -> None:
    republisher = Republisher("P", RePublish(dest="rp.>"), recorded=4, last_seq=4)
    assert not republisher.catching_up
    [first] = republisher.applied(5, 50, _stored_for("p.x", 3, b"a"))
    assert first.subject == "rp.p.x" and first.payload == b"a"
    assert b"Nats-Sequence: 5\r\n" in first.headers and b"Nats-Last-Sequence: 3\r\n" in first.headers
    assert republisher.marker_to_propose() == 5
    republisher.applied(6, 60, _stored_for("p.x", 5))
    assert republisher.marker_to_propose() is None  # one in flight
    republisher.marker_settled(True)
    assert republisher.recorded == 5
    assert republisher.marker_to_propose() == 6
    republisher.marker_settled(False)  # leadership moved: the next leader starts from 5
    assert republisher.recorded == 5


def test_a_new_leader_republishes_what_was_not_recorded_first_then_what_it_applied_meanwhile() -> None:
    # an earlier leader recorded 2; this node had applied up to 5 when it took over
    republisher = Republisher("P", RePublish(dest="rp.>"), recorded=2, last_seq=5)
    assert republisher.catching_up
    assert republisher.applied(6, 60, _stored_for("p.y", 0)) == []  # held: 3..5 go first
    previous = {3: 1, 4: 3, 5: 0}
    out = republisher.caught_up(
        [_stored("p.x", 3), _stored("p.x", 4)], lambda subject, seq: previous[seq]
    )
    assert _seqs(out) == [3, 4] and republisher.catching_up
    assert b"Nats-Last-Sequence: 1\r\n" in out[0].headers
    out = republisher.caught_up(
        [_stored("p.z", 5), _stored("p.y", 6)], lambda subject, seq: previous[seq]
    )
    assert _seqs(out) == [5, 6]  # 6 from the store is skipped: the held copy goes out once
    assert not republisher.catching_up and republisher.position == 6
    [live] = republisher.applied(7, 70, _stored_for("p.x", 4))
    assert _seqs([live]) == [7]


def test_catching_up_on_a_store_that_lost_the_rest() -> None:
    # purged or removed by limits since: nothing to read, the held messages follow at once
    republisher = Republisher("P", RePublish(dest="rp.>"), recorded=0, last_seq=9)
    republisher.applied(10, 1, _stored_for("p.a", 0))
    out = republisher.caught_up([], lambda subject, seq: 0)
    assert _seqs(out) == [10] and republisher.position == 10


def test_headers_only_and_subjects_the_mapping_does_not_take() -> None:
    republisher = Republisher("S", RePublish(dest="rp.only", src="s.a", headers_only=True), 0, 1)
    out = republisher.caught_up([_stored("s.b", 1)], lambda subject, seq: 0)
    assert out == [] and republisher.position == 1
    transform = republish_transform(republisher.config)
    assert transform is not None and republish_subject(transform, "s.b") is None
    stored = StoredForRepublish("rp.only", "s.a", b"", b"hello", 0)
    [only] = republisher.applied(2, 1_000_000_000, stored)
    assert only.subject == "rp.only" and only.payload == b""
    assert only.headers.endswith(b"Nats-Last-Sequence: 0\r\nNats-Msg-Size: 5\r\n\r\n")
    assert b"Nats-Time-Stamp: 1970-01-01T00:00:01Z\r\n" in only.headers


def test_a_mapping_function_republishes_on_its_subject_and_invalid_results_are_suppressed() -> None:
    partition = republish_transform(RePublish(dest="rp.{{partition(3,1)}}", src="s.*"))
    assert partition is not None and republish_subject(partition, "s.a") == "rp.1"
    # nats-server suppresses a republish whose subject is not a valid literal subject
    split = republish_transform(RePublish(dest="rp.{{split(1,-)}}", src="s.*"))
    assert split is not None and republish_subject(split, "s.--") is None
    assert republish_transform(RePublish(dest="", src="s.*")) is None  # an empty dest republishes nothing
