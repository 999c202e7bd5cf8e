"""Draw the "Read spread" dashboard's panels from a running Prometheus into a PNG (for the README).

    python -m deploy.render_read_spread --prometheus http://127.0.0.1:9090 --minutes 5 --out docs/read-spread.png

The queries are the dashboard's own (deploy/dashboards.py), so the picture shows
what Grafana would, without needing Grafana.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deploy.dashboards import READ_SPREAD, Panel

# the panels drawn, by position in the dashboard: per node, per stream, share by role, MSG.GET vs Direct Get
DRAWN_PANELS = (0, 1, 2, 3)
_LEGEND_LABEL = re.compile(r"\{\{\s*(\w+)\s*\}\}")


@dataclass(frozen=True, slots=True)
class Series:
    legend: str
    times: list[float]
    values: list[float]


class PrometheusQueryError(RuntimeError):
    """Prometheus could not be reached or rejected a query."""


def query_range(prometheus: str, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
    params = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    try:
        with urllib.request.urlopen(f"{prometheus}/api/v1/query_range?{params}", timeout=10) as resp:
            body = json.loads(resp.read())
    except (urllib.error.URLError, OSError) as exc:
        raise PrometheusQueryError(f"{expr!r}: {exc}") from exc
    if body.get("status") != "success":
        raise PrometheusQueryError(f"{expr!r}: {body}")
    return body["data"]["result"]


def panel_series(
    prometheus: str, panel: Panel, start: float, end: float, step: float, window: str
) -> list[Series]:
    series = []
    for query in panel.queries:
        expr = query.expr.replace("$__rate_interval", window)
        for result in query_range(prometheus, expr, start, end, step):
            points = result["values"]
            series.append(
                Series(
                    legend_of(query.legend, result["metric"]),
                    [float(t) - start for t, _ in points],
                    [float(value) for _, value in points],
                )
            )
    return sorted(series, key=lambda s: s.legend)


def legend_of(template: str, labels: dict[str, str]) -> str:
    """Grafana's legend format: {{label}} replaced by the series' label value."""
    return _LEGEND_LABEL.sub(lambda match: labels.get(match.group(1), ""), template)


def render(
    prometheus: str, out: Path, start: float, end: float, step: float = 1.0, window: str = "15s"
) -> int:
    """Draw the panels into `out`; returns how many series were drawn."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and in CI
    import matplotlib.pyplot as plt

    panels = [READ_SPREAD.panels[index] for index in DRAWN_PANELS]
    figure, axes = plt.subplots(2, 2, figsize=(13, 7.5), sharex=True)
    drawn = 0
    for panel, ax in zip(panels, axes.flat, strict=True):
        series = panel_series(prometheus, panel, start, end, step, window)
        drawn += len(series)
        ax.set_title(panel.title, fontsize=11)
        ax.grid(alpha=0.3)
        if not series:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
            continue
        if panel.stacking == "none":
            for one in series:
                ax.plot(one.times, one.values, label=one.legend)
        else:
            times = sorted(set().union(*(one.times for one in series)))
            stack = [_on_times(one, times) for one in series]
            if panel.stacking == "percent":
                totals = [sum(column) or 1.0 for column in zip(*stack, strict=True)]
                stack = [[100 * v / t for v, t in zip(row, totals, strict=True)] for row in stack]
                ax.set_ylabel("% of Direct Gets")
            ax.stackplot(times, *stack, labels=[one.legend for one in series], alpha=0.8)
        if panel.unit == "reqps" and panel.stacking != "percent":
            ax.set_ylabel("requests / s")
        ax.legend(loc="upper left", fontsize=8)
    for ax in axes[-1]:
        ax.set_xlabel("seconds")
    figure.suptitle(f"jetraft: {READ_SPREAD.title} (rates over {window})")
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=100)
    plt.close(figure)
    return drawn


def _on_times(series: Series, times: list[float]) -> list[float]:
    """The series' values at `times` (0 where it has no sample), so series of different spans stack."""
    by_time = dict(zip(series.times, series.values, strict=True))
    return [by_time.get(t, 0.0) for t in times]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prometheus", default="http://127.0.0.1:9090")
    parser.add_argument("--minutes", type=float, default=5.0, help="how far back to draw")
    parser.add_argument("--step", type=float, default=1.0, help="seconds between points")
    parser.add_argument("--window", default="15s", help="rate() window (at least 4 scrape intervals)")
    parser.add_argument("--out", type=Path, default=Path("docs/read-spread.png"))
    args = parser.parse_args(argv)
    end = time.time()
    try:
        drawn = render(args.prometheus, args.out, end - args.minutes * 60, end, args.step, args.window)
    except PrometheusQueryError as exc:
        print(f"render_read_spread: {exc}", file=sys.stderr)
        return 1
    print(f"{args.out}: {drawn} series")
    return 0 if drawn else 1


if __name__ == "__main__":
    sys.exit(main())
