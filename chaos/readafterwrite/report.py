"""The demonstration's outputs: a text table per lag and a JSON document with every row."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from chaos.readafterwrite.stats import ResultRow

_COLUMNS: tuple[tuple[str, str, int], ...] = (
    # header, row attribute, width
    ("path", "path", 24),
    ("responder", "responder_label", 14),
    ("reads", "reads", 6),
    ("stale", "stale", 6),
    ("stale%", "stale_pct", 7),
    ("412", "refused", 5),
    ("err", "errors", 4),
    ("fwd", "forwarded", 5),
    ("behind seq p50/p99", "behind_seq", 19),
    ("behind ms p50/p99", "behind_ms", 18),
    ("latency ms p50/p99", "latency", 18),
)


def _cells(row: ResultRow) -> dict[str, str]:
    return {
        "path": row.path,
        "responder_label": row.responder
        + (" (lagged)" if row.lagging else " (target)" if row.lag_target else ""),
        "reads": str(row.reads),
        "stale": str(row.stale),
        "stale_pct": f"{100 * row.stale_fraction:.1f}",
        "refused": str(row.refused),
        "errors": str(row.errors),
        "forwarded": str(row.forwarded),
        "behind_seq": f"{row.behind_seq_p50:.0f}/{row.behind_seq_p99:.0f}",
        "behind_ms": f"{row.behind_ms_p50:.0f}/{row.behind_ms_p99:.0f}",
        "latency": f"{row.latency_ms_p50:.1f}/{row.latency_ms_p99:.1f}",
    }


def format_table(lag_ms: int, rows: Iterable[ResultRow]) -> str:
    """The rows of one lag as an aligned text table, headed by the injected latency."""
    lines = [f"injected latency {lag_ms} ms on the lagged nodes' links (each direction)"]
    header = "  ".join(
        title.ljust(width) if i < 2 else title.rjust(width) for i, (title, _, width) in enumerate(_COLUMNS)
    )
    lines += [header, "-" * len(header)]
    for row in rows:
        if row.lag_ms != lag_ms:
            continue
        cells = _cells(row)
        lines.append(
            "  ".join(
                cells[key].ljust(width) if i < 2 else cells[key].rjust(width)
                for i, (_, key, width) in enumerate(_COLUMNS)
            )
        )
    return "\n".join(lines)


def results_document(rows: Iterable[ResultRow], run: dict[str, Any]) -> dict[str, Any]:
    """`{"run": {...settings and cluster layout...}, "results": [row, ...]}`."""
    return {"run": run, "results": [row.to_json() for row in rows]}


def write_json(path: str | Path, rows: Iterable[ResultRow], run: dict[str, Any]) -> None:
    Path(path).write_text(json.dumps(results_document(rows, run), indent=2) + "\n")
