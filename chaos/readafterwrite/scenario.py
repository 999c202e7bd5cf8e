"""The whole demonstration: streams, the lagged nodes, one workload round per injected latency.

Against a faultable cluster (its own, or a running one with `--attach`): an
R3 stream with allow_direct and a mirror_direct mirror of it; one follower
and the mirror's node get the latency on every link to and from them; after
each round the toxics go and every responder must catch up before the next.

The demo's own cluster runs the nodes' defaults: a Direct Get goes to a
responder chosen at random among the replicas and the mirror, as nats-server
spreads them. An attached cluster may use any policy. Either way each read is
counted for the node that answered it (its `Jetraft-Node` header), and
`run.local_answer_fraction` says how many were answered by the node they were
sent to (about 1 with `--direct-get-policy local-first`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import nats
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.api import StreamConfig, StreamSource
from nats.js.errors import APIError, NotFoundError

from chaos.readafterwrite.faults import LinkFaults
from chaos.readafterwrite.stats import ReadSample, ResultRow, local_answer_fraction, summarize
from chaos.readafterwrite.workload import (
    Endpoint,
    ReadAfterWrite,
    WorkloadSettings,
    connect_endpoint,
    wait_caught_up,
)
from cluster.runtime.workers import node_of

Progress = Callable[[str], None]


@dataclass(slots=True)
class DemoSettings:
    lags: list[int] = field(default_factory=lambda: [0, 50, 200, 1000])
    duration: float = 8.0  # seconds per lag
    max_writes: int = 2_000  # per lag
    warmup: float = 1.0  # seconds of each round whose samples are dropped
    keys: int = 16
    workers: int = 4
    jitter_ms: int = 0
    stream: str = "RAW"
    mirror: str = "RAW_MIRROR"
    subject_prefix: str = "raw"
    request_timeout: float = 2.0
    catch_up_timeout: float = 30.0


@dataclass(slots=True)
class Layout:
    """Where the stream lives and whose links carry the injected latency."""

    leader: str
    followers: list[str]
    mirror_node: str
    lagged: list[str]

    @property
    def responders(self) -> list[str]:
        """Every node answering the stream's Direct Gets: its replicas and the mirror_direct mirror."""
        return sorted({self.leader, *self.followers, self.mirror_node})


@dataclass(slots=True)
class RoundInfo:
    lag_ms: int
    writes: int
    publish_errors: int
    proxies_lagged: list[str]
    caught_up_after: dict[str, bool]


@dataclass(slots=True)
class DemoResult:
    rows: list[ResultRow]
    layout: Layout
    rounds: list[RoundInfo]
    samples: list[ReadSample]

    def run_info(self, settings: DemoSettings, servers: list[str], toxiproxy_url: str) -> dict[str, Any]:
        return {
            "settings": asdict(settings),
            "servers": servers,
            "toxiproxy": toxiproxy_url,
            "layout": asdict(self.layout),
            "rounds": [asdict(r) for r in self.rounds],
            "lag_applies_to": "each direction of every proxy to and from the lagged nodes",
            "local_answer_fraction": local_answer_fraction(self.samples),
        }


NO_SUITABLE_PEERS = 10005


