"""ADR-42's `pinned_client` priority policy: the one client a consumer serves while it keeps asking.

As nats-server 2.15 does it (consumer.go: assignNewPinId, setPinnedTimer, unassignPinId): the pin is
the consumer leader's own, not replicated (a new leader pins anew, and a client holding the old pin
is told so with 423). A message going to a pull request of the group that names no pin pins that
request's client: a new id, sent on each message it gets (`Nats-Pin-Id`) and announced
(CONSUMER.PINNED). The pin lasts while the pinned client keeps asking: each of its requests restarts
`priority_timeout`; when that runs out, or on an UNPIN request, it is released (CONSUMER.UNPINNED,
reason `timeout` or `admin`) and the next request without a pin takes it over.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

PIN_ID_HEADER = "Nats-Pin-Id"


class PinnedClient:
    """The pin of a consumer's group on its leader, with its timeout."""

    def __init__(self, on_timeout: Callable[[], None]) -> None:
        self.id = ""
        self.since_ns = 0
        self._on_timeout = on_timeout
        self._timer: asyncio.TimerHandle | None = None

    def assign(self, pin_id: str, now_ns: int, timeout_ns: int) -> None:
        """Pin a new client under `pin_id` (`new_event_id()`: a NUID's length and alphabet)."""
        self.id = pin_id
        self.since_ns = now_ns
        self.keep(timeout_ns)

    def keep(self, timeout_ns: int) -> None:
        """The pinned client asked again: its pin lasts `timeout_ns` from now."""
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(timeout_ns / 1e9, self._expired)

    def release(self) -> None:
        self.id = ""
        self.since_ns = 0
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        self._timer = None
        if self.id:
            self.release()
            self._on_timeout()


__all__ = ["PIN_ID_HEADER", "PinnedClient"]
