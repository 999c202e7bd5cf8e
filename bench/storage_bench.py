"""Stream store figures of issue 2, for RocksStreamStore and MemoryStreamStore.

    .venv/bin/python bench/storage_bench.py [--messages 1000000] [--subjects N] [--dir PATH]

With 128-byte payloads and no headers:
- batched writes: `--messages` messages in write groups of 100 without fsync, msgs/s
  (this also fills the store the later figures use, message i on subject i % subjects);
- durable group commit: `--durable-messages` messages in write groups of 100, one fsync
  per group (`write_group(sync=True)`), into a second store, msgs/s;
- last-by-subject lookups (`load_last_msg(subject)`, random subjects) over the filled
  store, lookups/s;
- reopen after a crash: a process adds one message and exits without closing the store, and a fresh
  one opens it (the saved index is stale, so every record is read);
- reopen: a fresh process opens the filled RocksDB store (which rebuilds the in-memory
  index); the memory store has nothing to reopen, so its column is a fresh process
  restoring the store from its snapshot file (how a memory replica comes back);
- RSS of that fresh process once the store is open, and of the interpreter with the
  same imports before opening it (the difference is what the store's indexes cost).

Each figure runs in its own child process (`--phase`), so RSS is not inflated by an
earlier phase. The RocksDB directories go under `--dir` (default: a temp directory on
the disk holding /tmp, not tmpfs, so fsyncs are real) and are removed at the end.
Shrink with `--messages` for a quick run (subjects default to a tenth of it).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from storage.interface import StreamStore
from storage.memory import MemoryStreamStore
from storage.rocks import RocksStreamStore

PAYLOAD = bytes(range(128))
BATCH = 100


def rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size of this process, MB."""
    fields: dict[str, float] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) / 1024
    return fields["VmRSS"], fields["VmHWM"]


def subject_of(index: int, subjects: int) -> str:
    return f"bench.orders.k{index % subjects}"


def timed_rate(count: int, run: Callable[[], None]) -> dict[str, float]:
    """Runs `run` (which does `count` units) and returns its wall and CPU rates."""
    start, cpu_start = time.perf_counter(), time.process_time()
    run()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    return {"per_s": count / wall, "per_cpu_s": count / max(cpu, 1e-9), "seconds": wall}


def write_batches(store: StreamStore, messages: int, subjects: int, *, sync: bool) -> None:
    for start in range(0, messages, BATCH):
        with store.write_group(sync=sync):
            for i in range(start, min(start + BATCH, messages)):
                store.store_msg(subject_of(i, subjects), None, PAYLOAD)


def lookups(store: StreamStore, subjects: int, count: int, seconds: float) -> dict[str, float]:
    """`load_last_msg` on random subjects until `count` are done or `seconds` pass."""
    chooser = random.Random(7)
    names = [subject_of(chooser.randrange(subjects), subjects) for _ in range(min(count, 100_000))]
    done = 0
    start, cpu_start = time.perf_counter(), time.process_time()
    deadline = start + seconds
    while done < count and time.perf_counter() < deadline:
        for name in names[: count - done]:
            store.load_last_msg(name)
        done += min(len(names), count - done)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    return {"per_s": done / wall, "per_cpu_s": done / max(cpu, 1e-9), "done": done}


# -- phases, each run in a child process ------------------------------------------------


