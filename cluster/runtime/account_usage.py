"""What the account's streams hold, as this node last heard it: for a stream leader's check of a publish
against the account's max_memory / max_storage (nats-server's jsAccount usage, which its servers also
learn from each other's periodic updates).

A stream with a replica on this node counts as that replica holds it now. Of the others, the nodes that
lead them tell every node, every USAGE_INTERVAL, how many bytes each holds on all its replicas (only when
the account has a byte limit: otherwise nobody needs it); one not heard of for USAGE_STALE (deleted, or
leaderless) no longer counts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping

USAGE_SUBJECT = "$JSR.USAGE"
USAGE_INTERVAL = 1.0  # seconds
USAGE_STALE = 5.0  # seconds


def encode_usage(streams: Mapping[str, tuple[bool, int]]) -> bytes:
    """{stream: [in_memory, bytes on all replicas]} for the streams one node leads."""
    return json.dumps({name: [memory, size] for name, (memory, size) in streams.items()}).encode()


class AccountUsage:
    """Bytes by stream, from the usage messages every leading node sends."""

    def __init__(self) -> None:
        self._streams: dict[str, tuple[bool, int, float]] = {}
        self._local: Callable[[], Mapping[str, tuple[bool, int]]] = dict

    def count_local(self, local: Callable[[], Mapping[str, tuple[bool, int]]]) -> None:
        """Where the streams with a replica on this node are read from: {stream: (in memory, bytes)}."""
        self._local = local

    def record(self, payload: bytes, now: float | None = None) -> None:
        """Take one usage message; one that is not one is ignored."""
        at = time.monotonic() if now is None else now
        try:
            streams = json.loads(payload)
        except ValueError:
            return
        if not isinstance(streams, dict):
            return
        for name, entry in streams.items():
            if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], int):
                self._streams[name] = (bool(entry[0]), entry[1], at)

    def heard(self, now: float | None = None) -> dict[str, int]:
        """Bytes by stream as the leaders last reported them (not stale)."""
        at = time.monotonic() if now is None else now
        return {name: size for name, (_, size, heard) in self._streams.items() if at - heard <= USAGE_STALE}

    def total(self, in_memory: bool, except_stream: str, now: float | None = None) -> int:
        """Bytes the other streams of this storage type hold, as last heard (and not stale)."""
        at = time.monotonic() if now is None else now
        local = self._local()
        here = sum(size for name, (memory, size) in local.items() if memory == in_memory and name != except_stream)
        return here + sum(
            size
            for name, (memory, size, heard) in self._streams.items()
            if memory == in_memory
            and name != except_stream
            and name not in local
            and at - heard <= USAGE_STALE
        )


API_USAGE_SUBJECT = "$JSR.APIUSAGE"


def is_error_response(body: bytes) -> bool:
    """A JetStream API response carrying an error: `{"type":"...","error":{...` as every one is written
    (a nested `error`, a mirror's say, comes later and does not count)."""
    if not body.startswith(b'{"type":"'):
        return False
    end = body.find(b'"', 9)
    return end > 0 and body.startswith(b',"error":', end + 1)


class ApiCounts:
    """ACCOUNT INFO's `api.total` and `api.errors`: the API responses each node sent the account's clients
    (nats-server counts them where it answers, and its servers tell each other their counts)."""

    def __init__(self) -> None:
        self.total = 0
        self.errors = 0
        self._others: dict[str, tuple[int, int]] = {}

    def count(self, body: bytes) -> None:
        self.total += 1
        if is_error_response(body):
            self.errors += 1

    def encode(self, node: str) -> bytes:
        return json.dumps([node, self.total, self.errors]).encode()

    def record(self, payload: bytes, own_node: str) -> None:
        """Another node's counts, as it last reported them."""
        try:
            node, total, errors = json.loads(payload)
        except (ValueError, TypeError):
            return
        if isinstance(node, str) and node != own_node and isinstance(total, int) and isinstance(errors, int):
            self._others[node] = (total, errors)

    def cluster_totals(self) -> tuple[int, int]:
        return (
            self.total + sum(total for total, _ in self._others.values()),
            self.errors + sum(errors for _, errors in self._others.values()),
        )
