"""Every test's nats-py client keeps its SUBs ahead of its PINGs on the wire.

nats-py 2.16's `flush()` writes its PING straight to the socket, while `subscribe()` leaves its SUB in
the client's pending buffer for the flusher task, which runs on a later turn of the loop. So a
`subscribe()` then `flush()` puts PING before SUB on the wire: the PONG comes back before the server
has read the SUB, and a message another connection publishes right then finds no subscriber. Measured
against nats-server 2.15.1 with two fresh nats-py connections (subscribe, flush, publish from the
other, wait): 2 of 200 and 1 of 600 messages never arrived, 0 of 1,500 with raw sockets sending SUB then
PING, 0 of 1,200 with this patch. Both servers answer the PING they read first, so tests on either
side failed now and then (CI at d0b8526 and 1129b28). The patch writes what is pending before the PING,
the order the client's own calls were made in; tests/test_client_ordering.py checks the order.
"""

from __future__ import annotations

from typing import Any

from nats.aio.client import Client

# nats-py's own, kept for tests/test_client_ordering.py (None if a later nats-py has no such method)
ORIGINAL_SEND_PING = getattr(Client, "_send_ping", None)


def _install() -> None:
    original = ORIGINAL_SEND_PING
    if original is None:
        return  # a nats-py whose internals differ: tests/test_client_ordering.py says whether it keeps the order

    async def send_ping_after_pending(self: Client, future: Any = None) -> None:
        # private attributes of nats-py 2.16; a client without them is left to its own order
        pending = getattr(self, "_pending", None)
        transport = getattr(self, "_transport", None)
        if pending and transport is not None:
            transport.writelines(pending[:])
            self._pending = []
            self._pending_data_size = 0
        await original(self, future)

    Client._send_ping = send_ping_after_pending  # type: ignore[method-assign]


_install()
