"""Read-after-write under injected faults, on a real faultable jetraft cluster (3 nodes and a mirror node).

Every node-to-node link goes through its own Toxiproxy proxy (`nX-to-nY`), and
clients read with `local-first`, so a connection to a node is answered by
that node's own replica or mirror. The demo's command line, attached to a
`random`-policy cluster and on its own cluster, is in test_demo_cli.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator

import nats
import pytest
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.api import StreamConfig
from nats.js.errors import APIError, NoStreamResponseError, NotFoundError

from chaos.readafterwrite.faults import LinkFaults, link_ends
from chaos.readafterwrite.scenario import DemoSettings, create_streams
from chaos.readafterwrite.stats import Outcome, ReadPath, ReadSample
from chaos.readafterwrite.workload import (
    Endpoint,
    ReadAfterWrite,
    WorkloadSettings,
    connect_endpoint,
    wait_caught_up,
)
from cluster.runtime.workers import node_of
from local.cluster import LocalCluster, faultable_cluster, node_available, proxy_name
from tests.chaos.node_metrics import scrape, value

pytestmark = pytest.mark.skipif(
    not node_available(), reason="needs a runnable `jetraft node` (cluster.node.command)"
)

_API_FAILURES = (NatsTimeoutError, NoRespondersError, NoStreamResponseError, APIError, asyncio.TimeoutError)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    # local-first, an option: a connection to a node is answered by that node's own copy
    local_reads = ("--direct-get-policy", "local-first")
    with faultable_cluster(tmp_path_factory.mktemp("faultable"), extra_args=local_reads) as running:
        assert running.toxiproxy_url is not None
        yield running


@pytest.fixture
def faults(cluster: LocalCluster) -> Iterator[LinkFaults]:
    assert cluster.toxiproxy_url is not None
    link_faults = LinkFaults(cluster.toxiproxy_url)
    try:
        yield link_faults
    finally:
        link_faults.client.reset()  # every proxy enabled, every toxic gone, whatever the test did


@pytest.fixture
async def endpoints(cluster: LocalCluster) -> AsyncIterator[dict[str, Endpoint]]:
    connected = [await connect_endpoint(url) for url in cluster.client_urls]
    try:
        yield {endpoint.node: endpoint for endpoint in connected}
    finally:
        for endpoint in connected:
            await endpoint.nc.close()


def test_cluster_links_all_go_through_named_proxies(cluster: LocalCluster, faults: LinkFaults) -> None:
    # one proxy from each node to each member of every other node: `n1-to-n2`, or with several workers
    # per node one to each worker (`n1-to-n2.w1`), listening on the ports after the one dialled
    specs = cluster.specs
    expected = [proxy_name(a.name, member) for a in specs for b in specs if a is not b for member in b.members]
    assert faults.link_names() == sorted(expected)
    proxies = faults.client.proxies()
    for spec in specs:
        for peer, address in spec.dial.items():
            target = cluster.spec(peer)
            host, port = address.rsplit(":", 1)
            for index, member in enumerate(target.members):
                proxy = proxies[proxy_name(spec.name, member)]
                assert proxy.listen == f"{host}:{int(port) + index}"
                assert proxy.upstream == f"127.0.0.1:{target.cluster_port + index}"


def _of(samples: list[ReadSample], path: ReadPath, responder: str | None = None) -> list[ReadSample]:
    return [s for s in samples if s.path is path and (responder is None or s.responder == responder)]


def _reading(http_url: str, name: str, labels: dict[str, str]) -> Callable[[], float]:
    return lambda: value(scrape(http_url), name, **labels)


async def _highest(read: Callable[[], float], stop: asyncio.Event, every: float = 0.2) -> float:
    """The largest value `read` (a scrape of another process) returned until `stop` is set."""
    highest = 0.0
    while not stop.is_set():
        highest = max(highest, await asyncio.to_thread(read))
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), every)
    return highest


async def test_lagged_follower_and_mirror_serve_stale_direct_gets_while_coherent_reads_stay_fresh(
    cluster: LocalCluster, faults: LinkFaults, endpoints: dict[str, Endpoint]
) -> None:
    settings = DemoSettings(stream="LAGT", mirror="LAGT_M", subject_prefix="lagt")
    any_endpoint = next(iter(endpoints.values()))
    layout = await create_streams(any_endpoint.nc.jetstream(timeout=10), settings)
    follower, mirror_node = layout.lagged
    workload = ReadAfterWrite(
        WorkloadSettings(stream="LAGT", subject_prefix="lagt", keys=8, workers=4),
        writer=endpoints[layout.leader],
        endpoints=list(endpoints.values()),
    )
    warm = await workload.run(0, layout.leader, duration=5, max_writes=8)
    assert warm.writes == 8
    assert all((await wait_caught_up(list(endpoints.values()), "LAGT", warm.last_acked_seq, 20)).values())

    touched = {link_ends(name) for name in faults.add_latency(layout.lagged, 300)}
    assert (layout.leader, follower) in touched and (follower, layout.leader) in touched
    assert (mirror_node, layout.leader) in touched
    # the metrics name members: the node, or the worker of it that holds the replica or the mirror
    info_js = any_endpoint.nc.jetstream()
    origin, copy = await info_js.stream_info("LAGT"), await info_js.stream_info("LAGT_M")
    assert origin.cluster is not None and copy.cluster is not None and copy.cluster.leader
    follower_member = next(p.name for p in origin.cluster.replicas or [] if node_of(p.name) == follower)
    mirror_member = copy.cluster.leader
    # the replica lag metrics, scraped while the lag lasts: the follower's own staleness in seconds, the
    # leader's count of entries the follower is behind, and the mirror's staleness behind its origin
    # (from the freshness each fetch answer carries over the lagged link)
    follower_http, leader_http = cluster.spec(follower).http_url, cluster.spec(layout.leader).http_url
    mirror_http = cluster.spec(mirror_node).http_url
    metric = "jetraft_replica_lag_seconds"
    stop_watching = asyncio.Event()
    watchers = [
        asyncio.create_task(_highest(_reading(url, name, labels), stop_watching))
        for url, name, labels in (
            (follower_http, metric, {"stream": "LAGT", "node": follower_member, "role": "follower"}),
            (leader_http, "jetraft_replica_lag_messages", {"stream": "LAGT", "node": follower_member}),
            (mirror_http, metric, {"stream": "LAGT_M", "node": mirror_member, "role": "mirror"}),
        )
    ]
    try:
        lagged = await workload.run(300, layout.leader, duration=4, max_writes=200, warmup=0.5)
    finally:
        stop_watching.set()
    lag_seconds, lag_messages, mirror_lag_seconds = await asyncio.gather(*watchers)
    assert lag_seconds >= 0.2, f"{follower}'s {metric} peaked at {lag_seconds}s under 300 ms of lag"
    assert lag_messages >= 1, f"the leader never saw {follower} behind (peak {lag_messages})"
    assert mirror_lag_seconds >= 0.2, f"the mirror's {metric} peaked at {mirror_lag_seconds}s under 300 ms"
    samples = lagged.samples

    coherent = _of(samples, ReadPath.MSG_GET)
    assert len(coherent) >= 5 and all(s.outcome is Outcome.MESSAGE for s in coherent)
    assert not any(s.stale for s in coherent), "STREAM.MSG.GET must never be stale"
    for node in (follower, mirror_node):
        direct = _of(samples, ReadPath.DIRECT_GET, node)
        stale = [s for s in direct if s.stale]
        assert len(direct) >= 5 and len(stale) / len(direct) > 0.5, (
            f"{node}: {len(stale)} of {len(direct)} stale"
        )
        assert max(s.behind_seq for s in stale) >= 1
    read_your_writes = _of(samples, ReadPath.DIRECT_GET_MIN_LAST_SEQ)
    assert read_your_writes and not any(s.stale for s in read_your_writes), "min_last_seq must never be stale"
    lagged_ryw = _of(samples, ReadPath.DIRECT_GET_MIN_LAST_SEQ, follower)
    assert lagged_ryw and all(s.outcome in (Outcome.MESSAGE, Outcome.REFUSED) for s in lagged_ryw)
    # it typically waited for the write to arrive over the lagged link (not always: on a loaded machine
    # a PubAck can itself take longer than the injected 300 ms, and then the write is already there)
    waited = sorted(s.latency_ms for s in lagged_ryw if s.outcome is Outcome.MESSAGE)
    assert waited and waited[len(waited) // 2] >= 250, waited

    faults.remove_latency(layout.lagged)
    started = time.monotonic()
    caught_up = await wait_caught_up(list(endpoints.values()), "LAGT", lagged.last_acked_seq, 20)
    assert all(caught_up.values()), caught_up
    caught_up_s = time.monotonic() - started
    # caught up: a plain Direct Get of every key on the lagged nodes returns the last acknowledged version
    for node in (follower, mirror_node):
        js = endpoints[node].nc.jetstream()
        for key in range(8):
            leader_copy = await workload.js.get_msg("LAGT", subject=f"lagt.k{key}", direct=False)
            local_copy = await js.get_msg("LAGT", subject=f"lagt.k{key}", direct=True)
            assert local_copy.headers is not None and node_of(local_copy.headers["Jetraft-Node"]) == node
            assert local_copy.seq == leader_copy.seq, f"{node} still stale for lagt.k{key}"
    assert caught_up_s < 20
    deadline = time.monotonic() + 10
    for http, stream, node in ((follower_http, "LAGT", follower_member), (mirror_http, "LAGT_M", mirror_member)):
        while (now := value(scrape(http), metric, stream=stream, node=node)) >= 0.2:
            assert time.monotonic() < deadline, f"{node}'s {metric} for {stream} stayed at {now}s after catching up"
            await asyncio.sleep(0.2)
    admin = any_endpoint.nc.jetstream()
    await admin.delete_stream("LAGT_M")
    await admin.delete_stream("LAGT")


async def test_bounded_staleness_takes_the_lagged_follower_out_of_direct_gets(
    faults: LinkFaults, endpoints: dict[str, Endpoint]
) -> None:
    any_endpoint = next(iter(endpoints.values()))
    admin = any_endpoint.nc.jetstream(timeout=10)
    info = await admin.add_stream(
        StreamConfig(
            name="BOUNDED", subjects=["bounded.>"], num_replicas=3, allow_direct=True,
            metadata={"jetraft.max_direct_lag": "100"},
        )
    )  # fmt: skip
    assert info.cluster is not None and info.cluster.replicas
    follower = node_of(sorted(peer.name for peer in info.cluster.replicas)[0])
    ack = await admin.publish("bounded.a", b"1")
    await wait_caught_up([endpoints[follower]], "BOUNDED", ack.seq, 20)

    async def answered_by(node: str) -> str:
        reply = await endpoints[node].nc.request(
            "$JS.API.DIRECT.GET.BOUNDED", json.dumps({"last_by_subj": "bounded.a"}).encode(), timeout=2
        )
        assert reply.headers is not None and reply.data == b"1"
        return node_of(reply.headers["Jetraft-Node"])

    assert await answered_by(follower) == follower, "local-first: the follower answers while caught up"
    faults.add_latency([follower], 400)
    deadline = time.monotonic() + 15
    while await answered_by(follower) == follower:
        assert time.monotonic() < deadline, "the lagged follower kept answering past its staleness bound"
    # out of the group: reads on its connection are answered elsewhere while the lag lasts
    # (each crosses the lagged link to another node, so only a few)
    others = {await answered_by(follower) for _ in range(4)}
    assert follower not in others and others <= {peer for peer in endpoints if peer != follower}

    faults.remove_latency([follower])
    deadline = time.monotonic() + 20
    while await answered_by(follower) != follower:
        assert time.monotonic() < deadline, "the follower did not rejoin after catching up"
    await admin.delete_stream("BOUNDED")


class _Writer:
    """Publishes numbered messages, retrying each (same msg id) until acknowledged; bounded by a deadline."""

    def __init__(self, js: nats.js.JetStreamContext) -> None:
        self.js = js
        self.acked: dict[int, bytes] = {}
        self.stop = asyncio.Event()

    async def run(self, limit: int, deadline: float) -> None:
        for n in range(limit):
            payload = b"p-%d" % n
            while not self.stop.is_set() and time.monotonic() < deadline:
                try:
                    ack = await self.js.publish(
                        "part.x", payload, timeout=1.0, headers={"Nats-Msg-Id": f"p{n}"}
                    )
                except _API_FAILURES:
                    continue  # no leader for a moment: the same message again
                self.acked[ack.seq] = payload
                break
            else:
                return

    async def wait_for(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < count:
            assert time.monotonic() < deadline, f"only {len(self.acked)} of {count} acks in {timeout}s"
            await asyncio.sleep(0.02)


async def test_partitioned_leader_serves_no_coherent_reads_and_no_acknowledged_write_is_lost(
    cluster: LocalCluster, faults: LinkFaults, endpoints: dict[str, Endpoint]
) -> None:
    admin = next(iter(endpoints.values())).nc.jetstream(timeout=10)
    info = await admin.add_stream(name="PART", subjects=["part.>"], num_replicas=3, allow_direct=True)
    assert info.cluster is not None and info.cluster.replicas
    old_leader_member = info.cluster.leader or ""
    group = info.cluster.raft_group or ""
    # nodes (machines): the links cut and the clients used are a node's; a peer may be one of its workers
    old_leader = node_of(old_leader_member)
    replicas = [old_leader, *sorted(node_of(peer.name) for peer in info.cluster.replicas)]
    majority = [node for node in replicas if node != old_leader]
    writer = _Writer(endpoints[majority[0]].nc.jetstream(timeout=2))
    task = asyncio.create_task(writer.run(limit=100_000, deadline=time.monotonic() + 90))
    try:
        await writer.wait_for(50, timeout=20)
        elections_before = {
            node: value(scrape(cluster.spec(node).http_url), "jetraft_raft_elections_total", group=group)
            for node in majority
        }
        cut = faults.isolate(old_leader)
        # a proxy each way between it and every member of every other node
        workers = {spec.name: spec.workers for spec in cluster.specs}
        assert len(cut) == sum(workers[node] + workers[old_leader] for node in endpoints if node != old_leader)

        # the majority elects a new leader and goes on acknowledging writes
        majority_js = endpoints[majority[1]].nc.jetstream(timeout=2)
        deadline = time.monotonic() + 30
        new_leader = old_leader_member
        while new_leader == old_leader_member:
            assert time.monotonic() < deadline, "no new stream leader in the majority"
            try:
                new_leader = (await majority_js.stream_info("PART")).cluster.leader or old_leader_member
            except _API_FAILURES:
                continue
        assert node_of(new_leader) in majority
        # the new leader campaigned for it: its elections counter moved, and it says it leads the group
        new_leader_metrics = scrape(cluster.spec(new_leader).http_url)
        elections = value(new_leader_metrics, "jetraft_raft_elections_total", group=group)
        assert elections > elections_before[node_of(new_leader)], (elections_before, elections)
        assert value(new_leader_metrics, "jetraft_raft_is_leader", group=group, node=new_leader) == 1
        acked_at_election = len(writer.acked)
        await writer.wait_for(acked_at_election + 50, timeout=30)

        # the old leader, cut off, answers no coherent read (nor acknowledges a write)
        isolated = endpoints[old_leader].nc.jetstream(timeout=1.0)
        for _ in range(2):
            with pytest.raises(_API_FAILURES):
                await isolated.get_msg("PART", subject="part.x", direct=False)
        with pytest.raises(_API_FAILURES):
            await isolated.publish("part.x", b"from the minority", timeout=1.0)
    finally:
        writer.stop.set()
        await task
        faults.heal(old_leader)

    acked = writer.acked
    assert sorted(acked) == list(range(1, len(acked) + 1)), "acknowledged sequences must be gap-free"
    last = max(acked)
    caught_up = await wait_caught_up([endpoints[node] for node in replicas], "PART", last, 60)
    assert all(caught_up.values()), f"replicas not caught up after healing: {caught_up}"
    for node in replicas:
        js = endpoints[node].nc.jetstream()
        for seq, payload in acked.items():
            msg = await js.get_msg("PART", seq=seq, direct=True)
            assert msg.headers is not None and node_of(msg.headers["Jetraft-Node"]) == node
            assert msg.data == payload, f"{node} lost or changed acknowledged seq {seq}"
    # Right after the heal a node may still be redialling its peers' routes, and a request whose reply
    # has no route yet is lost (core NATS request/reply is at most once): ask again, within a bound.
    deadline = time.monotonic() + 30
    while True:
        try:
            coherent = await admin.get_msg("PART", seq=last)
            break
        except _API_FAILURES:
            assert time.monotonic() < deadline, "the healed cluster never answered a coherent read"
    assert coherent.data == acked[last]
    while True:
        try:
            await admin.delete_stream("PART")
            break
        except NotFoundError:
            break  # an earlier attempt deleted it and its answer was the one lost
        except _API_FAILURES:
            assert time.monotonic() < deadline, "the healed cluster never deleted the stream"


async def test_direct_get_error_statuses_are_counted_by_the_node_that_answered(
    cluster: LocalCluster, endpoints: dict[str, Endpoint]
) -> None:
    """408 (empty or malformed request), 412 (min_last_seq never reached) and 413 (multi_last over 1024
    subjects) each move `jetraft_direct_get_requests_total{status}` on the responder."""
    nc = next(iter(endpoints.values())).nc
    admin = nc.jetstream(timeout=10)
    info = await admin.add_stream(name="STATUS", subjects=["status.>"], num_replicas=1, allow_direct=True)
    assert info.cluster is not None and info.cluster.leader
    responder = info.cluster.leader
    for first in range(0, 1030, 103):  # one more subject than a multi_last batch may return
        await asyncio.gather(*(admin.publish(f"status.s{n}", b"x") for n in range(first, first + 103)))
    http_url = cluster.spec(responder).http_url

    def counted(status: str) -> float:
        return value(
            scrape(http_url), "jetraft_direct_get_requests_total", stream="STATUS", node=responder, status=status
        )

    before = {status: counted(status) for status in ("408", "412", "413")}
    requests = {
        "408": [b"", b"{not json"],
        "412": [json.dumps({"last_by_subj": "status.s1", "min_last_seq": 10**9}).encode()],
        "413": [json.dumps({"multi_last": ["status.>"]}).encode()],
    }
    for status, payloads in requests.items():
        for payload in payloads:
            reply = await nc.request("$JS.API.DIRECT.GET.STATUS", payload, timeout=5)
            assert reply.headers is not None and reply.headers.get("Status") == status, reply.headers
            assert reply.headers["Jetraft-Node"] == responder
    after = {status: counted(status) for status in requests}
    assert {status: after[status] - before[status] for status in requests} == {"408": 2, "412": 1, "413": 1}
    await admin.delete_stream("STATUS")


async def test_a_client_that_stops_reading_is_counted_as_a_slow_consumer(
    cluster: LocalCluster, endpoints: dict[str, Endpoint]
) -> None:
    """A raw subscriber that never reads its socket is cut off once 64 MiB wait for it."""
    spec = cluster.specs[0]

    def slow_consumers() -> float:
        """The node's count: its own, or its workers' added up (the raw client lands on any of them)."""
        samples = scrape(spec.http_url)
        return sum(value(samples, "jetraft_slow_consumers_total", node=member) for member in spec.members)

    before = slow_consumers()
    with socket.socket() as raw:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: a small window
        raw.settimeout(5)
        raw.connect(("127.0.0.1", spec.client_port))
        raw.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\nSUB slow.x 1\r\nPING\r\n')
        received = b""
        while b"PONG" not in received:
            chunk = raw.recv(4096)
            assert chunk, "the node closed the subscriber before PONG"
            received += chunk
        publisher = endpoints[spec.name].nc
        payload = b"x" * (512 * 1024)
        for _ in range(200):  # 100 MiB at most, well over the 64 MiB a client may have waiting
            await publisher.publish("slow.x", payload)
        await publisher.flush(timeout=10)
        deadline = time.monotonic() + 10
        while slow_consumers() <= before:
            assert time.monotonic() < deadline, "no slow consumer counted"
            await asyncio.sleep(0.2)  # the counter follows the server's stats once a second
