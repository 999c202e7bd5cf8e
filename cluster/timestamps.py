"""Timestamps as nats-server writes and reads them: RFC 3339 with nanoseconds.

Stored messages carry an integer nanosecond Unix time. nats-server prints
times with Go's RFC3339Nano layout (UTC, `Z`, fractional seconds with their
trailing zeros dropped, no fraction at all on a whole second), and prints
Go's zero time `0001-01-01T00:00:00Z` where a state has no time yet; we use
0 ns for "no time", which no real message carries.
"""

from __future__ import annotations

import calendar
import re
import time
from functools import lru_cache

GO_ZERO_TIME = "0001-01-01T00:00:00Z"
NS_PER_SECOND = 1_000_000_000

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))\Z"
)


class TimestampError(ValueError):
    """Text that is not an RFC 3339 time."""


@lru_cache(maxsize=4096)
def _second_prefix(seconds: int) -> str:
    # Direct Get batches stamp many messages from the same second
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))


def format_ns(unix_ns: int) -> str:
    """Go's `time.Unix(0, ns).UTC().Format(time.RFC3339Nano)`; 0 gives Go's zero time."""
    if unix_ns == 0:
        return GO_ZERO_TIME
    seconds, fraction = divmod(unix_ns, NS_PER_SECOND)
    prefix = _second_prefix(seconds)
    if not fraction:
        return prefix + "Z"
    return f"{prefix}.{fraction:09d}".rstrip("0") + "Z"


def parse_rfc3339_ns(text: str) -> int:
    """Nanoseconds since the Unix epoch for an RFC 3339 time (any offset, up to 9 fractional digits)."""
    match = _RFC3339.match(text)
    if match is None:
        raise TimestampError(f"not an RFC 3339 time: {text!r}")
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 60):
        raise TimestampError(f"time out of range: {text!r}")
    fraction = match.group(7) or ""
    nanos = int(fraction.ljust(9, "0")) if fraction else 0
    offset = 0
    if match.group(9):
        sign = 1 if match.group(9) == "+" else -1
        offset = sign * (int(match.group(10)) * 3600 + int(match.group(11)) * 60)
    seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0)) - offset
    return seconds * NS_PER_SECOND + nanos
