"""The three Grafana dashboards, defined once in Python and written as provisioned JSON files.

`python -m deploy.dashboards` rewrites deploy/grafana/dashboards/*.json; a test
checks the committed files match, so edit the panels here, not in the JSON.
Every query uses `$__rate_interval`, which Grafana sizes from the datasource's
scrape interval (deploy/grafana/provisioning/datasources/prometheus.yml).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATASOURCE_UID = "jetraft-prometheus"
DASHBOARDS_DIR = Path(__file__).parent / "grafana" / "dashboards"
# Grafana 10/11 dashboard JSON model
SCHEMA_VERSION = 39
RATE = "$__rate_interval"


@dataclass(frozen=True, slots=True)
class Query:
    expr: str
    legend: str


@dataclass(frozen=True, slots=True)
class Panel:
    title: str
    description: str
    queries: tuple[Query, ...]
    unit: str = "short"
    # "normal" stacks series, "percent" shows each series' share of the total
    stacking: str = "none"
    kind: str = "timeseries"
    width: int = 12


@dataclass(frozen=True, slots=True)
class Dashboard:
    uid: str
    title: str
    description: str
    panels: tuple[Panel, ...]
    tags: tuple[str, ...] = field(default=("jetraft",))

    @property
    def file_name(self) -> str:
        return f"{self.uid.removeprefix('jetraft-')}.json"


def _rate(selector: str) -> str:
    return f"rate({selector}[{RATE}])"


DIRECT_GETS = "jetraft_direct_get_requests_total"
DIRECT_GETS_FAILED = 'jetraft_direct_get_requests_total{status!="ok"}'
MSG_GETS_FAILED = 'jetraft_msg_get_requests_total{status!="ok"}'
PUBLISHES_OK = 'jetraft_publishes_total{status="ok"}'
PUBLISHES_FAILED = 'jetraft_publishes_total{status!="ok"}'

READ_SPREAD = Dashboard(
    uid="jetraft-read-spread",
    title="Read spread",
    description="How Direct Get reads spread over stream leaders, followers and mirrors",
    panels=(
        Panel(
            "Direct Get requests per node",
            "Direct Gets answered per second by each node, stacked: an even spread means reads scale out",
            (Query(f"sum by (node) ({_rate(DIRECT_GETS)})", "{{node}}"),),
            unit="reqps",
            stacking="normal",
        ),
        Panel(
            "Direct Get requests per stream",
            "Direct Gets answered per second for each stream (a mirror counts under the mirror stream's name)",
            (Query(f"sum by (stream) ({_rate(DIRECT_GETS)})", "{{stream}}"),),
            unit="reqps",
            stacking="normal",
        ),
        Panel(
            "Share served by leader, followers and mirrors",
            "Each role's share of all Direct Gets answered",
            (Query(f"sum by (role) ({_rate(DIRECT_GETS)})", "{{role}}"),),
            unit="reqps",
            stacking="percent",
        ),
        Panel(
            "MSG.GET versus Direct Get",
            "Coherent STREAM.MSG.GET (leader only) against Direct Get (any replica) per second",
            (
                Query(f"sum({_rate('jetraft_msg_get_requests_total')})", "MSG.GET"),
                Query(f"sum({_rate(DIRECT_GETS)})", "Direct Get"),
            ),
            unit="reqps",
        ),
        Panel(
            "Direct Get requests per node and role",
            "Who answers: each node's Direct Gets per second, split by the role it answered in",
            (Query(f"sum by (node, role) ({_rate(DIRECT_GETS)})", "{{node}} {{role}}"),),
            unit="reqps",
            stacking="normal",
        ),
        Panel(
            "Direct Get answers by status",
            "ok, 404 (no message), 408 (bad request), 412 (min_last_seq not reached), 413 (too many subjects)",
            (Query(f"sum by (status) ({_rate(DIRECT_GETS)})", "{{status}}"),),
            unit="reqps",
            stacking="normal",
        ),
    ),
)

REPLICATION = Dashboard(
    uid="jetraft-replication",
    title="Replication",
    description="How far each replica and mirror lags, Raft indexes and leadership",
    panels=(
        Panel(
            "Replica lag (messages)",
            "Messages each copy is behind its stream leader (a mirror: behind its origin)",
            (
                Query(
                    "max by (stream, node, role) (jetraft_replica_lag_messages)",
                    "{{stream}} {{node}} {{role}}",
                ),
            ),
        ),
        Panel(
            "Replica lag (seconds)",
            "Age of the newest message each copy lacks (0 when caught up)",
            (
                Query(
                    "max by (stream, node, role) (jetraft_replica_lag_seconds)",
                    "{{stream}} {{node}} {{role}}",
                ),
            ),
            unit="s",
        ),
        Panel(
            "Last applied sequence per copy",
            "The last stream sequence applied to each node's copy",
            (Query("max by (stream, node, role) (jetraft_stream_last_seq)", "{{stream}} {{node}} {{role}}"),),
        ),
        Panel(
            "Raft commit index",
            "Commit index of each Raft group on each node",
            (Query("max by (group, node) (jetraft_raft_commit_index)", "{{group}} {{node}}"),),
        ),
        Panel(
            "Raft applied index",
            "Applied index of each Raft group on each node",
            (Query("max by (group, node) (jetraft_raft_applied_index)", "{{group}} {{node}}"),),
        ),
        Panel(
            "Apply backlog (commit - applied)",
            "Committed entries a node has not applied yet",
            (
                Query(
                    "max by (group, node) (jetraft_raft_commit_index - jetraft_raft_applied_index)",
                    "{{group}} {{node}}",
                ),
            ),
        ),
        Panel(
            "Leader changes",
            "Leader changes each node saw, per group, over the last 5 minutes",
            (Query("sum by (group) (increase(jetraft_raft_leader_changes_total[5m]))", "{{group}}"),),
        ),
        Panel(
            "Raft term",
            "Highest term seen per group",
            (Query("max by (group) (jetraft_raft_term)", "{{group}}"),),
        ),
        Panel(
            "Group leaders",
            "Which node leads each group (1 = leader)",
            (Query("max by (group, node) (jetraft_raft_is_leader) == 1", "{{group}}: {{node}}"),),
            kind="table",
            width=24,
        ),
    ),
)

CLUSTER_OVERVIEW = Dashboard(
    uid="jetraft-cluster-overview",
    title="Cluster overview",
    description="Publishes, PubAck latency, connections and errors across the cluster",
    panels=(
        Panel(
            "Nodes up",
            "Nodes Prometheus scrapes successfully",
            (Query('sum(up{job="jetraft"})', "nodes up"),),
            kind="stat",
            width=6,
        ),
        Panel(
            "Publishes per stream",
            "Publishes stored per second by each stream's leader",
            (Query(f"sum by (stream) ({_rate(PUBLISHES_OK)})", "{{stream}}"),),
            unit="ops",
            stacking="normal",
            width=18,
        ),
        Panel(
            "PubAck latency",
            "Publish reaching the leader to PubAck sent: percentiles over every stream",
            tuple(
                Query(
                    f"histogram_quantile({q}, sum by (le) ({_rate('jetraft_puback_latency_seconds_bucket')}))",
                    f"p{round(q * 100)}",
                )
                for q in (0.5, 0.9, 0.99)
            ),
            unit="s",
        ),
        Panel(
            "Client connections",
            "Open NATS client connections per node",
            (Query("max by (node) (jetraft_client_connections)", "{{node}}"),),
            stacking="normal",
        ),
        Panel(
            "Route connections",
            "Peers each node has a live route to",
            (Query("max by (node) (jetraft_route_connections)", "{{node}}"),),
        ),
        Panel(
            "Errors",
            "Requests that did not succeed, per second: publishes (duplicate, error), Direct Get and MSG.GET statuses",
            (
                Query(
                    f"sum by (stream, status) ({_rate(PUBLISHES_FAILED)})",
                    "publish {{stream}} {{status}}",
                ),
                Query(
                    f"sum by (stream, status) ({_rate(DIRECT_GETS_FAILED)})",
                    "Direct Get {{stream}} {{status}}",
                ),
                Query(
                    f"sum by (stream, status) ({_rate(MSG_GETS_FAILED)})",
                    "MSG.GET {{stream}} {{status}}",
                ),
            ),
            unit="reqps",
        ),
    ),
)

DASHBOARDS = (READ_SPREAD, REPLICATION, CLUSTER_OVERVIEW)


def _datasource() -> dict[str, str]:
    return {"type": "prometheus", "uid": DATASOURCE_UID}


def _field_config(panel: Panel) -> dict[str, Any]:
    if panel.kind != "timeseries":
        return {"defaults": {"unit": panel.unit}, "overrides": []}
    custom = {
        "drawStyle": "line",
        "lineWidth": 1,
        "fillOpacity": 30 if panel.stacking != "none" else 0,
        "showPoints": "never",
        "stacking": {"mode": panel.stacking, "group": "A"},
    }
    return {"defaults": {"unit": panel.unit, "custom": custom}, "overrides": []}


def _panel_json(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    targets = [
        {
            "datasource": _datasource(),
            "refId": chr(ord("A") + index),
            "expr": query.expr,
            "legendFormat": query.legend,
            **({"instant": True, "format": "table"} if panel.kind == "table" else {"range": True}),
        }
        for index, query in enumerate(panel.queries)
    ]
    return {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": _datasource(),
        "gridPos": {"h": 8, "w": panel.width, "x": x, "y": y},
        "fieldConfig": _field_config(panel),
        "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True}},
        "targets": targets,
    }


def dashboard_json(dashboard: Dashboard) -> dict[str, Any]:
    panels: list[dict[str, Any]] = []
    x = y = 0
    for panel_id, panel in enumerate(dashboard.panels, start=1):
        if x + panel.width > 24:
            x, y = 0, y + 8
        panels.append(_panel_json(panel, panel_id, x, y))
        x += panel.width
    return {
        "uid": dashboard.uid,
        "title": dashboard.title,
        "description": dashboard.description,
        "tags": list(dashboard.tags),
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": True,
        "refresh": "5s",
        "time": {"from": "now-15m", "to": "now"},
        "timezone": "browser",
        "templating": {"list": []},
        "annotations": {"list": []},
        "panels": panels,
    }


def render(dashboard: Dashboard) -> str:
    return json.dumps(dashboard_json(dashboard), indent=2) + "\n"


def write_all(directory: Path = DASHBOARDS_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for dashboard in DASHBOARDS:
        path = directory / dashboard.file_name
        path.write_text(render(dashboard))
        written.append(path)
    return written


if __name__ == "__main__":
    for written_path in write_all():
        print(written_path, file=sys.stdout)
