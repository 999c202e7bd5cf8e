"""A sans-IO parser for nats-server's configuration syntax.

The syntax (nats-server's conf/lex.go): `key = value`, `key: value` or `key value`; maps `{ }` and arrays
`[ ]` whose items end at a comma, a semicolon or a new line; `#` and `//` comments; single-quoted strings
taken as they are, double-quoted and bare strings with the escapes `\\t \\n \\r \\" \\\\ \\xHH`; integers
with size suffixes (`1k` = 1000, `1kb`/`1ki` = 1024, up to `e`/`eb`); floats; booleans (`true yes on`,
`false no off`); Zulu datetimes; blocks `( ... )` closed by a `)` alone on its line; `$NAME` variables
(a key set earlier in this map or an enclosing one, else the environment; `$2a$...` is a bcrypt hash, not a
variable); `include "file"` merges another file's keys into the map it appears in.

Files are read through a function the caller passes, so the parser itself does no I/O. Every key keeps
the place it was set (file and line) so that later checks can name it.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_INCLUDE_DEPTH = 10
_BCRYPT_PREFIX = "2a$"
_BOOLS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}
_SIZE_SUFFIXES = {
    "": 1,
    **{unit: 1000 ** (power + 1) for power, unit in enumerate("kmgtpe")},
    **{unit + tail: 1024 ** (power + 1) for power, unit in enumerate("kmgtpe") for tail in ("b", "i", "ib")},
}
_INTEGER = re.compile(r"(-?\d+)([a-zA-Z]*)")
_FLOAT = re.compile(r"-?\d+\.\d+")
_DATETIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
_INT64 = 2**63
# A bare value ends at these (a space too); a bare key at a space or a key separator.
_VALUE_ENDS = frozenset("\n\r;,]}")
_KEY_ENDS = frozenset("=:{[\n\r")


class ConfSyntaxError(ValueError):
    """A configuration that cannot be read; the message names the file and line."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where


@dataclass(frozen=True, slots=True)
class Place:
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file} line {self.line}"


@dataclass(slots=True)
class ConfMap:
    """One `{ }` block (or a whole file): its values, where each key was set, which keys served as variables."""

    values: dict[str, Any] = field(default_factory=dict)
    places: dict[str, Place] = field(default_factory=dict)
    used_as_variable: set[str] = field(default_factory=set)

    def set(self, key: str, value: Any, place: Place) -> None:
        self.values[key] = value
        self.places[key] = place


FileReader = Callable[[str, str], tuple[str, str]]
"""(name as written, name of the including file) -> (the file's name for messages, its text)."""


def parse(
    text: str,
    *,
    file: str = "<config>",
    read_file: FileReader | None = None,
    environment: Mapping[str, str] | None = None,
) -> ConfMap:
    """Parse one configuration; `read_file` resolves `include`s (none allowed without it)."""
    return _Parser(text, file, read_file, environment or {}, (), 0).parse_top()


