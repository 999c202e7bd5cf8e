"""The Grafana dashboards: valid dashboard JSON, up to date with deploy/dashboards.py, reading real metrics."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cluster.runtime.metrics import NodeMetrics
from deploy.dashboards import DASHBOARDS, DASHBOARDS_DIR, render
from tests.deploy.deploy_files import DEPLOY_DIR, load_json, load_yaml
from tests.deploy.prometheus_process import PROMTOOL_BINARY
from tests.deploy.promql_names import exported_sample_names, metric_names, with_range

# series Prometheus itself adds to every scrape target
PROMETHEUS_SERIES = {"up"}
EXPECTED_TITLES = {"Read spread", "Replication", "Cluster overview"}


def provisioned_datasource_uid() -> str:
    (datasource,) = load_yaml(DEPLOY_DIR / "grafana/provisioning/datasources/prometheus.yml")["datasources"]
    return datasource["uid"]


def dashboard_files() -> list[Path]:
    return sorted(DASHBOARDS_DIR.glob("*.json"))


def panel_exprs(dashboard: dict[str, Any]) -> list[str]:
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def test_committed_dashboards_match_their_definitions() -> None:
    assert [p.name for p in dashboard_files()] == sorted(d.file_name for d in DASHBOARDS)
    for dashboard in DASHBOARDS:
        committed = (DASHBOARDS_DIR / dashboard.file_name).read_text()
        assert committed == render(dashboard), f"run `python -m deploy.dashboards` ({dashboard.file_name})"


@pytest.mark.parametrize("path", dashboard_files(), ids=lambda p: p.stem)
def test_dashboard_is_valid_grafana_json(path: Path) -> None:
    dashboard = load_json(path)
    assert isinstance(dashboard["schemaVersion"], int) and dashboard["schemaVersion"] >= 36
    assert dashboard["uid"] and len(dashboard["uid"]) <= 40  # Grafana's uid limit
    assert dashboard["title"] in EXPECTED_TITLES
    uid = provisioned_datasource_uid()
    panels = dashboard["panels"]
    assert panels
    assert len({panel["id"] for panel in panels}) == len(panels)
    for panel in panels:
        assert panel["type"] in {"timeseries", "stat", "table"}
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["w"] > 0 and grid["x"] + grid["w"] <= 24
        assert panel["datasource"] == {"type": "prometheus", "uid": uid}, panel["title"]
        assert panel["targets"], panel["title"]
        ref_ids = [target["refId"] for target in panel["targets"]]
        assert len(set(ref_ids)) == len(ref_ids)
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == uid
            assert target["expr"].strip()


def test_all_three_dashboards_exist() -> None:
    assert {load_json(path)["title"] for path in dashboard_files()} == EXPECTED_TITLES


def test_every_query_reads_only_metrics_a_node_exports() -> None:
    known = exported_sample_names(NodeMetrics("n1").registry) | PROMETHEUS_SERIES
    for path in dashboard_files():
        for expr in panel_exprs(load_json(path)):
            names = metric_names(expr)
            assert names, f"{path.name}: no metric in {expr!r}"
            assert names <= known, f"{path.name}: {expr!r} reads unknown {names - known}"


def test_metric_name_extraction_sees_metrics_and_skips_the_rest() -> None:
    expr = 'sum by (node, le) (rate(jetraft_nope_total{status!="ok", role=~"a|b"}[$__rate_interval])) / up'
    assert metric_names(expr) == {"jetraft_nope_total", "up"}
    assert metric_names("max by (group) (a_metric - b_metric) == 1") == {"a_metric", "b_metric"}


def test_every_query_parses_as_promql(tmp_path: Path) -> None:
    if PROMTOOL_BINARY is None:
        pytest.skip("promtool is not installed (apt-get install -y prometheus)")
    # promtool parses recording rules offline: one rule per panel query
    rules = [
        {"record": f"jetraft:check:{index}", "expr": with_range(expr, "1m")}
        for index, expr in enumerate(e for path in dashboard_files() for e in panel_exprs(load_json(path)))
    ]
    rules_file = tmp_path / "rules.yml"

    rules_file.write_text(json.dumps({"groups": [{"name": "dashboards", "rules": rules}]}))
    result = subprocess.run(
        [PROMTOOL_BINARY, "check", "rules", str(rules_file)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(rules)} rules found" in result.stdout
    rules_file.write_text(
        json.dumps({"groups": [{"name": "bad", "rules": [{"record": "x", "expr": "sum(("}]}]})
    )
    bad = subprocess.run([PROMTOOL_BINARY, "check", "rules", str(rules_file)], capture_output=True, text=True)
    assert bad.returncode != 0
