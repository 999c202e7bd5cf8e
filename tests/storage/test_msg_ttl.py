"""Reading `Nats-TTL` as nats-server 2.15 does.

The expected answers were taken from a real nats-server 2.15.1 cluster: each value published with
nats-py (which strips the value) or, for the whitespace cases, as a raw HPUB, to a stream with
`allow_msg_ttl`; an accepted value's TTL was read back from the stored message.
"""

from __future__ import annotations

import pytest

from storage.msg_ttl import (
    TTL_NEVER,
    InvalidTTLError,
    format_go_seconds,
    header_ttl,
    parse_go_duration,
    slice_header,
    stored_ttl,
    ttl_deadline_ns,
    wrap_int64,
)

SECOND = 1_000_000_000


def headers(line: bytes) -> bytes:
    return b"NATS/1.0\r\n" + line + b"\r\n\r\n"


@pytest.mark.parametrize(
    ("value", "ttl"),
    [
        (b" 5", 5),
        (b" never", TTL_NEVER),
        (b" NEVER", TTL_NEVER),
        (b"", 0),
        (b" 00", 0),  # no unit, so a plain number: zero, which means no TTL (accepted by the server)
        (b" 1.5s", 1),
        (b" 1h", 3600),
        (b"   5", 5),  # spaces after the colon are skipped
        (b"5", 5),  # no space at all
        (b" +2s", 2),
        (b"  1m", 60),
        (b" 1000000000\xc2\xb5s", 1000),  # the micro sign is a unit
    ],
)
def test_values_the_server_accepts(value: bytes, ttl: int) -> None:
    assert header_ttl(headers(b"Nats-TTL:" + value)) == ttl


@pytest.mark.parametrize(
    "value", [b" abc", b" 0", b" 500ms", b" -1", b" 1e3", b" 5 ", b" 5\t", b"\t5", b" -5s", b" 1x"]
)
def test_values_the_server_refuses(value: bytes) -> None:
    block = headers(b"Nats-TTL:" + value)
    with pytest.raises(InvalidTTLError):
        header_ttl(block)
    assert stored_ttl(block) == 0


def test_the_header_name_is_case_sensitive_and_must_start_a_line() -> None:
    assert header_ttl(headers(b"nats-ttl: 5")) == 0
    assert header_ttl(headers(b"X-Nats-TTL: 5")) == 0
    assert header_ttl(headers(b"Nats-TTLX: 5")) == 0
    assert header_ttl(None) == 0
    # the first line that names it counts
    assert header_ttl(headers(b"X-Nats-TTL: 9\r\nNats-TTL: 7\r\nNats-TTL: 8")) == 7
    assert slice_header(b"Key", headers(b"B: 1\r\nKey:  two words ")) == b"two words "


def test_go_durations() -> None:
    assert parse_go_duration("1h2m3.5s") == 3723 * SECOND + SECOND // 2
    assert parse_go_duration("0") == 0
    assert parse_go_duration("-1.5m") == -90 * SECOND
    assert parse_go_duration(".5s") == SECOND // 2
    for bad in ["", "5", "1.s.", ".s", "1hh", "9999999999999999999ns", "1 s"]:
        with pytest.raises(ValueError):
            parse_go_duration(bad)
    assert parse_go_duration("1.s") == SECOND


def test_huge_ttls_wrap_around_as_in_go() -> None:
    # nats-server expired both of these at once: the deadline overflows int64 into the past
    now = 1_795_645_000 * SECOND
    for value, seconds in [(b" 9999999999", 9_999_999_999), (b" 99999999999999999999", 7766279631452241919)]:
        ttl = header_ttl(headers(b"Nats-TTL:" + value))
        assert ttl == seconds
        assert ttl_deadline_ns(now, ttl) < now
    assert wrap_int64(2**63) == -(2**63)


def test_go_duration_strings_of_whole_seconds() -> None:
    assert [format_go_seconds(s) for s in (1, 59, 60, 90, 3600, 3661, 0)] == [
        "1s",
        "59s",
        "1m0s",
        "1m30s",
        "1h0m0s",
        "1h1m1s",
        "0s",
    ]
