"""Opening many file stream stores: the node's one database against one database per stream (issue 21).

    .venv/bin/python bench/store_open.py [--stores 1000] [--dir PATH]

Each layout runs in a fresh child process, which opens `--stores` stores with a stream's limits (as a
replica does when its stream is created), stores one message in each and keeps them all open (idle
streams), then reports the wall time and CPU time of the opens and the process's RSS with every store
open, against the RSS of the same interpreter before the first open:

- `shared`: every store in one `StreamStoreEngine` (storage/rocks_engine.py), as a node now keeps them;
- `per-directory`: each store a RocksDB database of its own, with the store of the old layout
  (tests/storage/legacy_rocks_store.py), as a node kept them before.

The databases go under `--dir` (default: a temp directory on the disk holding /tmp, not tmpfs, so the
fsyncs RocksDB makes when it creates a database are real) and are removed at the end.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from storage.config import StoreConfig
from storage.rocks import RocksStreamStore
from storage.rocks_engine import StreamStoreEngine
from tests.storage.legacy_rocks_store import LegacyRocksStreamStore

CONFIG = StoreConfig(max_msgs=1_000_000, max_age_ns=3_600_000_000_000)
LAYOUTS = ("shared", "per-directory")


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def run_layout(layout: str, root: Path, stores: int) -> dict[str, float]:
    before = rss_mib()
    opened: list[RocksStreamStore | LegacyRocksStreamStore] = []
    engine = StreamStoreEngine(root / "streams.rocks") if layout == "shared" else None
    started, cpu_started = time.perf_counter(), time.process_time()
    for i in range(stores):
        name = f"S{i}-{1_700_000_000_000_000_000 + i}"
        if engine is not None:
            store: RocksStreamStore | LegacyRocksStreamStore = RocksStreamStore(engine, name, CONFIG)
        else:
            store = LegacyRocksStreamStore(root / "streams" / name, CONFIG)
        store.store_msg(f"s{i}.created", None, b"first")
        opened.append(store)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    rss_open = rss_mib()
    for store in opened:
        store.close()
    if engine is not None:
        engine.close()
    return {"seconds": elapsed, "cpu_seconds": cpu, "rss_before_mib": before, "rss_open_mib": rss_open}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", type=int, default=1000)
    parser.add_argument("--dir", type=Path, default=None, help="where the databases go (default: a temp dir)")
    parser.add_argument("--layout", choices=LAYOUTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.layout is not None:
        print(json.dumps(run_layout(args.layout, args.dir, args.stores)))
        return 0
    base = Path(tempfile.mkdtemp(prefix="store-open-", dir=args.dir))
    try:
        for layout in LAYOUTS:
            root = base / layout
            root.mkdir()
            command = [sys.executable, __file__, "--layout", layout, "--stores", str(args.stores), "--dir", str(root)]
            child = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
            figures = json.loads(child.stdout)
            print(
                f"{layout:>13}: {args.stores} stores opened in {figures['seconds']:.2f} s "
                f"({figures['cpu_seconds']:.2f} s CPU, {1000 * figures['seconds'] / args.stores:.2f} ms each), "
                f"RSS {figures['rss_open_mib']:.0f} MiB open "
                f"(+{figures['rss_open_mib'] - figures['rss_before_mib']:.0f} MiB over {figures['rss_before_mib']:.0f})"
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
