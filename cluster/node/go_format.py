"""Durations as nats-server's monitoring endpoints print them (pure functions, no I/O).

Two forms: `uptime` and `idle` use nats-server's own compact form ("1d2h3m4s",
whole seconds), `rtt` uses Go's `time.Duration.String()` ("311µs", "4.017403ms",
"1.5s").
"""

from __future__ import annotations

from storage.nats_time import format_go_duration as go_duration  # where the stream checks also find it

__all__ = ["go_duration", "uptime_string"]


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

