"""Durations as nats-server's monitoring endpoints print them (pure functions, no I/O).

Two forms: `uptime` and `idle` use nats-server's own compact form ("1d2h3m4s",
whole seconds), `rtt` uses Go's `time.Duration.String()` ("311µs", "4.017403ms",
"1.5s").
"""

from __future__ import annotations

_NS_PER_US = 1_000
_NS_PER_MS = 1_000_000
_NS_PER_S = 1_000_000_000


def uptime_string(seconds: float) -> str:
    """nats-server's uptime form: years, days, hours, minutes, seconds, leading zero units left out."""
    left = max(int(seconds), 0)
    years, left = divmod(left, 365 * 86400)
    days, left = divmod(left, 86400)
    hours, left = divmod(left, 3600)
    minutes, secs = divmod(left, 60)
    out = ""
    if years:
        out += f"{years}y"
    if years or days:
        out += f"{days}d"
    if years or days or hours:
        out += f"{hours}h"
    if years or days or hours or minutes:
        out += f"{minutes}m"
    return out + f"{secs}s"


def _fraction(value: int, unit: int) -> str:
    """`value / unit` with the fraction's trailing zeros dropped, as Go prints it."""
    whole, rest = divmod(value, unit)
    if not rest:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}." + f"{rest:0{digits}d}".rstrip("0")


def go_duration(ns: int) -> str:
    """Go's `time.Duration.String()` for durations under an hour (round-trip times, idle times)."""
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
