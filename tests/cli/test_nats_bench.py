"""`nats bench` runs against jetraft: JetStream publish (sync, async), fetch, callback consume,
batched Direct Get and KV put/get, with a few hundred messages (a check that it works, not a
benchmark: bench/natscli_bench.py measures). The stream and consumers are made first with
`nats stream add` / `nats consumer add`, as `nats bench js pub --create` asks for atomic and fast
batch publishing, which jetraft refuses."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from local.cluster import LocalCluster
from tests.cli.natscli import find_cli, run_cli
from tests.node.cluster_fixtures import local_cluster

CLI = find_cli()
pytestmark = pytest.mark.skipif(CLI is None, reason="nats CLI not built (make nats-cli needs Go)")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("bench")) as running:
        yield running


def test_nats_bench_workloads_run_against_jetraft(cluster: LocalCluster) -> None:
    assert CLI is not None
    url = cluster.client_urls[0]
    setup = [
        ["stream", "add", "benchstream", "--subjects", "benchsubj", "--replicas", "3", "--storage", "file",
         "--discard", "new", "--max-bytes", "1GB", "--allow-direct", "--defaults"],
        ["consumer", "add", "benchstream", "fetcher", "--pull", "--deliver", "all", "--ack", "explicit", "--defaults"],
        ["consumer", "add", "benchstream", "consumer", "--pull", "--deliver", "all", "--ack", "explicit", "--defaults"],
    ]  # fmt: skip
    for args in setup:
        result = run_cli(CLI, url, args)
        assert result.returncode == 0, result.output
    workloads = [
        ["bench", "js", "pub", "async", "benchsubj", "--msgs", "500"],
        ["bench", "js", "pub", "sync", "benchsubj", "--msgs", "100"],
        ["bench", "js", "fetch", "--consumer", "fetcher", "--msgs", "600"],
        ["bench", "js", "consume", "--consumer", "consumer", "--msgs", "600"],
        ["bench", "js", "ordered", "--msgs", "600"],
        ["bench", "js", "get", "batch", "--msgs", "600"],
        ["bench", "kv", "put", "--replicas", "3", "--msgs", "100"],
        ["bench", "kv", "get", "--msgs", "100"],
    ]
    for args in workloads:
        result = run_cli(CLI, url, [*args, "--no-progress"], timeout=120)
        assert result.returncode == 0 and "stats:" in result.output, (args, result.output)
    info = run_cli(CLI, url, ["stream", "info", "benchstream", "--json"])
    assert json.loads(info.output)["state"]["messages"] == 600
    consumer = run_cli(CLI, url, ["consumer", "info", "benchstream", "consumer", "--json"])
    state = json.loads(consumer.output)
    assert state["delivered"]["stream_seq"] == 600 and state["num_pending"] == 0
