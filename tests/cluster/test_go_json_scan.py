"""Request bodies nats-server 2.15.1 refuses as invalid JSON, and the description it answers with
(each expected text is what a nats-server 2.15.1 answered to the same body, sent to STREAM.MSG.GET)."""

from __future__ import annotations

import pytest

from cluster.api import jsjson
from cluster.api.go_json_scan import GoSyntaxError, quote_rune, scan_values

SEEN_ON_NATS_SERVER = [
    (b"{", "unexpected EOF"),
    (b"nul", "unexpected EOF"),
    (b'{"a":1,}', "invalid character '}' looking for beginning of object key string at offset 8"),
    (b'{"x"}', "invalid character '}' after object key at offset 5"),
    (b"\xff", "invalid character '\\xff' looking for beginning of value at offset 1"),
    (b'{"seq":1} x', "invalid character 'x' looking for beginning of value at offset 11"),
    (b'{"seq":"a\x01"}', "invalid character '\\x01' in string at offset 10"),
    (b'{"seq":"\\q"}', "invalid escape sequence `\\q` in string at offset 10"),
    (b'{"seq":"\\u12g4"}', "invalid escape sequence `\\u12g4` in string at offset 14"),
    (b'{"seq":-x}', "invalid character 'x' in numeric literal at offset 9"),
    (b'{"seq":1.}', "invalid character '}' in numeric literal at offset 10"),
    (b'{"seq":1e+}', "invalid character '}' in numeric literal at offset 11"),
    (b'{"seq":tru}', "invalid character '}' in literal true (expecting 'e') at offset 11"),
    (b'{"seq":fals3}', "invalid character '3' in literal false (expecting 'e') at offset 12"),
    (b'{"seq":nulx}', "invalid character 'x' in literal null (expecting 'l') at offset 11"),
    (b"[1 2]", "invalid character '2' after array element at offset 4"),
    (b'{"seq":1 "b":2}', "invalid character '\"' after object key:value pair at offset 10"),
    (b"{'a':1}", "invalid character '\\'' looking for beginning of object key string at offset 2"),
    (b'{"a":\x7f}', "invalid character '\\x7f' looking for beginning of value at offset 6"),
    (b'{"a":"\\ "}', 'invalid escape sequence "\\\\ " in string at offset 8'),
    (b'{"a":"\\\xff"}', 'invalid escape sequence "\\\\\\xff" in string at offset 8'),
    (b'{"a":\\}', "invalid character '\\\\' looking for beginning of value at offset 6"),
]


@pytest.mark.parametrize(("body", "description"), SEEN_ON_NATS_SERVER)
def test_syntax_errors_in_nats_servers_words(body: bytes, description: str) -> None:
    with pytest.raises(jsjson.RequestJSONError) as refused:
        jsjson.loads_request(body, "JSApiMsgGetRequest")
    assert str(refused.value) == description


@pytest.mark.parametrize(
    ("body", "values"),
    [
        (b"", []),
        (b" \n\t", []),
        (b'{"seq":1}\n\t ', [(0, 9)]),
        (b'{"seq":1}{"seq":"x"}', [(0, 9), (9, 20)]),
        (b' [1, -2.5e+3, "\\u00e9\\n", true, false, null] ', [(1, 44)]),
        (b'"bytes \xff that are no UTF-8"', [(0, 27)]),
    ],
)
def test_what_go_reads_as_values(body: bytes, values: list[tuple[int, int]]) -> None:
    assert scan_values(body) == values


def test_several_objects_are_read_into_one_request_the_later_field_winning() -> None:
    # seen on nats-server: `{"seq":2}{"seq":1}` asks for sequence 1
    assert jsjson.loads_request(b'{"seq":2}{"seq":1}', "JSApiMsgGetRequest") == {"seq": 1}


def test_bytes_that_are_no_utf8_read_as_the_replacement_character() -> None:
    assert jsjson.loads_request(b'{"subject":"a\xffb"}', "X") == {"subject": "a\ufffdb"}


def test_a_multibyte_character_counts_all_its_bytes() -> None:
    with pytest.raises(GoSyntaxError) as refused:
        scan_values('{"a":é}'.encode())
    assert str(refused.value) == "invalid character 'é' looking for beginning of value at offset 7"


@pytest.mark.parametrize(
    ("raw", "quoted"),
    [
        (b"a", "'a'"),
        (b"'", "'\\''"),
        (b'"', "'\"'"),
        (b"\n", "'\\n'"),
        (b"\x00", "'\\x00'"),
        (b"\xc2\xa0", "'\\u00a0'"),
    ],
)
def test_quote_rune_as_go(raw: bytes, quoted: str) -> None:
    assert quote_rune(raw) == quoted


def test_objects_only_requests_read_no_other_body() -> None:
    # nats-server reads a STREAM.INFO, NAMES, LIST or PURGE body only when it starts with { or [
    for body in (b"nul", b'"x"', b"\xff", b"  5"):
        assert jsjson.loads_request(body, "JSApiStreamInfoRequest", objects_only=True) == {}
    with pytest.raises(jsjson.RequestJSONError, match="unexpected EOF"):
        jsjson.loads_request(b" {", "JSApiStreamInfoRequest", objects_only=True)


def test_a_lone_surrogate_escape_reads_as_the_replacement_character() -> None:
    # Go's v1 decoder reads `\ud800` that pairs with nothing as U+FFFD; a pair stays one character
    body = b'{"subject":"\\ud800x\\ud83d\\ude00"}'
    assert jsjson.loads_request(body, "X") == {"subject": "\ufffdx\U0001f600"}


def test_unpin_style_reads_refuse_what_follows_the_value() -> None:
    with pytest.raises(jsjson.RequestJSONError) as refused:
        jsjson.unmarshal_request(b'{"group":"g"} {', "JSApiConsumerUnpinRequest")
    assert str(refused.value) == "invalid character '{' after top-level value"
    assert jsjson.unmarshal_request(b' {"group":"g"}\n', "JSApiConsumerUnpinRequest") == {"group": "g"}
