"""The `Nats-TTL` header (ADR-43, per-message TTL), read exactly as nats-server 2.15 reads it.

A header value is looked up the way nats-server's `sliceHeader` does (the
first `\\r\\nNats-TTL:` line, case-sensitive; spaces after the colon
skipped, everything else up to the CRLF kept), then parsed as its
`parseMessageTTL` does:

- `never` (any case): the message never expires, not even by the stream's
  max_age; returned as `TTL_NEVER` (-1);
- a Go duration (`1h`, `90s`, `1.5s`): at least one second, truncated to
  whole seconds (`500ms` and `0` are invalid);
- otherwise a plain decimal number of seconds (`5`); `00` parses to 0, which
  means "no TTL", as on the real server; anything else is invalid.

TTLs are whole seconds. A message's deadline is its timestamp plus the TTL
computed in 64-bit integers that wrap, as in Go: a TTL of centuries
overflows into the past and expires at once on nats-server, and here too.
"""

from __future__ import annotations

NATS_TTL = b"Nats-TTL"
TTL_NEVER = -1
SECOND_NS = 1_000_000_000

_INT64 = 1 << 63
_UINT64 = 1 << 64
_UNITS = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # micro sign
    "\u03bcs": 1_000,  # Greek mu
    "ms": 1_000_000,
    "s": SECOND_NS,
    "m": 60 * SECOND_NS,
    "h": 3600 * SECOND_NS,
}


class InvalidTTLError(ValueError):
    """A `Nats-TTL` value nats-server refuses (JetStream error 10165)."""


def wrap_int64(value: int) -> int:
    """`value` as a Go int64 computation would leave it (two's complement wrap-around)."""
    return (value + _INT64) % _UINT64 - _INT64


def header_key_index(key: bytes, headers: bytes | None) -> int:
    """Where header line `key` starts, as nats-server's getHeaderKeyIndex finds it; -1 when absent."""
    if not headers:
        return -1
    size = len(headers)
    offset = 0
    while True:
        index = headers.find(key, offset)
        # as Go's: the position found is checked relative to where the search began
        if index < 0 or index - offset < 2:
            return -1
        if index >= size - 1 or headers[index - 2 : index] != b"\r\n":
            offset = index + len(key)
            continue
        end = index + len(key)
        if end >= size:
            return -1
        if headers[end] != 0x3A:  # ':'
            offset = end
            continue
        return index


def slice_header(key: bytes, headers: bytes | None) -> bytes | None:
    """The value of header `key` as nats-server's sliceHeader finds it, or None when absent."""
    index = header_key_index(key, headers)
    if index < 0:
        return None
    assert headers is not None
    size = len(headers)
    start = index + len(key) + 1
    while start < size and headers[start] == 0x20:
        start += 1
    stop = headers.find(b"\r\n", start)
    return headers[start:] if stop < 0 else headers[start:stop]


def parse_go_duration(text: str) -> int:
    """Go's time.ParseDuration, in nanoseconds; ValueError where Go returns an error."""
    s = text
    negative = False
    if s and s[0] in "+-":
        negative = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise ValueError(f"invalid duration {text!r}")
    total = 0
    while s:
        if not (s[0] == "." or (s[0].isascii() and s[0].isdigit())):
            raise ValueError(f"invalid duration {text!r}")
        whole, s, has_whole = _leading_int(s, text)
        fraction, scale, has_fraction = 0, 1.0, False
        if s and s[0] == ".":
            s = s[1:]
            fraction, scale, s, has_fraction = _leading_fraction(s)
        if not has_whole and not has_fraction:
            raise ValueError(f"invalid duration {text!r}")
        cut = 0
        while cut < len(s) and not (s[cut] == "." or (s[cut].isascii() and s[cut].isdigit())):
            cut += 1
        if cut == 0:
            raise ValueError(f"missing unit in duration {text!r}")
        unit = _UNITS.get(s[:cut])
        if unit is None:
            raise ValueError(f"unknown unit {s[:cut]!r} in duration {text!r}")
        s = s[cut:]
        if whole > _INT64 // unit:
            raise ValueError(f"invalid duration {text!r}")
        whole *= unit
        if fraction > 0:
            whole += int(float(fraction) * (float(unit) / scale))
            if whole > _INT64:
                raise ValueError(f"invalid duration {text!r}")
        total += whole
        if total > _INT64:
            raise ValueError(f"invalid duration {text!r}")
    if negative:
        return -total
    if total > _INT64 - 1:
        raise ValueError(f"invalid duration {text!r}")
    return total


