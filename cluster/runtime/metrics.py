"""Every Prometheus metric a node exports, in one place (documented in docs/metrics.md).

Each node owns a `NodeMetrics` with its own registry, so several nodes can
live in one test process without sharing counters.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

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
        # jetraft_publishes_total and jetraft_puback_latency_seconds: counted per stream in plain numbers
        # on the leader's hot path and exported when scraped (see PublishTally)
        self._publish_tallies: dict[str, PublishTally] = {}
        r.register(_PublishTallies(node, self._publish_tallies))
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
        self._group_series = (
            self.raft_term,
            self.raft_commit_index,
            self.raft_applied_index,
            self.raft_is_leader,
            self.raft_elections,
            self.raft_leader_changes,
            self.raft_snapshot_installs,
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
        self.held_publishes = Counter(
            "jetraft_held_publishes_total",
            "Client publishes on a stream's subject that met no stream leader and waited for one, by outcome:"
            " released (a leader's interest came) or expired (answered 503, or dropped without a reply)",
            ["node", "outcome"],
            registry=r,
        )

    def forget_groups_except(self, live: set[str]) -> int:
        """Drop the Raft series of groups no longer on this node (a deleted stream's or consumer's, one moved
        away): otherwise a deleted group's leader would show `jetraft_raft_is_leader 1` for ever, and the
        series of every group ever created would pile up. Group names carry their creation time, so a group
        created again under an old name's stream is a new series. How many series went."""
        dropped = 0
        for metric in self._group_series:
            # prometheus_client has no public way to list a metric's children: its `_metrics` holds them,
            # by label values (group first)
            stale = [labels for labels in list(metric._metrics) if labels[0] not in live]
            for labels in stale:
                with contextlib.suppress(KeyError):
                    metric.remove(*labels)
                    dropped += 1
        return dropped

    def publish_tally(self, stream: str) -> PublishTally:
        """The stream's publish counts on this node: kept across its leaderships here, as counters are."""
        tally = self._publish_tallies.get(stream)
        if tally is None:
            tally = self._publish_tallies[stream] = PublishTally()
        return tally

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


class PublishTally:
    """One stream's publishes handled here as leader, by outcome, and their PubAck latencies.

    Plain numbers, exported at scrape time by `_PublishTallies` under the names a prometheus_client
    Counter and Histogram gave them: their inc and observe (a Python loop over the buckets, a lock per
    step) took ~2 us of every publish. Updated on the event loop only; a scrape on another thread may
    read a sum one observation ahead of the buckets, as prometheus_client's own children allow.
    """

    __slots__ = ("buckets", "created", "latency_sum", "outcomes")

    def __init__(self) -> None:
        self.outcomes: dict[str, int] = {}
        # per bucket of _LATENCY_BUCKETS, not cumulative; the last one is +Inf
        self.buckets = [0] * (len(_LATENCY_BUCKETS) + 1)
        self.latency_sum = 0.0
        self.created = time.time()

    def count(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def observe(self, seconds: float) -> None:
        # a bucket holds the values up to and including its bound, as prometheus_client's
        self.buckets[bisect.bisect_left(_LATENCY_BUCKETS, seconds)] += 1
        self.latency_sum += seconds


_BUCKET_LABELS = [floatToGoString(bound) for bound in _LATENCY_BUCKETS] + ["+Inf"]


class _PublishTallies(Collector):
    """`jetraft_publishes_total` and `jetraft_puback_latency_seconds` from the node's `PublishTally`s."""

    def __init__(self, node: str, tallies: dict[str, PublishTally]) -> None:
        self._node = node
        self._tallies = tallies

    def collect(self) -> Iterator[Metric]:
        publishes = CounterMetricFamily(
            "jetraft_publishes",
            "Publishes handled by this node as stream leader, by outcome (ok, duplicate, error)",
            labels=["stream", "node", "status"],
        )
        latency = HistogramMetricFamily(
            "jetraft_puback_latency_seconds",
            "Time from a publish reaching the stream leader to its PubAck being sent",
            labels=["stream", "node"],
        )
        for stream, tally in list(self._tallies.items()):
            for outcome, count in list(tally.outcomes.items()):
                publishes.add_metric([stream, self._node, outcome], count, created=tally.created)
            if any(tally.buckets):
                cumulative = list(itertools.accumulate(tally.buckets))
                latency.add_metric(
                    [stream, self._node], list(zip(_BUCKET_LABELS, cumulative, strict=True)), tally.latency_sum
                )
        yield publishes
        yield latency
