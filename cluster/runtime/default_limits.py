"""A node's JetStream limits when its config sets none: nats-server's own (server/jetstream.go,
dynJetStreamConfig, and server/disk_avail.go), so that a node without `max_memory_store` or
`max_file_store` refuses what nats-server refuses (a memory stream of a terabyte: 10028) rather than
accepting a reservation it cannot hold:

- memory: three quarters of the machine's physical memory (256 MiB where it cannot be read);
- storage: three quarters of the disk space available to the store directory when the node starts
  (1 TiB where it cannot be read).

Read once per process and store directory: nats-server reads them once, when JetStream starts, and shows
the same figures in /varz for as long as it runs.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

# server/jetstream.go: JetStreamMaxMemDefault, JetStreamMaxStoreDefault
MEMORY_FALLBACK = 256 * 1024 * 1024
STORAGE_FALLBACK = 1024**4


@functools.cache
def default_limits(store_dir: str) -> tuple[int, int]:
    """(max memory, max storage) in bytes for a node storing under `store_dir` (which may not exist yet)."""
    return _memory_limit(), _storage_limit(Path(store_dir))


def _memory_limit() -> int:
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        memory = 0
    # Go's integer arithmetic, in its order: a quarter first
    return memory // 4 * 3 if memory > 0 else MEMORY_FALLBACK


def _storage_limit(store_dir: Path) -> int:
    # nats-server creates the directory first; the nearest one that exists is on the same filesystem
    existing = store_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        stats = os.statvfs(existing)
    except OSError:
        return STORAGE_FALLBACK
    return stats.f_bavail * stats.f_bsize // 4 * 3
