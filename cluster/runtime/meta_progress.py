"""How far this node's services have taken in the meta group's log, so a leader can answer after it.

The meta leader records a change (a consumer's or stream's new config, a new
consumer) and then asks the stream or consumer leader, often on another node,
to answer the client. That node applies the meta entry and hands the new
assignment to its replicas a moment later (the meta service's reconciler),
so a leader answering at once could describe the state from before the
change. The meta leader therefore sends the meta log index the answer must
reflect in a header (`Jetraft-Meta-Index`), and the leader waits, a bounded
time, until its own node has reconciled that far.
"""

from __future__ import annotations

import asyncio
import contextlib

from gateway.headers import HeaderError, decode_headers, extend_header_block

META_INDEX_HEADER = "Jetraft-Meta-Index"
# How long a leader waits for its node to catch up with the meta index a request names before it
# answers anyway: a node that far behind is not keeping up, and the client should hear something.
META_CATCH_UP_WAIT = 5.0


class MetaProgress:
    """The meta log index up to which this node's replicas have been given their assignments."""

    def __init__(self) -> None:
        self.reconciled = 0
        self._changed = asyncio.Event()

    def advance(self, index: int) -> None:
        if index > self.reconciled:
            self.reconciled = index
            self._changed.set()

    async def reached(self, index: int, timeout: float = META_CATCH_UP_WAIT) -> bool:
        """Whether this node reconciled up to `index` within `timeout` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.reconciled < index:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
        return True


def with_meta_index(headers: bytes | None, index: int) -> bytes:
    """A request's header block with the meta index its answer must reflect added."""
    return extend_header_block(headers, f"{META_INDEX_HEADER}: {index}\r\n".encode())


def meta_index_of(headers: bytes | None) -> int:
    """The meta index a request names (0: none)."""
    if not headers:
        return 0
    try:
        value = decode_headers(headers).get(META_INDEX_HEADER)
    except HeaderError:
        return 0
    return int(value) if value is not None and value.isdigit() else 0


__all__ = ["META_INDEX_HEADER", "MetaProgress", "meta_index_of", "with_meta_index"]
