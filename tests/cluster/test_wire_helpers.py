import pytest

from cluster.api import jsjson


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
