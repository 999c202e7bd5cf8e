"""The sans-IO client protocol parser: framing, limits, and the errors nats-server reports."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.events import (
    ERR_MAX_CONTROL_LINE,
    ERR_MAX_PAYLOAD,
    ERR_UNKNOWN_OP,
    NEED_DATA,
    OK,
    PING,
    PONG,
    ClientEvent,
    Connect,
    Err,
    HPub,
    Info,
    ProtocolError,
    Pub,
    Sub,
    Unsub,
)
from gateway.protocol import (
    ClientCommandParser,
    encode_connect,
    encode_err,
    encode_hmsg,
    encode_hpub,
    encode_info,
    encode_msg,
    encode_pub,
    encode_sub,
    encode_unsub,
)

HEADERS = b"NATS/1.0\r\nA: 1\r\nA: 2\r\nB: x y\r\n\r\n"

# One of each command a client sends, with the event it must parse to.
COMMANDS: list[tuple[bytes, ClientEvent]] = [
    (encode_connect({"verbose": False, "headers": True}), Connect({"verbose": False, "headers": True})),
    (b"PING\r\n", PING),
    (b"PONG\r\n", PONG),
    (encode_pub("foo.bar", b"hello"), Pub("foo.bar", None, b"hello")),
    (encode_pub("foo", b"", reply="_INBOX.1"), Pub("foo", "_INBOX.1", b"")),
    # A payload holding CRLF and protocol words is still only payload.
    (encode_pub("foo", b"PING\r\nPUB x 1\r\n"), Pub("foo", None, b"PING\r\nPUB x 1\r\n")),
    (encode_hpub("h.1", HEADERS, b"body"), HPub("h.1", None, HEADERS, b"body")),
    (encode_hpub("h.2", HEADERS, b"", reply="r.1"), HPub("h.2", "r.1", HEADERS, b"")),
    (encode_sub("foo.*", "1"), Sub("foo.*", None, "1")),
    (encode_sub("foo.>", "22", queue="workers"), Sub("foo.>", "workers", "22")),
    (encode_unsub("1"), Unsub("1")),
    (encode_unsub("22", 5), Unsub("22", 5)),
    (b"+OK\r\n", OK),
    (b"-ERR 'oops'\r\n", Err("oops")),
    (b'INFO {"server_id":"x"}\r\n', Info({"server_id": "x"})),
    # What nats-server also accepts: lower case, tabs and runs of spaces, a bare LF.
    (b"sub  a.b\t q  7\n", Sub("a.b", "q", "7")),
    (b"pub x 2\r\nab\r\n", Pub("x", None, b"ab")),
    (b"ping\n", PING),
]
STREAM = b"".join(raw for raw, _ in COMMANDS)
EXPECTED = [event for _, event in COMMANDS]


def parse_chunks(chunks: list[bytes], parser: ClientCommandParser | None = None) -> list[ClientEvent]:
    parser = parser or ClientCommandParser()
    events: list[ClientEvent] = []
    for chunk in chunks:
        parser.receive_data(chunk)
        while (event := parser.next_event()) is not NEED_DATA:
            events.append(event)  # type: ignore[arg-type]
    return events


@pytest.mark.parametrize(("raw", "expected"), COMMANDS, ids=[raw[:12].decode() for raw, _ in COMMANDS])
def test_each_command_parses_alone(raw: bytes, expected: ClientEvent) -> None:
    assert parse_chunks([raw]) == [expected]


def test_whole_stream_parses_in_order() -> None:
    assert parse_chunks([STREAM]) == EXPECTED


def test_every_split_point_gives_the_same_events() -> None:
    for cut in range(len(STREAM) + 1):
        assert parse_chunks([STREAM[:cut], STREAM[cut:]]) == EXPECTED, f"split at byte {cut}"


def test_every_message_split_at_every_two_points_parses_the_same() -> None:
    for raw, expected in COMMANDS:
        for first in range(len(raw) + 1):
            for second in range(first, len(raw) + 1):
                chunks = [raw[:first], raw[first:second], raw[second:]]
                assert parse_chunks(chunks) == [expected], (raw, first, second)


def test_byte_by_byte() -> None:
    assert parse_chunks([STREAM[i : i + 1] for i in range(len(STREAM))]) == EXPECTED


def test_incomplete_payload_waits_and_reports_nothing_buffered_lost() -> None:
    parser = ClientCommandParser()
    parser.receive_data(b"PUB foo 10\r\n01234")
    assert parser.next_event() is NEED_DATA
    assert parser.buffered == len(b"PUB foo 10\r\n01234")
    parser.receive_data(b"56789\r\n")
    assert parser.next_event() == Pub("foo", None, b"0123456789")
    assert parser.next_event() is NEED_DATA
    assert parser.buffered == 0


def expect_error(data: bytes, message: str, **limits: int) -> ClientCommandParser:
    parser = ClientCommandParser(**limits)
    parser.receive_data(data)
    with pytest.raises(ProtocolError) as info:
        while parser.next_event() is not NEED_DATA:
            pass
    assert info.value.message == message
    assert info.value.fatal
    return parser


def test_max_payload_is_enforced_from_the_control_line() -> None:
    # Refused before any of the payload arrives, as nats-server does.
    expect_error(b"PUB foo 1025\r\n", ERR_MAX_PAYLOAD, max_payload=1024)
    expect_error(b"HPUB foo 12 1025\r\n", ERR_MAX_PAYLOAD, max_payload=1024)
    assert parse_chunks([encode_pub("foo", b"x" * 1024)], ClientCommandParser(max_payload=1024)) == [
        Pub("foo", None, b"x" * 1024)
    ]


def test_max_control_line_with_and_without_a_line_end() -> None:
    long_sub = b"SUB " + b"a" * 200 + b" 1"
    expect_error(long_sub + b"\r\n", ERR_MAX_CONTROL_LINE, max_control_line=128)
    # Still no newline: refused as soon as the buffered line is too long, not when it ends.
    expect_error(long_sub, ERR_MAX_CONTROL_LINE, max_control_line=128)
    # The limit covers control lines, not payloads.
    big = encode_pub("foo", b"y" * 1000)
    assert parse_chunks([big], ClientCommandParser(max_control_line=128)) == [Pub("foo", None, b"y" * 1000)]


@pytest.mark.parametrize(
    "data",
    [
        b"FOO\r\n",
        b"\r\n",
        b" PING\r\n",
        b"PUB foo\r\n",
        b"PUB foo bar baz qux\r\n",
        b"PUB foo x\r\n",
        b"PUB foo -1\r\n",
        b"PUB foo +1\r\n",
        b"PUB foo 3\r\nabcX\r\n",  # payload longer than announced
        b"HPUB foo 12\r\n",
        b"HPUB foo 5 2\r\nabcde\r\n",  # header size larger than the total
        b"SUB foo\r\n",
        b"SUB a b c d\r\n",
        b"UNSUB\r\n",
        b"UNSUB 1 x\r\n",
        b"CONNECT {not json}\r\n",
        b"CONNECT [1, 2]\r\n",
    ],
)
def test_malformed_input_is_unknown_protocol_operation(data: bytes) -> None:
    parser = expect_error(data, ERR_UNKNOWN_OP)
    # Once broken, the stream stays broken: later good bytes cannot resynchronise it.
    parser.receive_data(b"PING\r\n")
    with pytest.raises(ProtocolError):
        parser.next_event()


def test_error_wording_on_the_wire() -> None:
    assert encode_err(ERR_UNKNOWN_OP) == b"-ERR 'Unknown Protocol Operation'\r\n"
    assert encode_err(ERR_MAX_PAYLOAD) == b"-ERR 'Maximum Payload Violation'\r\n"
    assert encode_err(ERR_MAX_CONTROL_LINE) == b"-ERR 'maximum control line exceeded'\r\n"


def test_server_encoders() -> None:
    assert encode_info({"a": 1}) == b'INFO {"a":1} \r\n'
    assert encode_msg(b"s", b"1", None, b"hi") == b"MSG s 1 2\r\nhi\r\n"
    assert encode_msg(b"s", b"1", b"r", b"") == b"MSG s 1 r 0\r\n\r\n"
    assert (
        encode_hmsg(b"s", b"1", b"r", b"NATS/1.0\r\n\r\n", b"x")
        == b"HMSG s 1 r 12 13\r\nNATS/1.0\r\n\r\nx\r\n"
    )


def test_non_utf8_subject_bytes_survive() -> None:
    [event] = parse_chunks([b"PUB \xff\xfe.x 0\r\n\r\n"])
    assert isinstance(event, Pub)
    assert event.subject.encode("utf-8", "surrogateescape") == b"\xff\xfe.x"


command_strategy = st.sampled_from([raw for raw, _ in COMMANDS])


@settings(max_examples=100, deadline=None)
@given(st.lists(command_strategy, min_size=1, max_size=8), st.data())
def test_random_command_sequences_split_randomly(commands: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(commands)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    assert parse_chunks(chunks) == parse_chunks([stream])


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200))
def test_fuzz_random_bytes_only_ever_raise_protocol_error(data: bytes) -> None:
    # The short CI fuzz run; bench/ documents the long one.
    parser = ClientCommandParser(max_payload=64, max_control_line=64)
    parser.receive_data(data)
    try:
        for _ in range(len(data) + 1):
            if parser.next_event() is NEED_DATA:
                break
        else:
            pytest.fail("parser produced more events than there are bytes")
    except ProtocolError as exc:
        assert exc.message


def test_mutation_fuzzer_short_run() -> None:
    # The same fuzzer as the documented million-input run (tests/gateway/fuzz_parser.py), briefly.
    from tests.gateway.fuzz_parser import run

    stats = run(3000, seed=7)
    assert stats["inputs"] == 3000
    assert 0 < stats["errors"] < 3000
