"""CPU cost of the JetStream model (cluster/): the per-request work a node does besides I/O.

    .venv/bin/python bench/jsmodel_bench.py [--messages 20000] [--seconds 2] [--profile]

Figures, each on a MemoryStreamStore so no disk is involved:
- publish path: `prepare_publish` (leader) + entry encode + `StreamStateMachine.apply`
  (every replica), in apply batches of 64, messages/s;
- Direct Get last_by_subj (subject-appended form): parse + answer, requests/s;
- Direct Get batch of 10,000 messages: messages/s;
- STREAM.MSG.GET by last_by_subj: requests/s.

Each timed loop stops after `--seconds` or its count, whichever comes first.
The machine is shared (2 cores), so figures move between runs (the CPU-time rate
moves less); with
`--profile` the publish and Direct Get loops run under pyinstrument.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from cluster.direct_get.answer import Responder, ResponderRole, answer_direct_get
from cluster.direct_get.request import DirectGetRequest, parse_direct_get
from cluster.stream.config import StreamConfig
from cluster.stream.config_check import normalize_stream_config
from cluster.stream.machine import StreamStateMachine
from cluster.stream.msg_get import answer_msg_get
from cluster.stream.publish import Accepted, prepare_publish
from raft.types import Entry
from storage.memory import MemoryStreamStore

KEYS = 1000
PAYLOAD = b"v" * 128


def timed(label: str, unit: str, count: int, seconds: float, step: Callable[[int], int]) -> None:
    """Run `step(i)` (returning how many units it did) until `count` units or `seconds` pass."""
    done = 0
    calls = 0
    start, cpu_start = time.perf_counter(), time.process_time()
    deadline = start + seconds
    while done < count and time.perf_counter() < deadline:
        done += step(calls)
        calls += 1
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    # per CPU second too: the machine is shared, and wall time includes other people's work
    print(
        f"{label:<52} {done / elapsed:>10,.0f} {unit}/s wall {done / max(cpu, 1e-9):>10,.0f} {unit}/s CPU"
        f"   ({done:,} in {elapsed:.2f} s)"
    )


def bench_publish(messages: int, seconds: float, per_subject_limit: int) -> StreamStateMachine:
    cfg = normalize_stream_config(
        StreamConfig(name="KV_b", subjects=("$KV.b.>",), max_msgs_per_subject=per_subject_limit)
    )
    machine = StreamStateMachine(MemoryStreamStore(), cfg, sync_writes=False)
    index = 0
    header = b"NATS/1.0\r\nNats-Msg-Id: %d\r\n\r\n"

    def step(call: int) -> int:
        nonlocal index
        entries = []
        for i in range(64):
            n = call * 64 + i
            decision = prepare_publish(
                machine.config, f"$KV.b.k{n % KEYS}", header % n, PAYLOAD, time.time_ns(), machine
            )
            assert isinstance(decision, Accepted)
            index += 1
            entries.append(Entry(term=1, index=index, data=decision.entry.encode()))
        machine.apply(entries)
        return 64

    label = f"publish, max_msgs_per_subject {per_subject_limit}: prepare+apply"
    timed(label, "msgs", messages, seconds, step)
    return machine


def bench_direct_get(machine: StreamStateMachine, requests: int, seconds: float) -> None:
    responder = Responder("n1", ResponderRole.FOLLOWER, "KV_b")

    def step(call: int) -> int:
        request = parse_direct_get(b"", f"$KV.b.k{call % KEYS}")
        assert isinstance(request, DirectGetRequest)
        frames = answer_direct_get(request, machine.store, responder, machine.last_seq)
        assert frames[0][0] is not None
        return 1

    timed("Direct Get last_by_subj (subject appended)", "req", requests, seconds, step)


def bench_batch(seconds: float) -> None:
    store = MemoryStreamStore()
    for i in range(10_000):
        store.store_msg(f"batch.{i % 100}", None, PAYLOAD, 1_000 + i)
    responder = Responder("n1", ResponderRole.LEADER, "BATCH")
    request = DirectGetRequest(seq=1, batch=10_000)

    def step(_: int) -> int:
        frames = answer_direct_get(request, store, responder)
        return len(frames) - 1

    timed("Direct Get batch of 10,000", "msgs", 50_000, seconds, step)


def bench_msg_get(machine: StreamStateMachine, requests: int, seconds: float) -> None:
    def step(call: int) -> int:
        answer_msg_get(b'{"last_by_subj":"$KV.b.k%d"}' % (call % KEYS), machine.store)
        return 1

    timed("STREAM.MSG.GET last_by_subj", "req", requests, seconds, step)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument(
        "--profile", action="store_true", help="profile publish and Direct Get with pyinstrument"
    )
    args = parser.parse_args()
    profiler = None
    if args.profile:
        from pyinstrument import Profiler

        profiler = Profiler()
        profiler.start()
    # a limits stream (no per-subject cap) isolates cluster/'s own cost; the KV-shaped
    # run adds the store's per-subject trimming
    machine = bench_publish(args.messages, args.seconds, per_subject_limit=-1)
    bench_publish(args.messages, args.seconds, per_subject_limit=1)
    bench_direct_get(machine, args.messages, args.seconds)
    if profiler is not None:
        profiler.stop()
        print(profiler.output_text(unicode=False, color=False, show_all=False))
    bench_batch(args.seconds)
    bench_msg_get(machine, args.messages, args.seconds)


if __name__ == "__main__":
    main()
