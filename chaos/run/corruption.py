"""Damage a stopped node's files: flipped bits, a truncated write-ahead log (RocksDB's `*.log`), or the
writes made after its last fsync dropped.

Applied to a node killed a moment before and restarted at heal: the node must
notice and repair from its peers, never serve what it damaged. Seeded: the
same random generator and files give the same damage.
"""

from __future__ import annotations

import random
from pathlib import Path

from storage.rocks_engine import SYNC_POINT_FILE

# where a node sets damaged files aside (cluster/node/damage.py): not the node's data any more
DAMAGED_DIR = "damaged"

FLIPS = 16


def candidate_files(data_dir: Path) -> list[Path]:
    """The node's RocksDB data files (tables and write-ahead logs), in a stable order; not its text LOG."""
    return sorted(
        path
        for path in data_dir.rglob("*")
        if path.is_file()
        and path.suffix in (".sst", ".log")
        and path.stat().st_size > 0
        and DAMAGED_DIR not in path.relative_to(data_dir).parts  # set aside by the node after earlier damage
    )


def flip_bits(data_dir: Path, rng: random.Random, flips: int = FLIPS) -> list[str]:
    """Flip `flips` random bits in random data files; what was done, one line per flip."""
    files = candidate_files(data_dir)
    done: list[str] = []
    for _ in range(flips if files else 0):
        path = rng.choice(files)
        size = path.stat().st_size
        offset, bit = rng.randrange(size), rng.randrange(8)
        with open(path, "r+b") as file:
            file.seek(offset)
            byte = file.read(1)[0]
            file.seek(offset)
            file.write(bytes([byte ^ (1 << bit)]))
        done.append(f"{path.relative_to(data_dir)}@{offset} bit {bit}")
    return done


def truncate_logs(data_dir: Path, rng: random.Random) -> list[str]:
    """Cut each RocksDB directory's newest write-ahead log at a random point of its second half."""
    done: list[str] = []
    newest: dict[Path, Path] = {}
    for path in candidate_files(data_dir):
        if path.suffix == ".log" and (path.parent not in newest or path.name > newest[path.parent].name):
            newest[path.parent] = path
    for path in sorted(newest.values()):
        size = path.stat().st_size
        keep = rng.randrange(size // 2, size)
        with open(path, "r+b") as file:
            file.truncate(keep)
        done.append(f"{path.relative_to(data_dir)} {size} -> {keep} bytes")
    return done


def drop_unsynced(data_dir: Path, rng: random.Random) -> list[str]:
    """Cut each database's write-ahead logs back to where they stood at its last fsync (`SYNC-POINT`, which
    a node writes with JETRAFT_RECORD_SYNC_POINTS=1): the newer logs emptied, the synced one cut to its
    synced size. That is what a power cut may take from a node that had just been killed: only writes it
    had not synced, and jetraft acknowledges nothing before its Raft log is synced. `rng` is unused: the
    damage is decided by the node's own sync points."""
    del rng
    done: list[str] = []
    for point in sorted(
        p for p in data_dir.rglob(SYNC_POINT_FILE) if DAMAGED_DIR not in p.relative_to(data_dir).parts
    ):
        db_dir = point.parent
        name, size_text = point.read_text().split()
        synced_size = int(size_text)
        for log in sorted(db_dir.glob("*.log")):
            if log.name < name:
                continue  # older logs were synced whole before this one began
            size = log.stat().st_size
            keep = synced_size if log.name == name else 0
            if size > keep:
                with open(log, "r+b") as file:
                    file.truncate(keep)
                done.append(f"{log.relative_to(data_dir)} {size} -> {keep} bytes (unsynced)")
    if not done:
        done.append(
            "nothing unsynced to drop" if any(data_dir.rglob(SYNC_POINT_FILE)) else "no sync point recorded"
        )
    return done