async def add_stream_when_placed(
    js: nats.js.JetStreamContext, config: StreamConfig, timeout: float = 30.0
) -> nats.js.api.StreamInfo:
    """`add_stream`, asked again while the cluster cannot place it yet.

    Right after a cluster starts (or on a loaded machine) the meta leader may not have heard from
    every node, and answers "no suitable peers" (10005) or not at all; both pass.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await js.add_stream(config)
        except (APIError, NatsTimeoutError) as exc:
            retryable = isinstance(exc, NatsTimeoutError) or exc.err_code == NO_SUITABLE_PEERS
            if not retryable or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.5)


async def create_streams(js: nats.js.JetStreamContext, settings: DemoSettings) -> Layout:
    """Fresh R3 stream and mirror (earlier runs' copies are deleted); where they were placed."""
    for name in (settings.mirror, settings.stream):
        with contextlib.suppress(NotFoundError):
            await js.delete_stream(name)
    info = await add_stream_when_placed(
        js,
        StreamConfig(
            name=settings.stream,
            subjects=[f"{settings.subject_prefix}.>"],
            num_replicas=3,
            allow_direct=True,
        ),
    )
    mirror = await add_stream_when_placed(
        js,
        StreamConfig(
            name=settings.mirror,
            mirror=StreamSource(name=settings.stream),
            mirror_direct=True,
            num_replicas=1,
        ),
    )
    assert info.cluster is not None and mirror.cluster is not None
    # nodes (machines), whose links take the latency: a peer may be one worker of a node (`n2/w1`)
    leader = node_of(info.cluster.leader or "")
    followers = sorted(node_of(peer.name) for peer in info.cluster.replicas or [])
    mirror_node = node_of(mirror.cluster.leader or "")
    if not leader or not followers or not mirror_node:
        raise RuntimeError(f"stream not placed as an R3 with a mirror: {info.cluster}, {mirror.cluster}")
    return Layout(
        leader=leader, followers=followers, mirror_node=mirror_node, lagged=[followers[0], mirror_node]
    )


async def _current_leader(js: nats.js.JetStreamContext, stream: str, fallback: str) -> str:
    info = await js.stream_info(stream)
    return node_of((info.cluster.leader if info.cluster else None) or fallback)


async def run_read_after_write(
    settings: DemoSettings, servers: list[str], toxiproxy_url: str, progress: Progress = lambda _: None
) -> DemoResult:
    endpoints: list[Endpoint] = [await connect_endpoint(url) for url in servers]
    faults = LinkFaults(toxiproxy_url)
    try:
        admin = endpoints[0].nc.jetstream(timeout=10)
        layout = await create_streams(admin, settings)
        progress(
            f"stream {settings.stream}: leader {layout.leader}, followers {', '.join(layout.followers)}; "
            f"mirror {settings.mirror} on {layout.mirror_node}; lagging {', '.join(layout.lagged)}"
        )
        by_node = {endpoint.node: endpoint for endpoint in endpoints}
        if layout.leader not in by_node:
            raise RuntimeError(
                f"no --servers URL for the stream leader {layout.leader} (have {sorted(by_node)})"
            )
        workload = ReadAfterWrite(
            WorkloadSettings(
                stream=settings.stream,
                subject_prefix=settings.subject_prefix,
                keys=settings.keys,
                workers=settings.workers,
                request_timeout=settings.request_timeout,
            ),
            writer=by_node[layout.leader],
            endpoints=endpoints,
        )
        responders = [endpoint for endpoint in endpoints if endpoint.node in layout.responders]
        # one write every responder has applied, so each has joined the Direct Get group before round one
        first = await admin.publish(f"{settings.subject_prefix}.warmup", b"")
        await wait_caught_up(responders, settings.stream, first.seq, settings.catch_up_timeout)

        samples: list[ReadSample] = []
        rounds: list[RoundInfo] = []
        for lag_ms in settings.lags:
            touched: list[str] = []
            if lag_ms > 0:
                touched = await asyncio.to_thread(
                    faults.add_latency, layout.lagged, lag_ms, settings.jitter_ms
                )
            leader = await _current_leader(admin, settings.stream, layout.leader)
            try:
                result = await workload.run(
                    lag_ms, leader, settings.duration, settings.max_writes, warmup=settings.warmup
                )
            finally:
                await asyncio.to_thread(faults.remove_latency, layout.lagged)
            caught_up = await wait_caught_up(
                responders, settings.stream, result.last_acked_seq or first.seq, settings.catch_up_timeout
            )
            samples += result.samples
            rounds.append(RoundInfo(lag_ms, result.writes, result.publish_errors, touched, caught_up))
            progress(f"lag {lag_ms} ms: {result.writes} writes, {len(result.samples)} reads recorded")
        for name in (settings.mirror, settings.stream):
            with contextlib.suppress(NotFoundError):
                await admin.delete_stream(name)
        return DemoResult(summarize(samples, layout.lagged), layout, rounds, samples)
    finally:
        for endpoint in endpoints:
            with contextlib.suppress(Exception):
                await endpoint.nc.close()
