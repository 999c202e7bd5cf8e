import pytest

from cluster import jsjson
from cluster.timestamps import GO_ZERO_TIME, TimestampError, format_ns, parse_rfc3339_ns


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-22T14:19:00.220065209Z",
        "2026-11-22T14:18:48.12291233Z",  # Go trims trailing zeros
        "2026-11-22T14:18:48Z",
        "2026-11-22T14:18:48.1Z",
    ],
)
def test_rfc3339_round_trip(text: str) -> None:
    assert format_ns(parse_rfc3339_ns(text)) == text


def test_rfc3339_offsets_and_zero() -> None:
    assert parse_rfc3339_ns("2026-11-22T15:19:00.5+01:00") == parse_rfc3339_ns("2026-11-22T14:19:00.5Z")
    assert parse_rfc3339_ns("2026-11-22T14:19:00.420995000Z") == parse_rfc3339_ns(
        "2026-11-22T14:19:00.420995Z"
    )
    assert format_ns(0) == GO_ZERO_TIME
    assert format_ns(1_000_000_000) == "1970-01-01T00:00:01Z"


@pytest.mark.parametrize(
    "bad", ["", "yesterday", "2026-13-01T00:00:00Z", "2026-11-22 14:19:00Z", "2026-11-22T14:19:00"]
)
def test_rfc3339_rejects(bad: str) -> None:
    with pytest.raises(TimestampError):
        parse_rfc3339_ns(bad)


def test_go_escapes() -> None:
    assert jsjson.dumps({"subjects": ["orders.>"], "d": "a<b&c"}) == (
        b'{"subjects":["orders.\\u003e"],"d":"a\\u003cb\\u0026c"}'
    )
    assert jsjson.dumps("\u2028") == b'"\\u2028"'


def test_loads_object() -> None:
    assert jsjson.loads_object(b"") == {}
    assert jsjson.loads_object(b"  ") == {}
    assert jsjson.loads_object(b"null") == {}
    assert jsjson.loads_object(b'{"seq": 1}') == {"seq": 1}
    for bad in (b"{not json", b"[1]", b"3"):
        with pytest.raises(jsjson.RequestJSONError):
            jsjson.loads_object(bad)


def test_typed_getters() -> None:
    obj = {
        "seq": 3,
        "neg": -1,
        "flag": True,
        "s": "x",
        "f": 1.5,
        "l": ["a"],
        "bad_l": ["a", 1],
        "m": {"k": "v"},
    }
    assert jsjson.get_int(obj, "seq", unsigned=True) == 3
    assert jsjson.get_int(obj, "missing", 7) == 7
    assert jsjson.get_bool(obj, "flag") is True
    assert jsjson.get_str(obj, "s") == "x"
    assert jsjson.get_str_list(obj, "l") == ["a"]
    assert jsjson.get_str_map(obj, "m") == {"k": "v"}
    for call in (
        lambda: jsjson.get_int(obj, "neg", unsigned=True),
        lambda: jsjson.get_int(obj, "f"),
        lambda: jsjson.get_int(obj, "flag"),
        lambda: jsjson.get_bool(obj, "seq"),
        lambda: jsjson.get_str(obj, "seq"),
        lambda: jsjson.get_str_list(obj, "bad_l"),
        lambda: jsjson.get_object(obj, "s"),
    ):
        with pytest.raises(jsjson.RequestJSONError):
            call()
