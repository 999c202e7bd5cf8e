"""Where and why Go's encoding/json refuses a request body, in the words nats-server 2.15.1 answers with.

nats-server reads a JetStream API request with a `json.Decoder` (one value after another until the
end of the body) and answers a syntax error with the decoder's message plus ` at offset N`; a body
that stops inside a value is `unexpected EOF`, with no offset. nats-server 2.15.1 is built with
Go 1.27, whose encoding/json is the v1 API over the v2 reader (encoding/json/jsontext): its messages
are jsontext's, reworded to v1's terms (`in numeric literal`, `after object key:value pair`, ...),
and N counts the bytes up to the end of the offending text. A client reads these words in the
error's description, so jetraft checks a body the way that reader does before decoding it.

Pure and sans-IO: `scan_values` takes bytes and gives the spans of the values or raises.
"""

from __future__ import annotations

import unicodedata

_SPACE = b" \t\r\n"
_DIGITS = b"0123456789"
_HEX = b"0123456789abcdefABCDEF"
_ESCAPES = b'"\\/bfnrt'
# strconv's short escapes for control characters and the backslash
_SHORT_ESCAPES = {7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r", 92: "\\\\"}
_MAX_DEPTH = 10000  # jsontext refuses deeper nesting


class GoSyntaxError(ValueError):
    """A body Go's decoder refuses; str() is the description nats-server puts after `invalid JSON: `
    when it read the body with a Decoder: Go's `words`, then the offset (none for a body cut short).
    Where nats-server reads with json.Unmarshal, it shows the words alone."""

    def __init__(self, words: str, offset: int | None = None) -> None:
        super().__init__(words if offset is None else f"{words} at offset {offset}")
        self.words = words


class _UnexpectedEOF(Exception):
    pass


def _first_rune(data: bytes) -> tuple[str | None, bytes]:
    """The UTF-8 character `data` starts with (None: no valid one) and its bytes, as utf8.DecodeRune."""
    for size in (1, 2, 3, 4):
        try:
            return data[:size].decode("utf-8"), data[:size]
        except UnicodeDecodeError:
            continue
    return None, data[:1]


def _is_print(char: str) -> bool:
    """Go's unicode.IsPrint: letters, marks, numbers, punctuation, symbols and the ASCII space."""
    return char == " " or unicodedata.category(char)[0] in "LMNPS"


def quote_rune(data: bytes) -> str:
    """Go's jsonwire.QuoteRune: the first character of `data` in single quotes, escaped as Go escapes."""
    char, raw = _first_rune(data)
    if char is None:
        return f"'\\x{raw[0]:x}'"
    return f"'{_escape_char(char, quote=chr(0x27))}'"


def _escape_char(char: str, quote: str) -> str:
    code = ord(char)
    if char == quote:
        return "\\" + char
    if code in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[code]
    if _is_print(char):
        return char
    if code < 0x80:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _quote_text(text: bytes) -> str:
    """How jsontext shows the offending text of more than one character (an escape sequence): in
    backquotes, or as strconv.Quote writes it when it holds a backquote, a space, a character that
    does not print or a byte that is no UTF-8 (written as \\xNN)."""
    chars: list[str | int] = []
    rest = text
    while rest:
        char, raw = _first_rune(rest)
        chars.append(raw[0] if char is None else char)
        rest = rest[len(raw) :]
    if all(isinstance(c, str) and c != "`" and not c.isspace() and _is_print(c) for c in chars):
        return "`" + text.decode() + "`"
    return (
        '"'
        + "".join(f"\\x{c:02x}" if isinstance(c, int) else _escape_char(c, quote='"') for c in chars)
        + '"'
    )


def _invalid(raw: bytes, pos: int, where: str, *, escape: int = 0) -> GoSyntaxError:
    """jsontext's InvalidTextError at `pos`, reworded as Go's v1 API words it, with its offset: the
    character at `pos` (or the escape sequence of `escape` bytes) and everything before it."""
    if escape:
        text = raw[pos : pos + escape]
        label = "escape sequence"
        shown = _quote_text(text)
    else:
        _, text = _first_rune(raw[pos:])
        label = "character"
        shown = quote_rune(text)
    return GoSyntaxError(f"invalid {label} {shown} {where}", pos + len(text))


class _Reader:
    def __init__(self, raw: bytes) -> None:
        self.raw = raw

    def space(self, i: int) -> int:
        raw = self.raw
        while i < len(raw) and raw[i] in _SPACE:
            i += 1
        if i == len(raw):
            raise _UnexpectedEOF
        return i

    def value(self, i: int, depth: int) -> int:
        c = self.raw[i]
        if c == 0x7B:  # {
            return self.object(i + 1, depth + 1)
        if c == 0x5B:  # [
            return self.array(i + 1, depth + 1)
        if c == 0x22:
            return self.string(i)
        if c == 0x2D or c in _DIGITS:
            return self.number(i)
        for word in ("null", "true", "false"):
            if c == ord(word[0]):
                return self.literal(i, word)
        raise _invalid(self.raw, i, "looking for beginning of value")

    def _too_deep(self, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise GoSyntaxError("exceeded max depth")

    def object(self, i: int, depth: int) -> int:
        self._too_deep(depth)
        i = self.space(i)
        if self.raw[i] == 0x7D:
            return i + 1
        while True:
            i = self.space(i)
            if self.raw[i] != 0x22:
                raise _invalid(self.raw, i, "looking for beginning of object key string")
            i = self.space(self.string(i))
            if self.raw[i] != 0x3A:  # :
                raise _invalid(self.raw, i, "after object key")
            i = self.space(i + 1)
            i = self.space(self.value(i, depth))
            if self.raw[i] == 0x2C:
                i += 1
                continue
            if self.raw[i] == 0x7D:
                return i + 1
            raise _invalid(self.raw, i, "after object key:value pair")

    def array(self, i: int, depth: int) -> int:
        self._too_deep(depth)
        i = self.space(i)
        if self.raw[i] == 0x5D:
            return i + 1
        while True:
            i = self.space(i)
            i = self.space(self.value(i, depth))
            if self.raw[i] == 0x2C:
                i += 1
                continue
            if self.raw[i] == 0x5D:
                return i + 1
            raise _invalid(self.raw, i, "after array element")

    def string(self, i: int) -> int:
        raw = self.raw
        i += 1  # the opening quote
        while i < len(raw):
            c = raw[i]
            if c == 0x22:
                return i + 1
            if c == 0x5C:
                i = self.escape(i)
            elif c < 0x20:
                raise _invalid(raw, i, "in string")
            else:
                i += 1  # bytes that are no UTF-8 are let through: Go's v1 API reads them as U+FFFD
        raise _UnexpectedEOF

    def escape(self, i: int) -> int:
        raw = self.raw
        if i + 2 > len(raw):
            raise _UnexpectedEOF
        kind = raw[i + 1]
        if kind in _ESCAPES:
            return i + 2
        if kind != 0x75:  # u
            raise _invalid(raw, i, "in string", escape=2)
        digits = raw[i + 2 : i + 6]
        if len(digits) < 4 and all(d in _HEX for d in digits):
            raise _UnexpectedEOF
        if len(digits) < 4 or any(d not in _HEX for d in digits):
            raise _invalid(raw, i, "in string", escape=6)
        return i + 6

    def number(self, i: int) -> int:
        raw = self.raw
        if raw[i] == 0x2D:
            i += 1
        i = self.digits(i, leading=True)
        if i < len(raw) and raw[i] == 0x2E:  # .
            i = self.digits(i + 1)
        if i < len(raw) and raw[i] in b"eE":
            i += 1
            if i < len(raw) and raw[i] in b"+-":
                i += 1
            i = self.digits(i)
        return i

    def digits(self, i: int, leading: bool = False) -> int:
        raw = self.raw
        if i == len(raw):
            raise _UnexpectedEOF
        if raw[i] not in _DIGITS:
            raise _invalid(raw, i, "in numeric literal")
        if leading and raw[i] == 0x30:
            return i + 1
        while i < len(raw) and raw[i] in _DIGITS:
            i += 1
        return i

    def literal(self, i: int, word: str) -> int:
        raw = self.raw
        for k, expected in enumerate(word.encode()):
            if i + k == len(raw):
                raise _UnexpectedEOF
            if raw[i + k] != expected:
                expecting = quote_rune(bytes([expected]))
                raise _invalid(raw, i + k, f"in literal {word} (expecting {expecting})")
        return i + len(word)


def scan_values(raw: bytes) -> list[tuple[int, int]]:
    """The spans of the JSON values in `raw`, one after another as Go's Decoder reads them (blank
    between them); raises GoSyntaxError with nats-server's words for the first text that does not fit."""
    reader = _Reader(raw)
    spans = []
    i = 0
    while True:
        try:
            i = reader.space(i)
        except _UnexpectedEOF:
            return spans  # only blank left: the end
        try:
            end = reader.value(i, 0)
        except _UnexpectedEOF:
            raise GoSyntaxError("unexpected EOF") from None
        spans.append((i, end))
        i = end


def scan_unmarshal(raw: bytes) -> tuple[int, int]:
    """The span of the one JSON value json.Unmarshal reads from `raw`; raises GoSyntaxError with its
    words (`unexpected end of JSON input` for nothing or a value cut short; any text after the value
    is `invalid character ... after top-level value`)."""
    reader = _Reader(raw)
    try:
        start = reader.space(0)
        end = reader.value(start, 0)
    except _UnexpectedEOF:
        raise GoSyntaxError("unexpected end of JSON input") from None
    try:
        after = reader.space(end)
    except _UnexpectedEOF:
        return start, end
    raise _invalid(raw, after, "after top-level value")
