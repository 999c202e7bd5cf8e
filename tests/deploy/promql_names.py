"""The metric names a PromQL expression reads, and the sample names a NodeMetrics registry exports."""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry

# Grafana's interval variables are not PromQL; Prometheus sees a concrete range in their place
GRAFANA_RANGE_VARIABLES = re.compile(r"\$__(rate_)?interval|\$__range")

_LABEL_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_GROUPINGS = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENTIFIER = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "inf", "nan"}


def with_range(expr: str, window: str) -> str:
    """The expression as Prometheus would receive it from Grafana, with `window` for the range variables."""
    return GRAFANA_RANGE_VARIABLES.sub(window, expr)


def metric_names(expr: str) -> set[str]:
    """Identifiers in metric-name position: not functions, keywords, label names or numbers."""
    text = _STRINGS.sub('""', expr)
    text = _LABEL_MATCHERS.sub("", text)
    text = _RANGES.sub("", text)
    text = _GROUPINGS.sub("", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        rest = text[match.end() :].lstrip()
        word = match.group()
        if rest.startswith("(") or word.lower() in _KEYWORDS:
            continue
        names.add(word)
    return names


def exported_sample_names(registry: CollectorRegistry) -> set[str]:
    """Every sample name the registry can export, including families that have no labelled child yet."""
    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_sum", "_count", "_created"),
        "gauge": ("",),
        "summary": ("", "_sum", "_count", "_created"),
    }
    names = set()
    for family in registry.collect():
        for suffix in suffixes.get(family.type, ("",)):
            names.add(family.name + suffix)
    return names
