"""Gateway throughput against nats-server 2.15.1, same client (nats-py), same run.

    .venv/bin/python bench/gateway_bench.py [--messages 100000] [--size 128] [--seconds 5] [--nodes 3] [--rounds 3]

One cluster per server (`--nodes`, 3 by default), both up for the whole
run. Figures: core publish/subscribe messages per second from one publisher
to one subscriber, and sequential request/reply round trips per second with
their p50/p99 latency, each with both clients on the same node (n1 to n1)
and with them on two different nodes (n1 to the last node). jetraft runs as
`python -m gateway.standalone` processes (uvloop), the reference as
`.venv/bin/nats-server`. Everything is bounded: a pub/sub run that loses
messages reports what arrived when its time ran out.

The machine is shared and has 2 cores (the client and the servers compete
for them), and other work on it comes and goes within seconds. So the two
servers are measured interleaved: each round runs every scenario on one
server and right after on the other (the order swapped every round), and
the table shows each server's median over the rounds and the median of the
per-round ratios. The load average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import nats
from nats.aio.client import __version__ as NATS_PY_VERSION

from local.gateway_nodes import NodeProcess, await_interest, gateway_cluster, nats_server_cluster

ClusterFactory = Callable[[int], contextlib.AbstractAsyncContextManager[list[NodeProcess]]]


async def pubsub_rate(pub_url: str, sub_url: str, count: int, size: int, timeout: float) -> tuple[float, int]:
    """Messages/s from one publisher to one subscriber, and how many arrived."""
    publisher = await nats.connect(pub_url)
    subscriber = await nats.connect(sub_url)
    received = 0
    done = asyncio.Event()

    async def on_message(_msg: Any) -> None:
        nonlocal received
        received += 1
        if received == count:
            done.set()

    try:
        await subscriber.subscribe("bench.pubsub", cb=on_message, pending_msgs_limit=count + 1)
        await await_interest(publisher, subscriber, "bench.pubsub.probe")
        payload = b"x" * size
        start = time.perf_counter()
        for _ in range(count):
            await publisher.publish("bench.pubsub", payload)
        await publisher.flush()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), timeout)
        elapsed = time.perf_counter() - start
        return received / elapsed, received
    finally:
        await publisher.close()
        await subscriber.close()


async def request_latency(req_url: str, rep_url: str, seconds: float, size: int) -> dict[str, float]:
    """Sequential request/reply: round trips per second and latency percentiles in microseconds."""
    requester = await nats.connect(req_url)
    responder = await nats.connect(rep_url)

    async def on_request(msg: Any) -> None:
        await msg.respond(msg.data)

    try:
        await responder.subscribe("bench.rr", cb=on_request)
        await await_interest(requester, responder, "bench.rr.probe")
        payload = b"x" * size
        latencies: list[float] = []
        start = time.perf_counter()
        deadline = start + seconds
        while (now := time.perf_counter()) < deadline:
            await requester.request("bench.rr", payload, timeout=5)
            latencies.append(time.perf_counter() - now)
        elapsed = time.perf_counter() - start
        latencies.sort()

        def percentile(fraction: float) -> float:
            return latencies[min(len(latencies) - 1, int(fraction * len(latencies)))] * 1e6

        return {"rate": len(latencies) / elapsed, "p50_us": percentile(0.5), "p99_us": percentile(0.99)}
    finally:
        await requester.close()
        await responder.close()


@contextlib.asynccontextmanager
async def jetraft_nodes(size: int) -> AsyncIterator[list[NodeProcess]]:
    async with gateway_cluster([f"n{i}" for i in range(1, size + 1)]) as nodes:
        yield nodes


SCENARIOS = (
    ("pubsub_same", "pub/sub msgs/s, same node"),
    ("pubsub_cross", "pub/sub msgs/s, across nodes"),
    ("rr_same", "req/reply round trips/s, same node"),
    ("rr_cross", "req/reply round trips/s, across nodes"),
    ("rr_same_p50", "req/reply p50 us, same node"),
    ("rr_cross_p50", "req/reply p50 us, across nodes"),
    ("rr_cross_p99", "req/reply p99 us, across nodes"),
)
SERVERS: dict[str, ClusterFactory] = {"nats-server": nats_server_cluster, "jetraft": jetraft_nodes}


async def measure_once(nodes: list[NodeProcess], label: str, args: argparse.Namespace) -> dict[str, float]:
    """One round of one placement (`same`: n1 to n1, `cross`: n1 to the last node) on one cluster."""
    first = nodes[0]
    target = first if label == "same" else nodes[-1]
    rate, received = await pubsub_rate(first.url, target.url, args.messages, args.size, args.seconds * 4)
    if received < args.messages:
        print(f"  (pub/sub {label}: only {received} of {args.messages} messages arrived)", flush=True)
    rr = await request_latency(first.url, target.url, args.seconds, args.size)
    return {
        f"pubsub_{label}": rate,
        f"rr_{label}": rr["rate"],
        f"rr_{label}_p50": rr["p50_us"],
        f"rr_{label}_p99": rr["p99_us"],
    }


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000, help="messages per pub/sub run")
    parser.add_argument("--size", type=int, default=128, help="payload bytes")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each request/reply run")
    parser.add_argument(
        "--nodes", type=int, default=3, help="cluster size (at least 2 for the cross-node figures)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (medians are shown)")
    parser.add_argument("--only", choices=tuple(SERVERS), help="measure one server only")
    args = parser.parse_args()
    if args.nodes < 2:
        parser.error("--nodes must be at least 2")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")

    names = [name for name in SERVERS if not args.only or name == args.only]
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    print(f"load average at start: {load_average()}", flush=True)
    async with contextlib.AsyncExitStack() as stack:
        clusters = {name: await stack.enter_async_context(SERVERS[name](args.nodes)) for name in names}
        for round_index in range(args.rounds):
            order = names if round_index % 2 == 0 else names[::-1]
            figures: dict[str, dict[str, float]] = {name: {} for name in names}
            for label in ("same", "cross"):
                for name in order:
                    figures[name].update(await measure_once(clusters[name], label, args))
            for name in names:
                rounds[name].append(figures[name])
                shown = ", ".join(f"{key}={value:,.0f}" for key, value in figures[name].items())
                print(f"round {round_index + 1} {name}: {shown}", flush=True)
    print(f"load average at end: {load_average()}")
    if args.only:
        return

    print()
    print(f"nats-py {NATS_PY_VERSION}, {args.nodes}-node clusters, {args.size}-byte payloads, ", end="")
    print(f"{args.messages} pub/sub messages, {args.seconds:g} s per request/reply run, ", end="")
    print(f"medians of {args.rounds} interleaved rounds")
    print(f"{'scenario':<40}{'nats-server':>13}{'jetraft':>13}{'ratio':>8}{'ratios per round':>24}")
    for key, label in SCENARIOS:
        ref = statistics.median(r[key] for r in rounds["nats-server"])
        ours = statistics.median(r[key] for r in rounds["jetraft"])
        ratios = [o[key] / r[key] for r, o in zip(rounds["nats-server"], rounds["jetraft"], strict=True)]
        per_round = " ".join(f"{ratio:.2f}" for ratio in ratios)
        print(f"{label:<40}{ref:>13,.0f}{ours:>13,.0f}{statistics.median(ratios):>8.2f}{per_round:>24}")


if __name__ == "__main__":
    asyncio.run(main())