def phase_write(kind: str, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Fills the main store (batched, no fsync), then a second one with durable groups."""
    result: dict[str, Any] = {}
    store: StreamStore = RocksStreamStore.open_alone(root / "filled") if kind == "rocks" else MemoryStreamStore()
    result["batched"] = timed_rate(
        args.messages, lambda: write_batches(store, args.messages, args.subjects, sync=False)
    )
    state = store.state()
    assert state.messages == args.messages and state.num_subjects == min(args.subjects, args.messages)
    result["rss_filled_mb"] = rss_mb()[0]
    if kind == "memory":
        # The memory store comes back from a snapshot, so write one for the reopen phase.
        with (root / "memory.snapshot").open("wb") as out:
            for chunk in store.snapshot():
                out.write(chunk)
    store.close()
    durable: StreamStore = RocksStreamStore.open_alone(root / "durable") if kind == "rocks" else MemoryStreamStore()
    result["durable"] = timed_rate(
        args.durable_messages,
        lambda: write_batches(durable, args.durable_messages, args.subjects, sync=True),
    )
    durable.close()
    return result


def read_chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as source:
        while chunk := source.read(1 << 20):
            yield chunk


def phase_reopen(kind: str, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Opens (or restores) the filled store in this fresh process, then runs the lookups."""
    result: dict[str, Any] = {"rss_before_open_mb": rss_mb()[0]}
    start, cpu_start = time.perf_counter(), time.process_time()
    store: StreamStore
    if kind == "rocks":
        store = RocksStreamStore.open_alone(root / "filled")
    else:
        store = MemoryStreamStore()
        store.restore(read_chunks(root / "memory.snapshot"))
    result["reopen_s"] = time.perf_counter() - start
    result["reopen_cpu_s"] = time.process_time() - cpu_start
    result["rss_open_mb"] = rss_mb()[0]
    assert store.state().messages == args.messages
    result["lookups"] = lookups(store, args.subjects, args.lookups, args.lookup_seconds)
    result["rss_after_lookups_mb"], result["rss_peak_mb"] = rss_mb()
    store.close()
    return result


def phase_crash(kind: str, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One more durable write to the filled store, then exit without closing it, as a killed node would:
    the index saved at the last clean close no longer matches, so the next open must rebuild it."""
    store = RocksStreamStore.open_alone(root / "filled")
    with store.write_group(sync=True):
        store.store_msg(subject_of(args.messages, args.subjects), None, PAYLOAD)
    print(json.dumps({}), flush=True)
    os._exit(0)


def phase_recover(kind: str, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    start, cpu_start = time.perf_counter(), time.process_time()
    store = RocksStreamStore.open_alone(root / "filled")
    result = {
        "crash_reopen_s": time.perf_counter() - start,
        "crash_reopen_cpu_s": time.process_time() - cpu_start,
    }
    assert store.state().messages == args.messages + 1
    store.close()
    return result


PHASES = {"write": phase_write, "reopen": phase_reopen, "crash": phase_crash, "recover": phase_recover}


def run_phase(phase: str, kind: str, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--phase",
        phase,
        "--stores",
        kind,
        "--dir",
        str(root),
        "--messages",
        str(args.messages),
        "--subjects",
        str(args.subjects),
        "--durable-messages",
        str(args.durable_messages),
        "--lookups",
        str(args.lookups),
        "--lookup-seconds",
        str(args.lookup_seconds),
    ]
    child = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(child.stdout.strip().splitlines()[-1])


def fsync_ms(directory: Path, rounds: int = 50) -> float:
    """Median time of a 4 KB append + fsync on `directory`'s disk: what one durable group pays."""
    times: list[float] = []
    probe = directory / "fsync-probe"
    with probe.open("wb") as out:
        for _ in range(rounds):
            start = time.perf_counter()
            out.write(b"x" * 4096)
            out.flush()
            os.fsync(out.fileno())
            times.append(time.perf_counter() - start)
    probe.unlink()
    return sorted(times)[len(times) // 2] * 1000


def dir_size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def report(rows: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
    print(
        f"\n{args.messages:,} messages of {len(PAYLOAD)} bytes on {args.subjects:,} subjects; "
        f"durable run {args.durable_messages:,} messages; load average at start {args.load}; "
        f"4 KB append + fsync on the store's disk: {args.fsync_ms:.2f} ms (median)"
    )
    print(
        "| store | batched writes of 100, no fsync | durable group commit (fsync per 100) "
        "| last-by-subject lookups | reopen | RSS before open | RSS open | RSS peak |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for kind, row in rows.items():
        name = "RocksStreamStore" if kind == "rocks" else "MemoryStreamStore"
        reopen = f"{row['reopen_s']:.1f} s ({row['reopen_cpu_s']:.1f} s CPU)" + (
            "" if kind == "rocks" else " restore"
        )
        print(
            f"| {name} | {row['batched']['per_s']:,.0f} msgs/s | {row['durable']['per_s']:,.0f} msgs/s "
            f"| {row['lookups']['per_s']:,.0f} /s | {reopen} | {row['rss_before_open_mb']:.0f} MB "
            f"| {row['rss_open_mb']:.0f} MB | {row['rss_peak_mb']:.0f} MB |"
        )
    print("\nper CPU second (the machine is shared; these move less than wall-clock rates):")
    for kind, row in rows.items():
        print(
            f"  {kind:<7} batched {row['batched']['per_cpu_s']:>10,.0f} msgs/s  "
            f"durable {row['durable']['per_cpu_s']:>10,.0f} msgs/s  "
            f"lookups {row['lookups']['per_cpu_s']:>10,.0f} /s"
        )
    if "rocks" in rows:
        rocks = rows["rocks"]
        print(f"  RocksDB directory of the filled store: {rocks['disk_mb']:.0f} MB")
        print(
            f"  RocksStreamStore reopen after a crash (index rebuilt from every record): "
            f"{rocks['crash_reopen_s']:.1f} s ({rocks['crash_reopen_cpu_s']:.1f} s CPU)"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--subjects", type=int, default=0, help="default: a tenth of --messages")
    parser.add_argument("--durable-messages", type=int, default=100_000)
    parser.add_argument("--lookups", type=int, default=500_000, help="at most this many lookups")
    parser.add_argument("--lookup-seconds", type=float, default=10.0, help="and for at most this long")
    parser.add_argument("--stores", default="rocks,memory", help="comma-separated: rocks, memory")
    parser.add_argument("--dir", type=Path, default=None, help="parent of the RocksDB directories")
    parser.add_argument("--json", type=Path, default=None, help="also write the raw figures here")
    parser.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.subjects = args.subjects or max(1, args.messages // 10)
    kinds = [kind.strip() for kind in args.stores.split(",") if kind.strip()]
    if args.phase:
        print(json.dumps(PHASES[args.phase](kinds[0], args.dir, args)))
        return 0

    args.load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    scratch = Path(tempfile.mkdtemp(prefix="storage-bench-fsync-", dir=args.dir))
    try:
        args.fsync_ms = fsync_ms(scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    rows: dict[str, dict[str, Any]] = {}
    for kind in kinds:
        root = Path(tempfile.mkdtemp(prefix=f"storage-bench-{kind}-", dir=args.dir))
        try:
            print(f"{kind}: writing ...", flush=True)
            rows[kind] = run_phase("write", kind, root, args)
            if kind == "rocks":
                rows[kind]["disk_mb"] = dir_size_mb(root / "filled")
            print(f"{kind}: reopening and looking up ...", flush=True)
            rows[kind].update(run_phase("reopen", kind, root, args))
            if kind == "rocks":
                print(f"{kind}: crashing and reopening ...", flush=True)
                run_phase("crash", kind, root, args)
                rows[kind].update(run_phase("recover", kind, root, args))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    report(rows, args)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
