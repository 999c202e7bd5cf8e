"""One row per run, from its report.json, and the table of a matrix of runs (Markdown)."""

from __future__ import annotations

from typing import Any

# acknowledged writes: queue adds, register puts and compare-and-sets
WRITES_OK = ("add:ok", "write:ok", "cas:ok")
COLUMNS = (
    ("workload", "workload"),
    ("faults", "faults"),
    ("seed", "seed"),
    ("verdict", "verdict"),
    ("acked", "acked writes"),
    ("indeterminate", "indeterminate"),
    ("lost", "lost"),
    ("duplicated", "dup"),
    ("linearizable", "MSG.GET/CAS"),
    ("stale_direct", "stale Direct Get"),
    ("faults_applied", "faults"),
    ("slowest_recovery_s", "slowest recovery s"),
    ("not_serving", "not serving after heal"),
    ("log_problems", "node log problems"),
)


def row(report: dict[str, Any], faults_label: str) -> dict[str, Any]:
    settings = report.get("settings", {})
    operations: dict[str, int] = report.get("operations", {})
    checks = report.get("checks", {})
    acked = sum(count for name, count in operations.items() if name in WRITES_OK)
    indeterminate = sum(count for name, count in operations.items() if name.endswith(":info"))
    heals = [fault["liveness"] for fault in report.get("faults", [])]
    recoveries = [s for heal in heals for s in heal.get("served_after_s", {}).values() if s is not None]
    not_serving = [
        f"#{fault['index']} {fault['kind']}: {','.join(sorted(fault['liveness'].get('not_serving', {})))}"
        for fault in report.get("faults", [])
        if not fault["liveness"].get("ok")
    ]
    if not report.get("final_liveness", {}).get("ok", True):
        not_serving.append("final: " + ",".join(sorted(report["final_liveness"].get("not_serving", {}))))
    set_check = checks.get("set", {})
    linearizability = checks.get("linearizability", {})
    staleness = checks.get("direct_get_staleness", {})
    return {
        "workload": settings.get("workload", "?"),
        "faults": faults_label,
        "seed": settings.get("seed", "?"),
        "verdict": report.get("verdict", "?"),
        "acked": acked,
        "indeterminate": indeterminate,
        "lost": _lost(set_check),
        "duplicated": set_check.get("duplicated_count", "") if set_check else "",
        "linearizable": linearizability.get("verdict", ""),
        "stale_direct": f"{staleness['stale']}/{staleness['direct_reads']}" if staleness else "",
        "faults_applied": len(report.get("faults", [])),
        "slowest_recovery_s": round(max(recoveries), 2) if recoveries else "",
        "not_serving": "; ".join(not_serving),
        "log_problems": sum(entry.get("count", 0) for entry in report.get("node_log_problems", {}).values()),
    }


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(title for _, title in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(str(r.get(name, "")) for name, _ in COLUMNS) + " |" for r in rows]
    return "\n".join(lines)


def _lost(set_check: dict[str, Any]) -> object:
    if not set_check:
        return ""
    return set_check.get("lost_count", "") if set_check.get("final_read") else "no final read"
