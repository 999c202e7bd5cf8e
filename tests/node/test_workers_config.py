"""A several-worker node's configuration and the node-level health and metrics made from its workers'
(pure functions; the processes themselves are in test_workers.py)."""

import argparse
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from cluster.node.config import ConfigError, NodeConfig, add_node_arguments, config_from_args
from cluster.node.supervision.node_health import MergedMetrics, node_health
from cluster.node.worker_config import worker_config
from cluster.runtime.metrics import NodeMetrics
from cluster.runtime.workers import meta_learners, meta_voters, node_count, node_of, worker_name


def _parse(argv: list[str]) -> NodeConfig:
    parser = argparse.ArgumentParser()
    add_node_arguments(parser)
    return config_from_args(parser.parse_args(argv))


def test_worker_names_say_their_machine() -> None:
    assert worker_name("n1", 0, 1) == "n1"  # a single-worker node keeps its name
    assert worker_name("n1", 1, 2) == "n1/w1"
    assert [node_of(m) for m in ("n1", "n1/w0", "n1/w1")] == ["n1", "n1", "n1"]
    members = ["n1/w0", "n1/w1", "n2/w0", "n2/w1"]
    assert meta_voters(members) == ("n1/w0", "n2/w0")
    assert meta_learners(members) == ("n1/w1", "n2/w1")
    assert node_count(members) == 2
    assert meta_voters(["n1", "n2"]) == ("n1", "n2") and meta_learners(["n1", "n2"]) == ()


def test_a_worker_is_a_member_on_the_node_s_client_port_and_its_own_cluster_port() -> None:
    config = _parse(
        ["--name", "n1", "--port", "4222", "--cluster-port", "6222", "--http-port", "8222", "--workers", "2",
         "--peer", "n2=10.0.0.2:7000", "--data-dir", "/data"]
    )  # fmt: skip
    worker = worker_config(config, 1)
    assert worker.name == "n1/w1"
    assert (worker.client_port, worker.cluster_port, worker.http_port) == (4222, 6223, 0)
    assert worker.peers == {
        "n1/w0": "127.0.0.1:6222",
        "n2/w0": "10.0.0.2:7000",
        "n2/w1": "10.0.0.2:7001",
    }
    assert worker.client_url == "nats://127.0.0.1:4222"  # INFO advertises the node's one URL
    assert worker.node_data_dir == Path("/data/n1/w1")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--workers", "0"], "at least 1"),
        (["--workers", "2", "--port", "0"], "fixed client port"),
        (["--workers", "2", "--cluster-port", "65535"], "out of range"),
        (["--workers", "2", "--worker-index", "2"], "not below workers"),
        (["--peer", "n2/w1=127.0.0.1:1"], "slash"),
    ],
)
def test_worker_settings_that_cannot_run_are_refused(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _parse(["--name", "n1", *argv])


def test_node_names_cannot_look_like_worker_names() -> None:
    with pytest.raises(ConfigError, match="slashes"):
        _parse(["--name", "n1/w0"])


def test_the_worker_index_is_not_a_config_file_setting(tmp_path: Path) -> None:
    path = tmp_path / "node.toml"
    path.write_text('name = "n1"\nworkers = 2\nworker_index = 1\n')
    with pytest.raises(ConfigError, match="unknown settings worker_index"):
        _parse(["--config", str(path)])


def _worker_body(name: str, leader: str | None, streams: list[str]) -> dict[str, object]:
    return {"status": "ok" if leader else "unavailable", "node": name, "meta_leader": leader, "streams": streams}


def test_a_node_is_healthy_only_when_every_worker_is() -> None:
    ok, body = node_health(
        "n1", {"n1/w0": _worker_body("n1/w0", "n2/w0", ["A"]), "n1/w1": _worker_body("n1/w1", "n2/w0", ["B"])}
    )
    assert ok
    assert (body["meta_leader"], body["meta_leader_worker"], body["streams"]) == ("n2", "n2/w0", ["A", "B"])
    ok, body = node_health("n1", {"n1/w0": _worker_body("n1/w0", "n2/w0", []), "n1/w1": None})
    assert not ok
    ok, _ = node_health("n1", {"n1/w0": _worker_body("n1/w0", "n2/w0", []), "n1/w1": _worker_body("n1/w1", None, [])})
    assert not ok


def test_metrics_are_merged_and_labelled_by_worker() -> None:
    texts = {}
    for worker, count in (("n1/w0", 3), ("n1/w1", 5)):
        metrics = NodeMetrics(worker)
        metrics.direct_get_requests.labels("ORDERS", worker, "follower", "ok").inc(count)
        texts[worker] = generate_latest(metrics.registry).decode()
    merged = MergedMetrics()
    merged.texts = texts
    registry = CollectorRegistry()
    registry.register(merged)  # type: ignore[arg-type]
    text = generate_latest(registry).decode()
    assert text.count("# TYPE jetraft_direct_get_requests_total counter") == 1
    for worker, count in (("n1/w0", 3), ("n1/w1", 5)):
        assert (
            f'jetraft_direct_get_requests_total{{node="{worker}",role="follower",status="ok",stream="ORDERS",'
            f'worker="{worker}"}} {count}.0'
        ) in text
