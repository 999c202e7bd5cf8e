"""Gateway throughput against nats-server 2.15.1, same client (nats-py), same run.

    .venv/bin/python bench/gateway_bench.py [--messages 100000] [--size 128] [--seconds 5] [--nodes 3]

One 3-node cluster per server (`--nodes`). Figures: core publish/subscribe
messages per second from one publisher to one subscriber, and sequential
request/reply round trips per second with their p50/p99 latency, each with
both clients on the same node and with them on two different nodes.
jetraft runs as `python -m gateway.standalone` processes (uvloop), the
reference as `.venv/bin/nats-server`. Everything is bounded: a pub/sub run
that loses messages reports what arrived when its time ran out.

The machine is shared and has 2 cores (the client and three servers compete
for them), so figures move by 10-20% between runs;
compare the two servers within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import nats
from nats.aio.client import __version__ as NATS_PY_VERSION

from gateway.local_nodes import NodeProcess, await_interest, gateway_cluster, nats_server_cluster

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


async def measure(factory: ClusterFactory, size: int, args: argparse.Namespace) -> dict[str, float]:
    """Every scenario on one cluster: same node is n1 to n1, across nodes n1 to the last node."""
    figures: dict[str, float] = {}
    async with factory(size) as nodes:
        first, last = nodes[0], nodes[-1]
        for label, target in (("same", first), ("cross", last)):
            rate, received = await pubsub_rate(
                first.url, target.url, args.messages, args.size, args.seconds * 4
            )
            if received < args.messages:
                print(f"  (pub/sub {label}: only {received} of {args.messages} messages arrived)", flush=True)
            figures[f"pubsub_{label}"] = rate
            rr = await request_latency(first.url, target.url, args.seconds, args.size)
            figures[f"rr_{label}"] = rr["rate"]
            figures[f"rr_{label}_p50"] = rr["p50_us"]
            figures[f"rr_{label}_p99"] = rr["p99_us"]
    return figures


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000, help="messages per pub/sub run")
    parser.add_argument("--size", type=int, default=128, help="payload bytes")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each request/reply run")
    parser.add_argument(
        "--nodes", type=int, default=3, help="cluster size (at least 2 for the cross-node figures)"
    )
    parser.add_argument("--only", choices=("nats-server", "jetraft"), help="measure one server only")
    args = parser.parse_args()
    if args.nodes < 2:
        parser.error("--nodes must be at least 2")

    servers: dict[str, ClusterFactory] = {"nats-server": nats_server_cluster, "jetraft": jetraft_nodes}
    results: dict[str, dict[str, float]] = {}
    for name, factory in servers.items():
        if args.only and name != args.only:
            continue
        print(f"measuring {name}, {args.nodes} nodes...", flush=True)
        results[name] = await measure(factory, args.nodes, args)
        print("  " + ", ".join(f"{key}={value:,.0f}" for key, value in results[name].items()), flush=True)
    if args.only:
        return

    print()
    print(f"nats-py {NATS_PY_VERSION}, {args.nodes}-node clusters, {args.size}-byte payloads, ", end="")
    print(f"{args.messages} pub/sub messages, {args.seconds:g} s per request/reply run")
    print(f"{'scenario':<40}{'nats-server':>13}{'jetraft':>13}{'ratio':>8}")
    for key, label in SCENARIOS:
        ref, ours = results["nats-server"][key], results["jetraft"][key]
        print(f"{label:<40}{ref:>13,.0f}{ours:>13,.0f}{ours / ref:>8.2f}")


if __name__ == "__main__":
    asyncio.run(main())