def _leading_int(s: str, text: str) -> tuple[int, str, bool]:
    value = 0
    i = 0
    while i < len(s) and s[i].isascii() and s[i].isdigit():
        if value > _INT64 // 10:
            raise ValueError(f"invalid duration {text!r}")
        value = value * 10 + int(s[i])
        if value > _INT64:
            raise ValueError(f"invalid duration {text!r}")
        i += 1
    return value, s[i:], i > 0


def _leading_fraction(s: str) -> tuple[int, float, str, bool]:
    value, scale = 0, 1.0
    overflow = False
    i = 0
    while i < len(s) and s[i].isascii() and s[i].isdigit():
        if not overflow:
            if value > (_INT64 - 1) // 10:
                overflow = True
            else:
                candidate = value * 10 + int(s[i])
                if candidate > _INT64:
                    overflow = True
                else:
                    value = candidate
                    scale *= 10
        i += 1
    return value, scale, s[i:], i > 0


def _go_parse_int64(text: str) -> int:
    """nats-server's parseInt64: decimal digits only (else -1), wrapping on overflow like Go."""
    if not text:
        return -1
    value = 0
    for ch in text:
        if not ("0" <= ch <= "9"):
            return -1
        value = wrap_int64(value * 10 + ord(ch) - 48)
    return value


def parse_ttl(value: str) -> int:
    """Seconds (`TTL_NEVER` for `never`, 0 for none); InvalidTTLError as nats-server's parseMessageTTL."""
    if value.lower() == "never":
        return TTL_NEVER
    try:
        duration = parse_go_duration(value)
    except ValueError:
        seconds = _go_parse_int64(value)
        if seconds < 0:
            raise InvalidTTLError(f"invalid per-message TTL {value!r}") from None
        return seconds
    if duration < SECOND_NS:
        raise InvalidTTLError(f"invalid per-message TTL {value!r}")
    return go_seconds(duration)


def go_seconds(duration_ns: int) -> int:
    """Go's int64(d.Seconds()) of a non-negative duration: seconds and fraction in float64, truncated."""
    whole, fraction = divmod(duration_ns, SECOND_NS)
    return int(float(whole) + float(fraction) / 1e9)


def header_ttl(headers: bytes | None) -> int:
    """The TTL a header block asks for: 0 without `Nats-TTL`; raises InvalidTTLError."""
    if not headers or NATS_TTL not in headers:
        return 0
    raw = slice_header(NATS_TTL, headers)
    if not raw:
        return 0
    return parse_ttl(raw.decode("utf-8", errors="surrogateescape"))


def stored_ttl(headers: bytes | None) -> int:
    """The TTL a stored message keeps: as `header_ttl`, with an invalid value meaning none
    (a copy from another stream is stored as it came; nats-server then ignores its TTL)."""
    try:
        return header_ttl(headers)
    except InvalidTTLError:
        return 0


def ttl_deadline_ns(ts_ns: int, ttl_s: int) -> int:
    """When a message stored at `ts_ns` with a positive TTL expires, in Go's wrapping int64 arithmetic."""
    return wrap_int64(ts_ns + wrap_int64(ttl_s * SECOND_NS))


def format_go_seconds(seconds: int) -> str:
    """Go's Duration.String() of a whole number of seconds: `1s`, `1m30s`, `1h0m0s`."""
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"
