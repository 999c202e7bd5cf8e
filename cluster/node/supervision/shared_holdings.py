"""What a several-worker node's stream replicas hold, for its JetStream limits (`max_memory_store`,
`max_file_store`), which are the node's, as nats-server's are its server's.

The supervisor makes a memory file (memfd) of two 8-byte slots per worker, memory and file bytes, and
hands it to every worker (the descriptor's number in `$JETRAFT_HOLDINGS_FD`). Each worker writes only its
own slots (cluster/runtime/server_limits.py's NodeHoldings tells them in the loop turn its replicas
changed) and reads the others' when a publish is checked against the node's limit. No lock: a value is
one aligned 8-byte word written by one process, and the check needs no more than nats-server's (the
message that crosses the limit is stored; the next is refused).
"""

from __future__ import annotations

import os
import struct

from cluster.node.supervision.worker_slots import (
    create_worker_slots,
    map_worker_slots,
    slots_fd_from_environment,
)

HOLDINGS_FD_ENV = "JETRAFT_HOLDINGS_FD"
_SLOTS = struct.Struct("=qq")  # memory bytes, file bytes


def create_holdings_slots(workers: int) -> int:
    """In the supervisor: the descriptor of a zeroed file of two slots per worker."""
    return create_worker_slots("jetraft-holdings", _SLOTS.size, workers)


class WorkerHoldings:
    """In worker `index`: its own slots and its siblings' (server_limits.SiblingHoldings)."""

    def __init__(self, fd: int, index: int, workers: int) -> None:
        self._fd = fd
        self._index = index
        self._workers = workers
        self._map = map_worker_slots(fd, _SLOTS.size, workers)
        # what an earlier process of this worker held is its replicas' again once they open, told anew
        self.tell(0, 0)

    @classmethod
    def from_environment(cls, index: int, workers: int) -> WorkerHoldings | None:
        """The slots the supervisor passed this worker; None for a process it did not start."""
        fd = slots_fd_from_environment(HOLDINGS_FD_ENV)
        return cls(fd, index, workers) if fd is not None else None

    def tell(self, memory: int, storage: int) -> None:
        _SLOTS.pack_into(self._map, self._index * _SLOTS.size, memory, storage)

    def others(self, in_memory: bool) -> int:
        column = 0 if in_memory else 1
        return sum(
            _SLOTS.unpack_from(self._map, worker * _SLOTS.size)[column]
            for worker in range(self._workers)
            if worker != self._index
        )

    def close(self) -> None:
        self._map.close()
        os.close(self._fd)
