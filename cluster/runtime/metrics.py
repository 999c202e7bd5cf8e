"""Every Prometheus metric a node exports, in one place (documented in docs/metrics.md).

Each node owns a `NodeMetrics` with its own registry, so several nodes can
live in one test process without sharing counters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

# PubAck latencies sit between a fraction of a millisecond (R1, memory) and
# seconds (fsync under load, leader failover).
_LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class LabelledChildren:
    """A metric's children for fixed leading label values, kept by the remaining values.

    `labels()` checks and joins every value and takes a lock on each call, which costs more than the
    increment on a hot path (a publish, a Direct Get, a MSG.GET); the few children met are kept here.
    """

    def __init__(self, metric: MetricWrapperBase, *fixed: str) -> None:
        self._metric = metric
        self._fixed = fixed
        self._children: dict[tuple[str, ...], Any] = {}

    def __call__(self, *rest: str) -> Any:
        child = self._children.get(rest)
        if child is None:
            child = self._children[rest] = self._metric.labels(*self._fixed, *rest)
        return child


class NodeMetrics:
    def __init__(self, node: str, registry: CollectorRegistry | None = None) -> None:
        self.node = node
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.direct_get_requests = Counter(
            "jetraft_direct_get_requests_total",
            "Direct Get requests answered by this node, by the role it answered in and the status sent",
            ["stream", "node", "role", "status"],
            registry=r,
        )
        self.msg_get_requests = Counter(
            "jetraft_msg_get_requests_total",
            "Coherent STREAM.MSG.GET requests answered by this node (as stream leader)",
            ["stream", "node", "status"],
            registry=r,
        )
        self.publishes = Counter(
            "jetraft_publishes_total",
            "Publishes handled by this node as stream leader, by outcome (ok, duplicate, error)",
            ["stream", "node", "status"],
            registry=r,
        )
        self.puback_latency = Histogram(
            "jetraft_puback_latency_seconds",
            "Time from a publish reaching the stream leader to its PubAck being sent",
            ["stream", "node"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        # the account-wide figures a node works from, as it last heard them from the other nodes
        self.account_stream_bytes = Gauge(
            "jetraft_account_stream_bytes",
            "Bytes a stream holds on all its replicas, as its leader last reported it to this node "
            "(for the account's max_memory / max_storage checks; reported only while one is set)",
            ["node", "account", "stream"],
            registry=r,
        )
        self.account_api_responses = Gauge(
            "jetraft_account_api_responses",
            "JetStream API responses sent to the account's clients by every node, as this node last "
            "heard their counts (ACCOUNT INFO's api.total and api.errors)",
            ["node", "account", "kind"],
            registry=r,
        )
        self.stream_last_seq = Gauge(
            "jetraft_stream_last_seq",
            "Last sequence applied to this node's local copy of the stream",
            ["stream", "node", "role"],
            registry=r,
        )
        self.replica_lag_messages = Gauge(
            "jetraft_replica_lag_messages",
            "How many messages this node's copy of the stream is behind the leader (or a mirror behind its origin)",
            ["stream", "node", "role"],
            registry=r,
        )
        self.replica_lag_seconds = Gauge(
            "jetraft_replica_lag_seconds",
            "Age of the newest message this node lacks, relative to the leader (0 when caught up)",
            ["stream", "node", "role"],
            registry=r,
        )
        self.raft_term = Gauge("jetraft_raft_term", "Current Raft term", ["group", "node"], registry=r)
        self.raft_commit_index = Gauge(
            "jetraft_raft_commit_index", "Raft commit index", ["group", "node"], registry=r
        )
        self.raft_applied_index = Gauge(
            "jetraft_raft_applied_index", "Raft applied index", ["group", "node"], registry=r
        )
        self.raft_is_leader = Gauge(
            "jetraft_raft_is_leader", "1 while this node leads the group", ["group", "node"], registry=r
        )
        self.raft_elections = Counter(
            "jetraft_raft_elections_total",
            "Elections this node started (campaigns)",
            ["group", "node"],
            registry=r,
        )
        self.raft_leader_changes = Counter(
            "jetraft_raft_leader_changes_total",
            "Leader changes seen by this node",
            ["group", "node"],
            registry=r,
        )
        self.raft_snapshot_installs = Counter(
            "jetraft_raft_snapshot_installs_total",
            "Snapshots installed on this node from a leader",
            ["group", "node"],
            registry=r,
        )
        self.route_connections = Gauge(
            "jetraft_route_connections", "Peers this node has a live route to", ["node"], registry=r
        )
        self.client_connections = Gauge(
            "jetraft_client_connections", "NATS client connections open on this node", ["node"], registry=r
        )
        self.slow_consumers = Counter(
            "jetraft_slow_consumers_total",
            "Client connections closed because their outbound buffer overflowed",
            ["node"],
            registry=r,
        )

    def count_raft_log_writes(self, counts: Callable[[], tuple[int, int]]) -> None:
        """Export the Raft log's writes and fsyncs, read from `counts()` (writes, fsyncs) at each scrape."""
        self.registry.register(_RaftLogWrites(self.node, counts))


class _RaftLogWrites(Collector):
    """`jetraft_raft_log_writes_total` and `jetraft_raft_log_fsyncs_total`, read from the log engine's own
    counts when scraped (one write batch carries every group's entries of a host iteration)."""

    def __init__(self, node: str, counts: Callable[[], tuple[int, int]]) -> None:
        self._node = node
        self._counts = counts

    def collect(self) -> Iterator[Metric]:
        writes, fsyncs = self._counts()
        for name, doc, count in (
            ("jetraft_raft_log_writes", "Write batches this node made to its Raft log", writes),
            ("jetraft_raft_log_fsyncs", "Write batches this node fsynced to its Raft log", fsyncs),
        ):
            family = CounterMetricFamily(name, doc, labels=["node"])
            family.add_metric([self._node], count)
            yield family
