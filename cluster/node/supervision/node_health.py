"""A several-worker node's /healthz and /metrics, made from its workers' (pure functions)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from cluster.runtime.workers import node_of

WORKER_LABEL = "worker"


def node_health(node: str, bodies: Mapping[str, dict[str, Any] | None]) -> tuple[bool, dict[str, Any]]:
    """Healthy when every worker answered healthy. `meta_leader` is the leading node (its worker 0
    leads), as a single-worker node reports it; the worker itself is `meta_leader_worker`."""
    ok = bool(bodies) and all(body is not None and body.get("status") == "ok" for body in bodies.values())
    leaders = {str(body["meta_leader"]) for body in bodies.values() if body and body.get("meta_leader")}
    leader = min(leaders) if len(leaders) == 1 else None  # workers that disagree: an election under way
    streams: set[str] = set()
    for body in bodies.values():
        if body:
            streams.update(body.get("streams") or ())
    return ok, {
        "node": node,
        "meta_leader": node_of(leader) if leader else None,
        "meta_leader_worker": leader,
        "streams": sorted(streams),
        "workers": dict(bodies),
    }


class MergedMetrics:
    """A prometheus-client collector over the workers' exposition texts: one family per metric name,
    every sample labelled with the worker it came from."""

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}

    def collect(self) -> list[Metric]:
        families: dict[str, Metric] = {}
        for worker, text in sorted(self.texts.items()):
            for family in text_string_to_metric_families(text):
                merged = families.get(family.name)
                if merged is None:
                    merged = families[family.name] = Metric(family.name, family.documentation, family.type)
                for sample in family.samples:
                    labels = {**sample.labels, WORKER_LABEL: worker}
                    merged.add_sample(sample.name, labels, sample.value, sample.timestamp, sample.exemplar)
        return list(families.values())
