"""A several-worker node's one count of client connections, for `max_connections`.

nats-server refuses a client when the server as a whole holds `max_connections`; a node's workers share
its client port, so they must hold the limit together. The supervisor makes a small memory file
(memfd) of one 8-byte slot per worker and hands it to every worker it starts (the descriptor's number
in `$JETRAFT_CONNECTION_SLOTS_FD`). Worker i counts its clients in slot i only. Admitting a client takes a
POSIX record lock on the file (`lockf`: held per process, so the workers, which share one open file,
still exclude each other; the kernel drops it when its holder dies), sums the slots, and counts the
client only while the sum is below the limit: the decision nats-server makes under its one lock.

A slot per worker, rather than one counter, is what keeps the count true across a worker's crash: its
clients died with it, and the worker zeroes its own slot when it starts again.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import time
from collections.abc import Iterator

import structlog

from cluster.node.supervision.worker_slots import (
    create_worker_slots,
    map_worker_slots,
    slots_fd_from_environment,
)

log = structlog.get_logger(__name__)

CONNECTION_SLOTS_FD_ENV = "JETRAFT_CONNECTION_SLOTS_FD"
_SLOT = struct.Struct("=q")
# The lock is held for a few microseconds. A holder stopped with it (SIGSTOP, a debugger) must not stop
# every other worker's loop: past this wait the decision is made without the lock, and logged.
LOCK_WAIT = 0.05
_LOCK_RETRY = 0.0005


def create_connection_slots(workers: int) -> int:
    """In the supervisor: the descriptor of a zeroed file of one slot per worker."""
    return create_worker_slots("jetraft-connections", _SLOT.size, workers)


class NodeConnectionCount:
    """In worker `index`: the node's connection count (gateway.limits.SharedConnectionCount)."""

    def __init__(self, fd: int, index: int, workers: int) -> None:
        self._fd = fd
        self._workers = workers
        self._offset = index * _SLOT.size
        self._map = map_worker_slots(fd, _SLOT.size, workers)
        with self._locked():
            # clients of an earlier process of this worker died with it
            _SLOT.pack_into(self._map, self._offset, 0)

    @classmethod
    def from_environment(cls, index: int, workers: int) -> NodeConnectionCount | None:
        """The count the supervisor passed this worker; None for a process it did not start."""
        fd = slots_fd_from_environment(CONNECTION_SLOTS_FD_ENV)
        return cls(fd, index, workers) if fd is not None else None

    def total(self) -> int:
        return sum(_SLOT.unpack_from(self._map, i * _SLOT.size)[0] for i in range(self._workers))

    def mine(self) -> int:
        return _SLOT.unpack_from(self._map, self._offset)[0]

    def try_add(self, limit: int) -> bool:
        with self._locked():
            if self.total() >= limit:
                return False
            _SLOT.pack_into(self._map, self._offset, self.mine() + 1)
            return True

    def remove(self) -> None:
        with self._locked():
            _SLOT.pack_into(self._map, self._offset, max(self.mine() - 1, 0))

    def close(self) -> None:
        self._map.close()
        os.close(self._fd)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            try:
                fcntl.lockf(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    log.warning("connection_count_lock_not_taken", waited=LOCK_WAIT)
                    yield
                    return
                time.sleep(_LOCK_RETRY)
        try:
            yield
        finally:
            fcntl.lockf(self._fd, fcntl.LOCK_UN)
