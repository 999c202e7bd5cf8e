"""The PNG: stale fraction and read latency against injected lag, one line per read path."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from chaos.readafterwrite.stats import ReadPath, ResultRow

_LABELS = {
    ReadPath.MSG_GET.value: "STREAM.MSG.GET (leader)",
    ReadPath.DIRECT_GET.value: "Direct Get",
    ReadPath.DIRECT_GET_MIN_LAST_SEQ.value: "Direct Get + min_last_seq",
}


def _series(rows: list[ResultRow], lagged: bool) -> dict[str, dict[int, tuple[float | None, float]]]:
    """path -> lag -> (stale fraction or None, latency p50) over the lag targets (or the others).

    Weighted by reads; refused reads (412) count for latency, as the client waited for them.
    """
    sums: dict[tuple[str, int], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for row in rows:
        if row.lag_target != lagged or row.reads + row.refused == 0:
            continue
        acc = sums[(row.path, row.lag_ms)]
        acc[0] += row.stale
        acc[1] += row.reads
        acc[2] += row.latency_ms_p50 * (row.reads + row.refused)
        acc[3] += row.reads + row.refused
    series: dict[str, dict[int, tuple[float | None, float]]] = defaultdict(dict)
    for (path, lag_ms), (stale, reads, weighted_latency, timed) in sums.items():
        series[path][lag_ms] = (stale / reads if reads else None, weighted_latency / timed)
    return series


def write_chart(path: str | Path, rows: Iterable[ResultRow]) -> None:
    """Two panels: stale fraction and p50 latency vs lag; solid = the lagged nodes, dashed = the others.

    A lag whose reads were all refused (412) has no stale-fraction point.
    """
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    rows = list(rows)
    figure, (stale_axes, latency_axes) = plt.subplots(1, 2, figsize=(12, 4.5))
    for lagged, style in ((True, "-"), (False, "--")):
        for read_path, points in sorted(_series(rows, lagged).items()):
            lags = sorted(points)
            suffix = "lagged nodes" if lagged else "other nodes"
            label = f"{_LABELS.get(read_path, read_path)}, {suffix}"
            answered = [lag for lag in lags if points[lag][0] is not None]
            stale_axes.plot(answered, [points[lag][0] for lag in answered], style, marker="o", label=label)
            latency_axes.plot(lags, [points[lag][1] for lag in lags], style, marker="o", label=label)
    stale_axes.set_title("stale reads right after the write")
    stale_axes.set_xlabel("injected latency (ms, each direction)")
    stale_axes.set_ylabel("stale fraction")
    stale_axes.set_ylim(-0.05, 1.05)
    latency_axes.set_title("read latency (p50)")
    latency_axes.set_xlabel("injected latency (ms, each direction)")
    latency_axes.set_ylabel("ms")
    for axes in (stale_axes, latency_axes):
        axes.grid(True, alpha=0.3)
        largest = max((row.lag_ms for row in rows), default=0)
        if largest > 0:
            # symlog: 0 ms stays on the axis next to 50 and 1000
            axes.set_xscale("symlog", linthresh=10)
            axes.set_xlim(-1, largest * 1.3)
    latency_axes.legend(fontsize=7, loc="upper left")
    figure.suptitle("jetraft read-after-write: coherent read vs Direct Get vs read-your-writes")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
