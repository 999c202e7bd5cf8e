"""Timestamps as JetStream writes them: RFC 3339 with up to nine fraction digits, in UTC.

Go's `time.RFC3339Nano` drops trailing zeros of the fraction (and the dot when
nothing is left); the zero `time.Time` prints as `0001-01-01T00:00:00Z`, which
is what stream state shows for the first timestamp of an empty stream.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from functools import lru_cache

from storage.validation import MAX_TS, MIN_TS

ZERO_TIME = "0001-01-01T00:00:00Z"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NS_PER_S = 1_000_000_000
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))"
)


def format_rfc3339_nano(ts_ns: int) -> str:
    """Unix nanoseconds as Go's RFC3339Nano in UTC."""
    seconds, nanos = divmod(ts_ns, _NS_PER_S)
    stamp = _format_seconds(seconds)
    if nanos:
        stamp += "." + f"{nanos:09d}".rstrip("0")
    return stamp + "Z"


# Reads come in runs of messages stored within the same second: every Direct Get reply and
# stream listing formats a time, and strftime is most of the cost.
@lru_cache(maxsize=4096)
def _format_seconds(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))


def format_optional_ts(ts_ns: int) -> str:
    """Like `format_rfc3339_nano`, but 0 (no timestamp) prints as Go's zero time."""
    return ZERO_TIME if ts_ns == 0 else format_rfc3339_nano(ts_ns)


def parse_rfc3339_nano(text: str) -> int:
    """An RFC 3339 timestamp (any offset, up to nanoseconds) as Unix nanoseconds.

    Raises ValueError for anything else.
    """
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}")
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    fraction = match.group(7) or ""
    nanos = int(fraction.ljust(9, "0")) if fraction else 0
    moment = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    if match.group(9):
        offset = timedelta(hours=int(match.group(10)), minutes=int(match.group(11)))
        moment -= offset if match.group(9) == "+" else -offset
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * _NS_PER_S + nanos


def parse_request_time(text: str) -> int:
    """A request's RFC 3339 time (`start_time`, `up_to_time`, `opt_start_time`) as Unix nanoseconds held
    to the 64-bit range stored timestamps live in: a time after 2262 asks for what comes after every
    message (nothing), not for an error the store would raise. Raises ValueError like parse_rfc3339_nano.
    """
    return min(max(parse_rfc3339_nano(text), MIN_TS), MAX_TS)


_NS_PER_US = 1_000
_NS_PER_MS = 1_000_000


def _fraction(value: int, unit: int) -> str:
    """`value / unit` with the fraction's trailing zeros dropped, as Go prints it."""
    whole, rest = divmod(value, unit)
    if not rest:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}." + f"{rest:0{digits}d}".rstrip("0")


def format_go_duration(ns: int) -> str:
    """Go's `time.Duration.String()`: "311µs", "4.017403ms", "1.5s", "1m0s", "2h0m0s"."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < _NS_PER_US:
        return f"{sign}{ns}ns"
    if ns < _NS_PER_MS:
        return f"{sign}{_fraction(ns, _NS_PER_US)}µs"
    if ns < _NS_PER_S:
        return f"{sign}{_fraction(ns, _NS_PER_MS)}ms"
    minutes, rest = divmod(ns, 60 * _NS_PER_S)
    hours, minutes = divmod(minutes, 60)
    out = sign
    if hours:
        out += f"{hours}h"
    if hours or minutes:
        out += f"{minutes}m"
    return out + f"{_fraction(rest, _NS_PER_S)}s"
