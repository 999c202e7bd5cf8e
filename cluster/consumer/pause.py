"""Pausing a consumer (`$JS.API.CONSUMER.PAUSE.<stream>.<consumer>`), as nats-server 2.15 does it.

A pause is the consumer config's `pause_until`: until then the leader
delivers nothing (pull requests wait, and expire, as on an empty stream;
push consumers still get idle heartbeats), then it carries on by itself.
The request sets or clears that field through the meta group, like any
config change, so every replica and any later leader has it. Only this
request changes it: a create or update of an existing consumer keeps the
pause it had. Checked against a real nats-server 2.15.1:

- the body is `{"pause_until": <RFC 3339>}`; an empty body, one that is not
  JSON at all, or the zero time resumes; a JSON array or a wrong type is
  `invalid JSON` (10025);
- the answer is `{"type", "paused", "pause_until", "pause_remaining"}`, with
  the zero time when resumed and no `pause_remaining` unless paused; errors
  carry `paused` and `pause_until` after the error, as Go prints them;
- a paused consumer's info has `paused: true` and `pause_remaining` (ns).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from cluster.api import jsjson
from cluster.api.errors import JSErrors
from cluster.consumer.config import ZERO_TIME_NS, ConsumerConfig, parse_pause_until
from cluster.consumer.config_check import static_metadata
from storage.nats_time import format_optional_ts

PAUSE_TYPE = "io.nats.jetstream.api.v1.consumer_pause_response"


def parse_pause_request(payload: bytes) -> int | None:
    """The `pause_until` a PAUSE request asks for (None: resume); raises ApiError 10025.

    As nats-server: a body that does not start like a JSON object or array is not read at all.
    """
    body = bytes(payload).lstrip(b" \t\r\n")
    if not body or body[:1] not in (b"{", b"["):
        return None
    if body[:1] == b"[":
        raise JSErrors.INVALID_JSON(
            err="json: cannot unmarshal array into Go value of type server.JSApiConsumerPauseRequest"
        )
    try:
        obj = jsjson.loads_request(body, "JSApiConsumerPauseRequest")
        raw = obj.get("pause_until")
        jsjson.reject_unknown(obj)
        if raw is not None and not isinstance(raw, str):
            raise jsjson.type_error(obj, "pause_until", raw, "time.Time")
    except jsjson.RequestJSONError as exc:
        raise JSErrors.INVALID_JSON(err=str(exc)) from None
    if raw is None:
        return None
    try:
        until = parse_pause_until(raw)
    except ValueError as exc:
        raise JSErrors.INVALID_JSON(err=str(exc)) from None
    return None if until == ZERO_TIME_NS else until  # the server clears a zero pause_until


def is_paused(config: ConsumerConfig, now_ns: int) -> bool:
    return config.pause_until_ns is not None and now_ns < config.pause_until_ns


def pause_remaining(config: ConsumerConfig, now_ns: int) -> int:
    """Nanoseconds until a paused consumer resumes (0 when it is not paused)."""
    return config.pause_until_ns - now_ns if is_paused(config, now_ns) else 0  # type: ignore[operator]


def with_pause(config: ConsumerConfig, pause_until_ns: int | None) -> ConsumerConfig:
    """`config` paused until `pause_until_ns` (None: not paused), its required API level to match."""
    paused = dataclasses.replace(config, pause_until_ns=pause_until_ns)
    return dataclasses.replace(paused, metadata=static_metadata(paused))


def pause_fields(pause_until_ns: int | None, now_ns: int) -> dict[str, Any]:
    """`paused`, `pause_until` and (while paused) `pause_remaining`, as the answer prints them."""
    paused = pause_until_ns is not None and now_ns < pause_until_ns
    out: dict[str, Any] = {"paused": paused, "pause_until": format_optional_ts(pause_until_ns or 0)}
    if paused:
        out["pause_remaining"] = pause_until_ns - now_ns  # type: ignore[operator]
    return out


def pause_response(pause_until_ns: int | None, now_ns: int) -> bytes:
    return jsjson.dumps({"type": PAUSE_TYPE, **pause_fields(pause_until_ns, now_ns)})


__all__ = [
    "PAUSE_TYPE",
    "is_paused",
    "parse_pause_request",
    "pause_fields",
    "pause_remaining",
    "pause_response",
    "with_pause",
]
