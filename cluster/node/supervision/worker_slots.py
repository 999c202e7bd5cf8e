"""A memory file of fixed-size slots, one per worker of a node, shared by the supervisor's workers.

The supervisor creates the file (a memfd, zeroed) and passes its descriptor to each worker it starts,
its number in an environment variable; each worker maps the whole file and writes its own slot. What a
slot holds and how it is read (under a lock or not) is the user's: connection_slots.py (the node's
client count) and shared_holdings.py (what its replicas hold).
"""

from __future__ import annotations

import mmap
import os


def create_worker_slots(name: str, slot_bytes: int, workers: int) -> int:
    """In the supervisor: the descriptor of a zeroed file of one `slot_bytes` slot per worker (closed on
    exec unless passed on, as `pass_fds` does for each worker)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    os.ftruncate(fd, slot_bytes * workers)
    return fd


def map_worker_slots(fd: int, slot_bytes: int, workers: int) -> mmap.mmap:
    """In a worker: every worker's slots, shared with the other processes that map the file."""
    return mmap.mmap(fd, slot_bytes * workers)


def slots_fd_from_environment(variable: str) -> int | None:
    """The descriptor the supervisor passed in `variable` (taken out of the environment, so that a process
    this one starts does not think it was passed too); None for a process the supervisor did not start."""
    fd = os.environ.pop(variable, None)
    return int(fd) if fd is not None else None
