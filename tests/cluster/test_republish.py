"""RePublish's transform and header block against what nats-server 2.15 sent (captured with a raw subscriber)."""

from __future__ import annotations

import pytest

from cluster.stream.config import RePublish
from cluster.stream.republish import Republisher, republish_headers
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
        ("e4.*", "rp.e4.{{partition(3,1)}}"),  # accepted by the server, not implemented here
    ],
)
def test_transforms_the_server_rejects_or_we_do_not_implement(src: str, dest: str) -> None:
    with pytest.raises(TransformError):
        SubjectTransform.compile(src, dest)


def test_last_sequence_follows_publishes_in_flight_even_when_limits_removed_the_previous() -> None:
    republisher = Republisher("P", RePublish(dest="rp.>"))
    store_lookups: list[str] = []

    def last_in_store(subject: str) -> int:
        store_lookups.append(subject)
        return 7

    for _ in range(3):
        republisher.proposing("p.x", last_in_store)
    first = republisher.settled("p.x", None, b"a", (8, 1))
    duplicate = republisher.settled("p.x", None, b"b", None)
    third = republisher.settled("p.x", None, b"c", (9, 2))
    assert store_lookups == ["p.x"]  # read once, when the first publish went in flight
    assert first is not None and third is not None and duplicate is None
    assert first.subject == "rp.p.x" and b"Nats-Last-Sequence: 7\r\n" in first.headers
    assert b"Nats-Sequence: 9\r\nNats-Time-Stamp: 1970-01-01T00:00:00.000000002Z\r\n" in third.headers
    assert b"Nats-Last-Sequence: 8\r\n" in third.headers and third.payload == b"c"
    # nothing in flight any more: the next publish reads the store again
    republisher.proposing("p.x", last_in_store)
    assert store_lookups == ["p.x", "p.x"]


def test_headers_only_and_unmatched_subjects() -> None:
    republisher = Republisher("S", RePublish(dest="rp.only", src="s.a", headers_only=True))
    republisher.proposing("s.b", lambda _subject: pytest.fail("an unmatched subject needs no lookup"))
    assert republisher.settled("s.b", None, b"x", (1, 1)) is None
    republisher.proposing("s.a", lambda _subject: 0)
    out = republisher.settled("s.a", None, b"hello", (2, 1_000_000_000))
    assert out is not None and out.subject == "rp.only" and out.payload == b""
    assert out.headers.endswith(b"Nats-Last-Sequence: 0\r\nNats-Msg-Size: 5\r\n\r\n")
    assert b"Nats-Time-Stamp: 1970-01-01T00:00:01Z\r\n" in out.headers


def test_an_unsupported_mapping_republishes_nothing() -> None:
    republisher = Republisher("S", RePublish(dest="rp.{{partition(3,1)}}", src="s.*"))
    republisher.proposing("s.a", lambda _subject: 0)
    assert republisher.settled("s.a", None, b"x", (1, 1)) is None
