"""A group gone from the node takes its Raft series with it; live groups keep theirs."""

from __future__ import annotations

from prometheus_client import generate_latest

from cluster.runtime.metrics import NodeMetrics


def _series(metrics: NodeMetrics) -> str:
    return generate_latest(metrics.registry).decode()


def test_series_of_groups_no_longer_on_the_node_are_dropped() -> None:
    metrics = NodeMetrics("n1")
    for group in ("_meta_", "S-ORDERS-1", "C-ORDERS-w-2"):
        metrics.raft_is_leader.labels(group, "n1").set(1)
        metrics.raft_term.labels(group, "n1").set(3)
        metrics.raft_leader_changes.labels(group, "n1").inc()
        metrics.raft_elections.labels(group, "n1").inc()
    metrics.raft_commit_index.labels("S-ORDERS-1", "n1").set(10)
    assert 'group="S-ORDERS-1"' in _series(metrics)
    dropped = metrics.forget_groups_except({"_meta_", "C-ORDERS-w-2"})
    text = _series(metrics)
    assert dropped == 5  # is_leader, term, leader_changes, elections and commit_index of S-ORDERS-1
    assert 'group="S-ORDERS-1"' not in text
    assert 'jetraft_raft_is_leader{group="_meta_",node="n1"} 1.0' in text
    assert 'jetraft_raft_is_leader{group="C-ORDERS-w-2",node="n1"} 1.0' in text
    assert metrics.forget_groups_except({"_meta_", "C-ORDERS-w-2"}) == 0
