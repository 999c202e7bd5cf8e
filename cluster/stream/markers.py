"""Subject delete markers (ADR-43) and the TTL floor they impose, as nats-server 2.15 writes them.

With `subject_delete_marker_ttl` set, a message that max_age or its own TTL
removes while it is the last one on its subject is replaced by a marker: an
empty message on that subject with

    Nats-Marker-Reason: MaxAge
    Nats-TTL: <the marker TTL as a Go duration, e.g. 1m30s>
    Nats-Rollup: sub

which KV watchers show as a PURGE of the key. A marker (or a KV purge) that
expires in its turn leaves no marker behind. Sans-IO: the state machine asks.
"""

from __future__ import annotations

from cluster.stream.config import StreamConfig
from storage.msg_ttl import (
    NATS_TTL,
    InvalidTTLError,
    format_go_seconds,
    go_seconds,
    header_key_index,
    header_ttl,
    slice_header,
)

HDR_MARKER_REASON = b"Nats-Marker-Reason"
MARKER_REASON_MAX_AGE = b"MaxAge"
_KV_OPERATION = b"KV-Operation"
_KV_PURGE = b"PURGE"
_STATUS_LINE = b"NATS/1.0\r\n"
_EMPTY_BLOCK = b"NATS/1.0\r\n\r\n"


def marker_ttl_seconds(cfg: StreamConfig) -> int:
    """The marker TTL in whole seconds (nats-server truncates), 0 when markers are off."""
    return go_seconds(cfg.subject_delete_marker_ttl) if cfg.subject_delete_marker_ttl > 0 else 0


def marker_headers(ttl_seconds: int) -> bytes:
    return (
        b"NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: %s\r\nNats-Rollup: sub\r\n\r\n"
        % format_go_seconds(ttl_seconds).encode()
    )


def is_delete_marker(headers: bytes | None) -> bool:
    """A server's marker, or a KV purge: expiring one of these places no new marker."""
    if not headers:
        return False
    return bool(slice_header(HDR_MARKER_REASON, headers)) or slice_header(_KV_OPERATION, headers) == _KV_PURGE


def ttl_at_least_marker_ttl(cfg: StreamConfig, header: bytes) -> bytes:
    """`header` with a positive `Nats-TTL` below the marker TTL raised to it (rewritten in whole
    seconds, at the end of the block), as nats-server stores it: a shorter-lived message could
    otherwise expire before a marker on its subject does. Not with `max_msgs_per_subject` 1, where a
    subject only ever holds one message. Anything else is returned as it is."""
    floor = marker_ttl_seconds(cfg)
    if floor <= 0 or cfg.max_msgs_per_subject == 1 or NATS_TTL not in header:
        return header
    try:
        ttl = header_ttl(header)
    except InvalidTTLError:
        return header
    if not 0 < ttl < floor:
        return header
    return _with_header(_without_header(header, NATS_TTL), NATS_TTL, b"%d" % floor)


def _without_header(block: bytes, key: bytes) -> bytes:
    """nats-server's removeHeaderIfPresent: every `key` line gone; b"" if nothing is left."""
    while True:
        start = header_key_index(key, block)
        if start < 1 or block[start - 1] != 0x0A:
            return block
        end = block.find(b"\r\n", start)
        if end < 0:
            return block
        block = block[:start] + block[end + 2 :]
        if len(block) <= len(_EMPTY_BLOCK):
            return b""


def _with_header(block: bytes, key: bytes, value: bytes) -> bytes:
    """nats-server's genHeader: `key: value` added at the end of the block."""
    head = block[:-2] if len(block) > 2 else _STATUS_LINE
    return head + key + b": " + value + b"\r\n\r\n"