class _Parser:
    def __init__(
        self,
        text: str,
        file: str,
        read_file: FileReader | None,
        environment: Mapping[str, str],
        enclosing: tuple[ConfMap, ...],
        depth: int,
        env_lookups: frozenset[str] = frozenset(),
    ) -> None:
        self.text = text
        self.pos = 0
        self.line = 1
        self.file = file
        self.read_file = read_file
        self.environment = environment
        self.enclosing = enclosing  # maps a `$NAME` may refer to, outermost first
        self.depth = depth
        self.env_lookups = env_lookups  # environment variables being expanded, to stop cycles

    # -- characters

    def error(self, message: str, line: int | None = None) -> ConfSyntaxError:
        return ConfSyntaxError(str(Place(self.file, line or self.line)), message)

    def peek(self, ahead: int = 0) -> str:
        index = self.pos + ahead
        return self.text[index] if index < len(self.text) else ""

    def advance(self) -> str:
        ch = self.text[self.pos]
        self.pos += 1
        if ch == "\n":
            self.line += 1
        return ch

    def at_comment(self) -> bool:
        return self.peek() == "#" or (self.peek() == "/" and self.peek(1) == "/")

    def skip_comment(self) -> None:
        while self.peek() not in ("", "\n"):
            self.advance()

    def skip_blanks(self, *, newlines: bool, separators: str = "") -> None:
        """Spaces and comments; new lines and the given separator characters if asked."""
        while True:
            ch = self.peek()
            if ch in (" ", "\t") or (newlines and ch in ("\n", "\r")) or (ch and ch in separators):
                self.advance()
            elif newlines and self.at_comment():
                self.skip_comment()
            else:
                return

    # -- maps (a file is a map whose braces may be left out)

    def parse_top(self) -> ConfMap:
        self.skip_blanks(newlines=True)
        if self.peek() == "{":
            self.advance()
            result = self.parse_map_body(closing="}")
            self.skip_blanks(newlines=True, separators=";,")
            if self.peek():
                raise self.error(f"unexpected {self.peek()!r} after the closing brace")
            return result
        return self.parse_map_body(closing="")

    def parse_map_body(self, closing: str) -> ConfMap:
        result = ConfMap()
        scope = (*self.enclosing, result)
        while True:
            self.skip_blanks(newlines=True, separators=";,")
            ch = self.peek()
            if ch == "":
                if closing:
                    raise self.error(f"missing {closing!r}: the block ends with the file")
                return result
            if ch == closing:
                self.advance()
                return result
            if ch in "}]":
                raise self.error(f"unexpected {ch!r}")
            line = self.line
            key = self.parse_key()
            if key == "include" and self.peek() in (" ", "\t"):
                self.skip_blanks(newlines=False)
                if self.peek() not in ("=", ":"):
                    self.include(result, line)
                    self.end_of_entry()
                    continue
            self.skip_blanks(newlines=True)
            if self.peek() in ("=", ":"):
                self.advance()
            self.skip_blanks(newlines=False)
            value = self.parse_value(scope)
            result.set(key, value, Place(self.file, line))
            self.end_of_entry()

    def end_of_entry(self) -> None:
        self.skip_blanks(newlines=False)
        if self.at_comment():
            self.skip_comment()
        ch = self.peek()
        if ch and ch not in "\n\r;,}":
            raise self.error(f"unexpected {ch!r} after a value: one setting per line, or separate them with ';'")

    def parse_key(self) -> str:
        ch = self.peek()
        if ch in ("'", '"'):
            self.advance()
            start = self.pos
            while self.peek() != ch:
                if self.peek() in ("", "\n"):
                    raise self.error("unterminated quoted key")
                self.advance()
            key = self.text[start : self.pos]
            self.advance()
            return key
        start = self.pos
        while self.peek() and self.peek() not in _KEY_ENDS and self.peek() not in (" ", "\t"):
            self.advance()
        key = self.text[start : self.pos]
        if not key:
            raise self.error(f"expected a key, found {self.peek()!r}")
        return key

    def include(self, into: ConfMap, line: int) -> None:
        ch = self.peek()
        if ch in ("'", '"'):
            self.advance()
            start = self.pos
            while self.peek() != ch:
                if self.peek() in ("", "\n"):
                    raise self.error("unterminated include file name")
                self.advance()
            name = self.text[start : self.pos]
            self.advance()
        else:
            start = self.pos
            while self.peek() and self.peek() not in _VALUE_ENDS and self.peek() not in (" ", "\t"):
                self.advance()
            name = self.text[start : self.pos]
        if not name:
            raise self.error("include needs a file name", line)
        if self.read_file is None:
            raise self.error(f"include {name!r}: this configuration cannot include files", line)
        if self.depth >= MAX_INCLUDE_DEPTH:
            raise self.error(f"include {name!r}: includes nest deeper than {MAX_INCLUDE_DEPTH}", line)
        try:
            included_name, text = self.read_file(name, self.file)
        except OSError as exc:
            raise self.error(f"include {name!r}: {exc.strerror or exc}", line) from exc
        child = _Parser(
            text, included_name, self.read_file, self.environment, (*self.enclosing, into), self.depth + 1
        )
        included = child.parse_top()
        for key, value in included.values.items():
            into.set(key, value, included.places[key])
        into.used_as_variable |= included.used_as_variable

    # -- values

    def parse_value(self, scope: tuple[ConfMap, ...]) -> Any:
        ch = self.peek()
        if ch in ("", "\n", "\r"):
            raise self.error("expected a value, found the end of the line")
        if ch == "{":
            self.advance()
            saved, self.enclosing = self.enclosing, scope
            try:
                return self.parse_map_body(closing="}")
            finally:
                self.enclosing = saved
        if ch == "[":
            self.advance()
            return self.parse_array(scope)
        if ch == "'":
            self.advance()
            start = self.pos
            while self.peek() != "'":
                if self.peek() == "":
                    raise self.error("unterminated string")
                self.advance()
            value = self.text[start : self.pos]
            self.advance()
            return value
        if ch == '"':
            self.advance()
            return self.read_escaped(until='"')
        if ch == "(":
            self.advance()
            return self.read_block()
        return self.parse_bare(scope)

    def parse_array(self, scope: tuple[ConfMap, ...]) -> list[Any]:
        items: list[Any] = []
        while True:
            self.skip_blanks(newlines=True)
            ch = self.peek()
            if ch == "]":
                self.advance()
                return items
            if ch == "":
                raise self.error("missing ']': the array ends with the file")
            if ch in ",;":
                raise self.error(f"unexpected {ch!r} in an array")
            items.append(self.parse_value(scope))
            self.skip_blanks(newlines=False)
            if self.peek() in (",", ";"):
                self.advance()
            elif self.at_comment():
                self.skip_comment()
            elif self.peek() not in ("]", "\n", "\r", ""):
                raise self.error(f"unexpected {self.peek()!r} after an array item")

    def read_escaped(self, until: str) -> str:
        parts: list[str] = []
        while True:
            ch = self.peek()
            if ch == "":
                raise self.error("unterminated string")
            if ch == until:
                self.advance()
                return "".join(parts)
            self.advance()
            if ch == "\\":
                parts.append(self.read_escape())
            else:
                parts.append(ch)

    def read_escape(self) -> str:
        ch = self.advance() if self.peek() else ""
        simple = {"t": "\t", "n": "\n", "r": "\r", '"': '"', "\\": "\\"}
        if ch in simple and ch:
            return simple[ch]
        if ch == "x":
            digits = self.text[self.pos : self.pos + 2]
            if len(digits) != 2 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise self.error(f"expected two hexadecimal digits after '\\x', got {digits!r}")
            self.pos += 2
            return chr(int(digits, 16))
        raise self.error(f"invalid escape '\\{ch}': only \\xHH, \\t, \\n, \\r, \\\", \\\\ are allowed")

    def read_block(self) -> str:
        # Ends at a ')' alone on its line, as nats-server's lexer reads it.
        start = self.pos
        while True:
            end = self.text.find("\n)", self.pos - 1 if self.pos > start else self.pos)
            if end < 0:
                raise self.error("a block '(' needs a ')' alone on a line to close it")
            after = end + 2
            if after >= len(self.text) or self.text[after] in "\r\n":
                value = self.text[start : end + 1]
                while self.pos < after:
                    self.advance()
                return value
            while self.pos < after:
                self.advance()

    def parse_bare(self, scope: tuple[ConfMap, ...]) -> Any:
        line = self.line
        parts: list[str] = []
        escaped = False
        while True:
            ch = self.peek()
            if ch == "" or ch in _VALUE_ENDS or ch in (" ", "\t"):
                break
            self.advance()
            if ch == "\\":
                parts.append(self.read_escape())
                escaped = True
            else:
                parts.append(ch)
        token = "".join(parts)
        if escaped:
            return token
        if token.lower() in _BOOLS:
            return _BOOLS[token.lower()]
        if token.startswith("$"):
            return self.variable(token[1:], scope, line)
        return self.number_or_string(token, line)

    def number_or_string(self, token: str, line: int) -> Any:
        match = _INTEGER.fullmatch(token)
        if match and match.group(2).lower() in _SIZE_SUFFIXES:
            value = int(match.group(1)) * _SIZE_SUFFIXES[match.group(2).lower()]
            if not -_INT64 <= int(match.group(1)) < _INT64 or not -_INT64 <= value < _INT64:
                raise self.error(f"integer {token!r} is out of range", line)
            return value
        if _FLOAT.fullmatch(token):
            return float(token)
        if _DATETIME.fullmatch(token):
            try:
                return dt.datetime.strptime(token, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
            except ValueError as exc:
                raise self.error(f"{token!r} is not a valid datetime", line) from exc
        if token.startswith("-") and token[1:2].isdigit():
            raise self.error(f"expected a number, got {token!r}", line)
        return token

    def variable(self, name: str, scope: tuple[ConfMap, ...], line: int) -> Any:
        if name.startswith(_BCRYPT_PREFIX):
            return "$" + name
        for conf_map in reversed(scope):
            if name in conf_map.values:
                conf_map.used_as_variable.add(name)
                return conf_map.values[name]
        if name in self.environment and name not in self.env_lookups:
            # An environment variable's text is read as a value would be, so numbers stay numbers.
            child = _Parser(
                self.environment[name], f"${name}", None, self.environment, scope, self.depth,
                self.env_lookups | {name},
            )  # fmt: skip
            try:
                return child.parse_value(scope)
            except ConfSyntaxError as exc:
                raise self.error(f"variable ${name} from the environment: {exc}", line) from exc
        if name in self.env_lookups:
            raise self.error(f"variable ${name} refers to itself", line)
        raise self.error(f"variable ${name} is not set (neither a key above nor an environment variable)", line)
