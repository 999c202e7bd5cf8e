"""nats-server's configuration syntax, read the way nats-server's conf package reads it."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.node.natsconf.parser import ConfMap, ConfSyntaxError, parse


def plain(value: object) -> object:
    """A parsed value with maps turned into dicts, to compare against literals."""
    if isinstance(value, ConfMap):
        return {k: plain(v) for k, v in value.values.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def test_the_three_separators_and_comments() -> None:
    conf = parse("a = 1\nb: 2\nc 3 # three\n// a comment\nd: x; e: y\n")
    assert plain(conf) == {"a": 1, "b": 2, "c": 3, "d": "x", "e": "y"}
    assert (conf.places["a"].line, conf.places["e"].line) == (1, 5)


def test_values_of_every_kind() -> None:
    conf = parse(
        "listen: 127.0.0.1:4222\n"
        "f: 0.5\n"
        "big: 1GB\nsmall: 2k\nki: 3Ki\n"
        "yes_: yes\noff_: off\nt: TRUE\n"
        "when: 2024-01-02T03:04:05Z\n"
        "sq: 'no \\escapes'\n"
        'dq: "tab\\there \\x41"\n'
        "neg: -5\n"
        "url: nats-route://u:p@127.0.0.1:6222\n"
    )
    assert plain(conf) == {
        "listen": "127.0.0.1:4222",
        "f": 0.5,
        "big": 1024**3,
        "small": 2000,
        "ki": 3 * 1024,
        "yes_": True,
        "off_": False,
        "t": True,
        "when": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
        "sq": "no \\escapes",
        "dq": "tab\there A",
        "neg": -5,
        "url": "nats-route://u:p@127.0.0.1:6222",
    }


def test_maps_arrays_and_top_level_braces() -> None:
    text = """{
      cluster {
        routes = [
          a, b
          'c'  # comment
        ]
        authorization { user: ruser, password: "x y" }
      }
    }"""
    assert plain(parse(text)) == {
        "cluster": {"routes": ["a", "b", "c"], "authorization": {"user": "ruser", "password": "x y"}}
    }


def test_variables_come_from_enclosing_blocks_then_the_environment() -> None:
    text = "PASS: secret\nauthorization {\n  LOCAL: 5\n  users = [ {user: a, password: $PASS, n: $LOCAL, e: $FROM_ENV} ]\n}\n"
    conf = parse(text, environment={"FROM_ENV": "42"})
    user = conf.values["authorization"].values["users"][0]
    assert plain(user) == {"user": "a", "password": "secret", "n": 5, "e": 42}
    assert conf.used_as_variable == {"PASS"}
    assert conf.values["authorization"].used_as_variable == {"LOCAL"}


def test_a_bcrypt_hash_is_not_a_variable() -> None:
    hashed = "$2a$11$dZM98SpGeI7dCFFGSpt.JObQcix8YHml4TBUZoge9R1uxnMIln5ly"
    assert parse(f"password: {hashed}\n").values["password"] == hashed


def test_an_unset_variable_names_itself_and_its_line() -> None:
    with pytest.raises(ConfSyntaxError, match=r"<config> line 2: variable \$NOPE is not set"):
        parse("a: 1\nb: $NOPE\n", environment={})


def test_an_environment_variable_cannot_refer_to_itself() -> None:
    with pytest.raises(ConfSyntaxError, match="refers to itself"):
        parse("a: $LOOP\n", environment={"LOOP": "$LOOP"})


def test_include_merges_the_file_into_the_block_it_is_in() -> None:
    files = {
        "users.conf": "include 'passwords.conf'\nusers = [ {user: alice, password: $ALICE} ]\n",
        "passwords.conf": "ALICE: wonderland\n",
    }

    def read_file(name: str, including: str) -> tuple[str, str]:
        if name not in files:
            raise FileNotFoundError(2, "No such file or directory")
        return name, files[name]

    conf = parse("authorization {\n  include \"users.conf\"\n  timeout: 1\n}\n", read_file=read_file)
    auth = conf.values["authorization"]
    assert plain(auth.values["users"]) == [{"user": "alice", "password": "wonderland"}]
    assert str(auth.places["users"]) == "users.conf line 2"
    assert str(auth.places["ALICE"]) == "passwords.conf line 1"
    assert "ALICE" in auth.used_as_variable
    with pytest.raises(ConfSyntaxError, match=r"<config> line 1: include 'missing.conf': No such file"):
        parse("include missing.conf\n", read_file=read_file)


def test_an_include_that_includes_itself_stops() -> None:
    with pytest.raises(ConfSyntaxError, match="nest deeper"):
        parse("include self.conf\n", read_file=lambda name, _: (name, "include self.conf\n"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a {\n b: 1\n", "line 3: missing '}'"),
        ("a: [1, 2\n", "missing ']'"),
        ("a: \"open\n", "unterminated string"),
        ("a:\nb: 1\n", "line 1: expected a value"),
        ('a: "\\q"\n', "invalid escape"),
        ("a: 1 2\n", "line 1: unexpected '2'"),
        ("}\n", "line 1: unexpected '}'"),
        ("a: 99999999999999999999\n", "out of range"),
        ("a: [1,,2]\n", "unexpected ','"),
    ],
)
def test_syntax_errors_name_the_line(text: str, message: str) -> None:
    with pytest.raises(ConfSyntaxError, match=message):
        parse(text)


# Text made of the syntax's own characters, so that the fuzzer reaches its corners quickly.
_conf_text = st.text(alphabet=st.sampled_from(list("ab1 .:=$-{}[]()'\"#/\\\n\t,;xk2")), max_size=80)


@settings(max_examples=400, deadline=None)
@given(_conf_text)
def test_any_text_parses_or_fails_with_a_syntax_error(text: str) -> None:
    try:
        parse(text, environment={"a": "$a", "b": "1"})
    except ConfSyntaxError as exc:
        assert "line" in str(exc)
