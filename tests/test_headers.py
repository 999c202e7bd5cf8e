import pytest

from gateway.headers import HeaderError, Headers, decode_headers, encode_headers


def test_round_trip_fields_keep_order_and_case() -> None:
    block = encode_headers([("X-Trace-Id", "abc123"), ("X-Tenant", "acme")])
    # the trace's exact bytes for nc.publish(..., headers={...}): 48 bytes
    assert block == b"NATS/1.0\r\nX-Trace-Id: abc123\r\nX-Tenant: acme\r\n\r\n"
    assert len(block) == 48
    decoded = decode_headers(block)
    assert decoded.status is None
    assert decoded.fields == [("X-Trace-Id", "abc123"), ("X-Tenant", "acme")]


def test_status_lines() -> None:
    assert encode_headers(status=503) == b"NATS/1.0 503\r\n\r\n"
    assert encode_headers([("Nats-Num-Pending", "0")], 204, "EOB") == (
        b"NATS/1.0 204 EOB\r\nNats-Num-Pending: 0\r\n\r\n"
    )
    decoded = decode_headers(b"NATS/1.0 404 Message Not Found\r\n\r\n")
    assert decoded.status == 404
    assert decoded.description == "Message Not Found"


def test_multi_valued_headers() -> None:
    h = decode_headers(b"NATS/1.0\r\nA: 1\r\nA: 2\r\nB: x\r\n\r\n")
    assert h.get_all("A") == ["1", "2"]
    assert h.get("A") == "1"
    assert h.get("missing") is None
    h.add("C", "3")
    assert decode_headers(h.encode()).fields == [("A", "1"), ("A", "2"), ("B", "x"), ("C", "3")]


def test_value_may_contain_colon() -> None:
    h = decode_headers(b"NATS/1.0\r\nNats-Time-Stamp: 2026-11-22T14:19:00.22Z\r\n\r\n")
    assert h.get("Nats-Time-Stamp") == "2026-11-22T14:19:00.22Z"


@pytest.mark.parametrize(
    "bad", [b"HTTP/1.1 200\r\n\r\n", b"NATS/1.0 abc\r\n\r\n", b"NATS/1.0\r\nnocolon\r\n\r\n"]
)
def test_malformed_blocks_raise(bad: bytes) -> None:
    with pytest.raises(HeaderError):
        decode_headers(bad)


def test_headers_dataclass_encode_status() -> None:
    assert Headers(status=408, description="Empty Request").encode() == b"NATS/1.0 408 Empty Request\r\n\r\n"
