"""NATS message header blocks: `NATS/1.0[ code[ description]]\\r\\n` then
`Key: Value\\r\\n` lines and an empty line.

Pure functions shared by the gateway (no-responders, status replies) and the
JetStream layer (Direct Get replies, expected-header checks). Header names
keep the case they were sent with; lookups by `get` are case-sensitive, as
nats-server's are for the `Nats-*` headers it reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

STATUS_LINE = b"NATS/1.0"
_STATUS_TEXT = STATUS_LINE.decode()
_CRLF = b"\r\n"
# what bytes.strip() removes: only ASCII whitespace, whatever the decoded text holds
_ASCII_SPACE = " \t\n\r\x0b\x0c"


class HeaderError(ValueError):
    """A header block that does not follow the NATS/1.0 format."""


@dataclass(slots=True)
class Headers:
    """A decoded header block: optional status and ordered, multi-valued fields."""

    status: int | None = None
    description: str = ""
    fields: list[tuple[str, str]] = field(default_factory=list)

    def get(self, name: str, default: str | None = None) -> str | None:
        """The first value of `name`, or `default`."""
        for key, value in self.fields:
            if key == name:
                return value
        return default

    def get_all(self, name: str) -> list[str]:
        return [value for key, value in self.fields if key == name]

    def add(self, name: str, value: str) -> None:
        self.fields.append((name, value))

    def encode(self) -> bytes:
        return encode_headers(self.fields, status=self.status, description=self.description)


def encode_headers(
    fields: Iterable[tuple[str, str]] = (),
    status: int | None = None,
    description: str = "",
) -> bytes:
    """Encode a header block, ending with the empty line."""
    line = STATUS_LINE
    if status is not None:
        line += b" %d" % status
        if description:
            line += b" " + description.encode()
    parts = [line]
    parts.extend(f"{key}: {value}".encode() for key, value in fields)
    return _CRLF.join(parts) + _CRLF + _CRLF


def extend_header_block(block: bytes | None, lines: bytes) -> bytes:
    """A stored header block (ending with its blank line; None or empty for none) with `lines` added, each
    ending in CRLF: what JetStream does to a message's own headers when it sends or copies it."""
    head = block[:-2] if block else STATUS_LINE + _CRLF
    return head + lines + _CRLF


def set_header(block: bytes | None, name: str, value: bytes) -> bytes:
    """A header block (ending with its blank line; None or empty for none) whose only `name` field, matched
    without regard to case, is `value`: how a server overwrites what a client may have forged."""
    line = name.encode() + b": " + value + _CRLF
    if not block:
        return STATUS_LINE + _CRLF + line + _CRLF
    start = name.lower().encode() + b":"
    if start in block.lower():
        kept = [part for part in block[:-4].split(_CRLF) if not part.lower().startswith(start)]
        block = _CRLF.join(kept) + _CRLF + _CRLF
    return extend_header_block(block, line)


def decode_headers(block: bytes | bytearray | memoryview) -> Headers:
    """Decode a header block (as carried by HPUB/HMSG, including the final empty line)."""
    # One decode of the whole block rather than one per name and value: this runs for every published
    # message with headers and every Direct Get reply a bulk reader takes in. (CR, LF and ':' are ASCII,
    # so no UTF-8 sequence, valid or not, spans the places the block is cut.)
    lines = bytes(block).decode(errors="replace").split("\r\n")
    first = lines[0]
    if not first.startswith(_STATUS_TEXT):
        raise HeaderError("header block must start with NATS/1.0")
    headers = Headers()
    rest = first[len(_STATUS_TEXT) :].strip(_ASCII_SPACE)
    if rest:
        code, _, desc = rest.partition(" ")
        if not (code.isascii() and code.isdigit()):
            raise HeaderError(f"bad status code {code!r}")
        headers.status = int(code)
        headers.description = desc.strip()
    fields = headers.fields
    for raw in lines[1:]:
        if not raw:
            continue
        key, sep, value = raw.partition(":")
        key = key.strip(_ASCII_SPACE)
        if not sep or not key:
            raise HeaderError(f"bad header line {raw!r}")
        fields.append((key, value.strip(_ASCII_SPACE)))
    return headers
