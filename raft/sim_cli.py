"""`jetraft sim`: run the deterministic Raft simulator over a range of seeds.

Prints one summary line `seeds=N violations=V ...`, a `FAIL` line per failing
seed with the command that replays it, and exits 1 if any seed failed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

from raft.sim.simulation import SimOptions, SimResult, run_seed

SUMMARY_FIELDS = (
    "committed",
    "elections",
    "crashes",
    "restarts",
    "partitions",
    "conf_changes",
    "transfers",
    "reads_checked",
    "lease_reads",
    "snapshots_installed",
    "quiesced_ticks",
    "liveness_reports",
    "disks_lost",
    "recoveries",
    "messages",
    "dropped",
)


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="jetraft sim", description=__doc__)
    parser.add_argument("--seeds", type=int, default=100, help="how many seeds to run")
    parser.add_argument("--first-seed", type=int, default=1, help="the first seed")
    parser.add_argument("--nodes", type=int, choices=(3, 5), default=3, help="initial voters")
    parser.add_argument("--learners", type=int, default=0, help="initial learners (l1, l2, ...)")
    parser.add_argument("--steps", type=int, default=SimOptions().steps, help="chaos ticks per seed")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--trace", action="store_true", help="print the event trace of failing seeds")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.steps < 0 or args.jobs < 1:
        parser.error("--seeds and --jobs must be positive, --steps not negative")
    return args


def _run(seed: int, options: SimOptions) -> SimResult:
    return run_seed(seed, options)


def _results(seeds: range, options: SimOptions, jobs: int) -> Iterator[SimResult]:
    if jobs == 1:
        for seed in seeds:
            yield run_seed(seed, options)
        return
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        yield from pool.map(_run, seeds, [options] * len(seeds), chunksize=8)


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    options = SimOptions(nodes=args.nodes, learners=args.learners, steps=args.steps, trace=args.trace)
    started = time.monotonic()
    totals: Counter[str] = Counter()
    failures: list[SimResult] = []
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    for result in _results(seeds, options, args.jobs):
        totals.update(result.stats)
        if result.violation is not None:
            failures.append(result)
            print(f"FAIL seed={result.seed} tick={result.step}: {result.violation}", flush=True)
            learners = f" --learners {args.learners}" if args.learners else ""
            print(
                f"  replay: jetraft sim --seeds 1 --first-seed {result.seed} --nodes {args.nodes}{learners} "
                f"--steps {args.steps} --trace",
                flush=True,
            )
            if args.trace:
                print("\n".join(result.trace[-200:]))
    elapsed = time.monotonic() - started
    fields = " ".join(f"{name}={totals[name]}" for name in SUMMARY_FIELDS)
    print(f"seeds={len(seeds)} violations={len(failures)} {fields} elapsed={elapsed:.1f}s")
    if failures:
        print("failing seeds: " + " ".join(str(r.seed) for r in failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
