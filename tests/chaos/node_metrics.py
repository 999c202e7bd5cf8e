"""Reading one node's Prometheus `/metrics` in a test (the node is another process: nothing to await)."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

Labels = dict[str, str]


def scrape(http_url: str) -> list[tuple[str, Labels, float]]:
    """Every sample the node exports now: (sample name, labels, value)."""
    with urllib.request.urlopen(f"{http_url}/metrics", timeout=2.0) as resp:
        text = resp.read().decode()
    return [
        (sample.name, dict(sample.labels), sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


def value(samples: list[tuple[str, Labels, float]], name: str, **labels: str) -> float:
    """Sum of the samples named `name` whose labels include `labels` (0 when there are none)."""
    return sum(v for n, got, v in samples if n == name and labels.items() <= got.items())
