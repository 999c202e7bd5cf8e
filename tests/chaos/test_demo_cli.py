"""`jetraft demo read-after-write` end to end: attached to a running cluster, and on its own cluster.

Nodes spread Direct Gets at random over the responders by default (as
nats-server does, and as docker compose and `jetraft local up` run them): the
demo must still give rows per answering node, the lagged ones included.
Without `--attach` the demo starts, uses and stops its own cluster.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chaos.readafterwrite.faults import LinkFaults
from cli import demo as demo_cli
from local.cluster import LocalCluster, node_available, plan_free_nodes, start_faultable_links

pytestmark = pytest.mark.skipif(
    not node_available(), reason="needs a runnable `jetraft node` (cluster.node.command)"
)

NODES = {"n1", "n2", "n3", "m1"}
SHORT_RUN = ["--lags", "0,300", "--duration", "2", "--warmup", "0.5", "--max-writes", "300"]


@pytest.fixture(scope="module")
def random_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    specs = plan_free_nodes(3, 1)
    toxiproxy = start_faultable_links(specs, 0, log_path=None)
    running = LocalCluster(specs, tmp_path_factory.mktemp("random"), toxiproxy=toxiproxy)
    running.start(timeout=60)
    try:
        yield running
    finally:
        running.stop()


def _rows(document: dict[str, Any], lag_ms: int, path: str) -> list[dict[str, Any]]:
    return [r for r in document["results"] if r["lag_ms"] == lag_ms and r["path"] == path]


def _assert_fresh_where_promised(document: dict[str, Any]) -> None:
    """STREAM.MSG.GET and min_last_seq reads are never stale, whatever the lag or policy."""
    for row in document["results"]:
        if row["path"] != "direct_get":
            assert row["stale"] == 0, row


def test_attached_to_a_random_policy_cluster_rows_are_per_answering_node_lagged_ones_included(
    random_cluster: LocalCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    toxiproxy_url = random_cluster.toxiproxy_url
    assert toxiproxy_url is not None
    json_path, png_path = tmp_path / "raw.json", tmp_path / "raw.png"
    code = demo_cli.main(
        [
            "read-after-write", "--attach", "--servers", ",".join(random_cluster.client_urls),
            "--toxiproxy", toxiproxy_url, *SHORT_RUN, "--json", str(json_path), "--png", str(png_path),
        ]
    )  # fmt: skip
    assert code == 0
    document = json.loads(json_path.read_text())
    run = document["run"]
    lagged = set(run["layout"]["lagged"])
    # the cluster spreads reads: most were answered by a node other than the one asked
    assert run["local_answer_fraction"] < 0.6, run["local_answer_fraction"]
    assert "were answered by the node they were sent to" in capsys.readouterr().out
    for lag_ms in (0, 300):
        for path in ("direct_get", "direct_get_min_last_seq"):
            rows = _rows(document, lag_ms, path)
            assert {r["responder"] for r in rows} == NODES, (lag_ms, path, rows)
            assert all(r["reads"] + r["refused"] >= 1 for r in rows), rows
            assert sum(r["forwarded"] for r in rows) >= 1
    lagging_rows = [r for r in _rows(document, 300, "direct_get") if r["lagging"]]
    assert {r["responder"] for r in lagging_rows} == lagged
    # a read reaching a lagged node crosses its lagged link, so it waited at least that long
    for row in lagging_rows:
        assert row["reads"] >= 2 and row["latency_ms_p99"] >= 250, row
    assert sum(r["stale"] for r in lagging_rows) >= 1, lagging_rows
    _assert_fresh_where_promised(document)
    assert png_path.read_bytes()[:4] == b"\x89PNG"
    proxies = LinkFaults(toxiproxy_url).proxies_of(lagged)
    assert proxies and all(not proxy.toxics() for proxy in proxies), "the demo left toxics behind"


def _refuses_connections(url: str) -> bool:
    host, _, port = url.removeprefix("nats://").rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return False
    except OSError:
        return True


def test_without_attach_the_demo_runs_its_own_cluster_and_stops_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    json_path, png_path = tmp_path / "own.json", tmp_path / "own.png"
    one_lag = ["--lags", "300", "--duration", "2", "--warmup", "0.5", "--max-writes", "300"]
    code = demo_cli.main(["read-after-write", *one_lag, "--json", str(json_path), "--png", str(png_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "injected latency 300 ms" in out
    document = json.loads(json_path.read_text())
    run = document["run"]
    # its own cluster runs the nodes' defaults: reads spread over the responders
    assert run["local_answer_fraction"] < 0.6, run["local_answer_fraction"]
    assert {r["responder"] for r in _rows(document, 300, "direct_get")} == NODES
    lagging_rows = [r for r in _rows(document, 300, "direct_get") if r["lagging"]]
    assert {r["responder"] for r in lagging_rows} == set(run["layout"]["lagged"])
    for row in lagging_rows:
        assert row["reads"] >= 2 and row["latency_ms_p99"] >= 250, row
    assert sum(r["stale"] for r in lagging_rows) >= 1, lagging_rows
    _assert_fresh_where_promised(document)
    assert png_path.read_bytes()[:4] == b"\x89PNG"
    # its nodes (and Toxiproxy) are gone
    assert all(_refuses_connections(url) for url in run["servers"]), run["servers"]
    assert _refuses_connections(run["toxiproxy"].replace("http://", "nats://"))
