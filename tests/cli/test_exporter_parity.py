"""prometheus-nats-exporter reads jetraft's monitoring endpoints as it reads nats-server's: the same
workload on a three-node cluster of each, the exporter pointed at one node of each, and every metric
it exports from nats-server must be exported from jetraft too, with jetraft's figures.

Skipped without the exporter binary ($PROMETHEUS_NATS_EXPORTER, or on PATH): the Go module proxy
does not serve it here, so it is built from a source checkout (`go build` in it) by hand.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from local.cluster import LocalCluster
from local.ports import free_ports
from tests.node.cluster_fixtures import local_cluster
from tests.node.test_monitoring_parity import workload
from tests.pipeline.servers import NatsServerProcesses

EXPORTER = os.environ.get("PROMETHEUS_NATS_EXPORTER") or shutil.which("prometheus-nats-exporter")
pytestmark = pytest.mark.skipif(
    EXPORTER is None, reason="prometheus-nats-exporter not found ($PROMETHEUS_NATS_EXPORTER or PATH)"
)
METRIC = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("exporter")) as running:
        yield running


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServerProcesses]:
    with NatsServerProcesses(3, Path(tmp_path_factory.mktemp("reference"))) as processes:
        yield processes


def scrape(monitor_url: str, log: Path) -> dict[str, list[tuple[str, float]]]:
    """Run the exporter against one server's monitoring port; its metrics once it has scraped."""
    assert EXPORTER is not None
    port = free_ports(1)[0]
    args = ["-varz", "-connz", "-subz", "-routez", "-healthz", "-jsz=all", "-a", "127.0.0.1", "-port", str(port)]
    with open(log, "w") as out:
        proc = subprocess.Popen([EXPORTER, *args, monitor_url], stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                    text = resp.read().decode()
                if "jetstream_server_total_streams" in text:
                    # once more: varz's http_req_stats counts the endpoints the first scrape asked for
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                        text = resp.read().decode()
                    break
            except (urllib.error.URLError, OSError):
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the exporter gave no JetStream metrics; see {log}")
            time.sleep(0.2)  # another process: nothing to await
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    metrics: dict[str, list[tuple[str, float]]] = {}
    for line in text.splitlines():
        found = METRIC.match(line)
        if found and not line.startswith("#"):
            metrics.setdefault(found.group(1), []).append((found.group(2) or "", float(found.group(3))))
    return metrics


async def test_the_exporter_exports_the_same_metrics_from_jetraft(
    cluster: LocalCluster, reference: NatsServerProcesses, tmp_path: Path
) -> None:
    ref_target = reference.target()
    clients = [await workload(ref_target.urls[0]), await workload(cluster.specs[0].client_url)]
    try:
        ref = scrape(ref_target.monitor_urls[0], tmp_path / "exporter-nats-server.log")
        ours = scrape(cluster.specs[0].http_url, tmp_path / "exporter-jetraft.log")
    finally:
        for nc in clients:
            await nc.close()
    assert sorted(set(ref) - set(ours)) == []
    assert [value for _, value in ours["jetstream_stream_total_messages"]] == [3.0]
    assert [value for _, value in ours["jetstream_consumer_num_pending"]] == [3.0]
    assert [value for _, value in ours["gnatsd_routez_num_routes"]] == [2.0]
    assert [value for _, value in ours["gnatsd_healthz_status"]] == [0.0]  # the exporter's "ok"
    labels = ours["jetstream_stream_total_messages"][0][0]
    assert 'stream_name="ORDERS"' in labels and 'cluster="jetraft"' in labels
