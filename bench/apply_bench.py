"""CPU per applied entry on one replica: a RocksStreamStore and a StreamStateMachine, in-process.

    .venv/bin/python bench/apply_bench.py [--entries 20000] [--batch 1,16,64] [--rounds 5]

What every replica of an R3 stream runs for every message (issue 20): committed Raft entries
handed to `StreamReplica.apply`'s machine in runs, as the driver hands them. Two shapes, as
jsbench sends them: `pub_async` (a plain PUB of 128 bytes on one subject into a limits stream)
and `kv_put` (nats-py's KeyValue.put: 128 bytes on `$KV.BENCH.<key>`, one of 10,000 keys at
random, into a history-1 bucket as nats-py creates it, after a fill of every key). The figure is
`time.process_time` per entry over `--entries` entries, the best of `--rounds` fresh stores.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cluster.stream.config import stream_config_from_json
from cluster.stream.config_check import normalize_stream_config
from cluster.stream.entries import StoreMsg
from cluster.stream.machine import Stored, StreamStateMachine
from raft.types import Entry
from storage.rocks import RocksStreamStore

PAYLOAD = b"x" * 128
KEYS = 10_000

PUB_ASYNC = {"name": "BENCH_PUBASYNC", "subjects": ["bench.async.>"], "num_replicas": 3}
# as nats-py's create_key_value(history=1, direct=True) asks for it (tests/traces 10-kv.txt)
KV = {
    "name": "KV_BENCH",
    "subjects": ["$KV.BENCH.>"],
    "max_msgs_per_subject": 1,
    "discard": "new",
    "num_replicas": 3,
    "duplicate_window": 120_000_000_000,
    "deny_delete": True,
    "allow_rollup_hdrs": True,
    "allow_direct": True,
    "allow_msg_ttl": True,
}


def entries(subjects: list[str], first_index: int, start_ns: int) -> list[Entry]:
    return [
        Entry(term=1, index=first_index + i, data=StoreMsg(subject, b"", PAYLOAD, start_ns + i).encode())
        for i, subject in enumerate(subjects)
    ]


def run(
    shape: str, count: int, batch: int, workdir: Path, clock: Callable[[], float] = time.process_time
) -> float:
    """us of CPU per entry applying `count` entries in runs of `batch`, by `clock`."""
    cfg = normalize_stream_config(stream_config_from_json(KV if shape == "kv_put" else PUB_ASYNC))
    store = RocksStreamStore.open_alone(workdir / f"{shape}-{batch}-{time.monotonic_ns()}")
    machine = StreamStateMachine(store, cfg, sync_writes=False)
    rng = random.Random(7)
    now = time.time_ns()
    index = 1
    if shape == "kv_put":
        fill = entries([f"$KV.BENCH.k{i:05d}" for i in range(KEYS)], index, now)
        for at in range(0, len(fill), 100):
            machine.apply(fill[at : at + 100])
        index += len(fill)
        subjects = [f"$KV.BENCH.k{rng.randrange(KEYS):05d}" for _ in range(count)]
    else:
        subjects = ["bench.async.a"] * count
    work = entries(subjects, index, now + KEYS)
    runs = [work[at : at + batch] for at in range(0, len(work), batch)]
    started = clock()
    for run_ in runs:
        results = machine.apply(run_)
    spent = clock() - started
    assert isinstance(results[-1], Stored), results[-1]
    store.close()
    return spent / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--batch", default="1,16,64")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shapes", default="pub_async,kv_put")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        for shape in args.shapes.split(","):
            for batch in (int(b) for b in args.batch.split(",")):
                best = min(run(shape, args.entries, batch, Path(tmp)) for _ in range(args.rounds))
                print(f"{shape:10s} batch {batch:3d}: {best:6.2f} us/entry", flush=True)


if __name__ == "__main__":
    main()
