"""A stream's publish counts and PubAck latencies, kept in plain numbers and exported at scrape time, read
exactly as prometheus_client's own Counter and Histogram exported them for the same publishes."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from cluster.runtime.metrics import _LATENCY_BUCKETS, NodeMetrics

# every bound itself (a bucket holds its bound), values between bounds, below the first and past the last
LATENCIES = [0.0, 0.0001, *_LATENCY_BUCKETS, 0.0007, 0.003, 0.07, 3.0, 7.5, 0.0005, 0.0005]
OUTCOMES = ["ok", "ok", "error", "duplicate", "rejected", "ok"]


def _samples(registry: CollectorRegistry) -> list[str]:
    # `_created` holds the time the series began, which differs between the two registries
    return sorted(
        line
        for line in generate_latest(registry).decode().splitlines()
        if line.startswith(("jetraft_publishes", "jetraft_puback_latency")) and "_created" not in line
    )


def test_the_tally_exports_what_prometheus_client_exported() -> None:
    reference = CollectorRegistry()
    histogram = Histogram(
        "jetraft_puback_latency_seconds", "", ["stream", "node"], buckets=_LATENCY_BUCKETS, registry=reference
    )
    counter = Counter("jetraft_publishes_total", "", ["stream", "node", "status"], registry=reference)
    metrics = NodeMetrics("n1")
    for stream in ("ORDERS", "KV_cfg"):
        tally = metrics.publish_tally(stream)
        for seconds in LATENCIES:
            histogram.labels(stream, "n1").observe(seconds)
            tally.observe(seconds)
        for outcome in OUTCOMES:
            counter.labels(stream, "n1", outcome).inc()
            tally.count(outcome)

    assert _samples(metrics.registry) == _samples(reference)
    assert any("le=\"0.0005\"" in line for line in _samples(metrics.registry))


def test_a_stream_keeps_one_tally_across_its_leaderships() -> None:
    metrics = NodeMetrics("n1")
    metrics.publish_tally("S").count("ok")
    metrics.publish_tally("S").count("ok")  # a later leader of the same stream on this node

    assert 'jetraft_publishes_total{node="n1",status="ok",stream="S"} 2.0' in _samples(metrics.registry)


def test_nothing_is_exported_for_a_stream_before_its_first_publish() -> None:
    metrics = NodeMetrics("n1")
    metrics.publish_tally("S")

    assert _samples(metrics.registry) == []
    families = {family.name: family.type for family in metrics.registry.collect()}
    # the families are there (dashboards and docs name them) with no series yet
    assert families["jetraft_publishes"] == "counter"
    assert families["jetraft_puback_latency_seconds"] == "histogram"
