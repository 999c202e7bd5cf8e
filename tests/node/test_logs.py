"""A node's logs: JSON lines carrying the node (and group and term on Raft lines), level by flag or env."""

from __future__ import annotations

import io
import json
import logging
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from cluster.node.logs import LEVEL_ENV, configure_logging, resolve_format, resolve_level
from cluster.runtime.workers import node_of
from local.cluster import LocalCluster, node_available, plan_free_nodes
from local.ports import HOST, free_ports

needs_node = pytest.mark.skipif(not node_available(), reason="needs a runnable `jetraft node`")


def _run_one_node(tmp_path: Path, extra_args: list[str]) -> list[str]:
    """Start a one-node cluster, wait until it has elected its meta leader, stop it; its stderr lines."""
    log_dir = tmp_path / "logs"
    # `--log-format auto` overrides LocalCluster's explicit json: stderr is a file, so auto must pick JSON
    cluster = LocalCluster(
        plan_free_nodes(1, 0), tmp_path / "data", extra_args=["--log-format", "auto", *extra_args],
        log_dir=log_dir,
    )  # fmt: skip
    try:
        cluster.start(timeout=60)
    finally:
        cluster.stop()
    return [line for line in (log_dir / "n1.log").read_text().splitlines() if line.strip()]


@needs_node
def test_a_node_logs_json_lines_each_with_its_name_and_raft_lines_with_group_and_term(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LEVEL_ENV, "ERROR")  # the flag wins over the environment
    lines = _run_one_node(tmp_path, ["--log-level", "info"])
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert records, "an INFO node logs its start"
    # a several-worker node's lines carry the worker (n1/w0, n1/w1) or, the supervisor's, the node
    assert all(node_of(record["node"]) == "n1" for record in records), [
        r for r in records if node_of(r.get("node", "")) != "n1"
    ]
    assert all(record["level"] in ("info", "warning", "error") for record in records)
    assert any(record["event"] == "node_started" for record in records)
    raft = [record for record in records if record["event"] == "raft leadership changed"]
    assert raft, "the single node elects itself for the meta group"
    assert raft[-1]["group"] == "_meta_" and raft[-1]["term"] >= 1 and node_of(raft[-1]["leader"]) == "n1"


@needs_node
def test_the_environment_sets_the_level_when_no_flag_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LEVEL_ENV, "warning")
    lines = _run_one_node(tmp_path, [])
    # a healthy start logs only at INFO: with WARNING nothing of it may appear
    assert not [line for line in lines if json.loads(line)["level"] in ("debug", "info")], lines


def test_level_precedence_flag_then_environment_then_info() -> None:
    assert resolve_level("debug", {LEVEL_ENV: "ERROR"}) == logging.DEBUG
    assert resolve_level(None, {LEVEL_ENV: "error"}) == logging.ERROR
    assert resolve_level(None, {}) == logging.INFO
    with pytest.raises(ValueError, match="NOISY"):
        resolve_level(None, {LEVEL_ENV: "noisy"})


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def restore_logging() -> Iterator[None]:
    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        structlog.configure(**saved)
        root.handlers[:] = handlers
        root.setLevel(level)


def test_a_terminal_gets_the_console_renderer_anything_else_json(restore_logging: None) -> None:
    assert resolve_format("auto", _Terminal()) == "console"
    assert resolve_format("auto", io.StringIO()) == "json"
    assert resolve_format("json", _Terminal()) == "json"

    terminal = _Terminal()
    configure_logging("n7", "info", "auto", stream=terminal)
    structlog.get_logger("test").info("stream_leader", stream="ORDERS")
    text = terminal.getvalue()
    assert "stream_leader" in text and "n7" in text and "ORDERS" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text.splitlines()[0])


class _RecordedWrites(io.StringIO):
    """A stream that keeps each write() call apart, as processes sharing one stderr see them."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)


def test_each_line_is_one_write_so_workers_sharing_stderr_do_not_interleave(restore_logging: None) -> None:
    out = _RecordedWrites()
    configure_logging("n3", "info", "json", stream=out)
    structlog.get_logger("test").info("one", stream="ORDERS")
    logging.getLogger("grpc.test").warning("two")
    assert len(out.writes) == 2
    assert all(text.endswith("\n") and text.count("\n") == 1 for text in out.writes)
    assert [json.loads(text)["event"] for text in out.writes] == ["one", "two"]


def test_filtered_levels_and_standard_library_lines_carry_the_node(restore_logging: None) -> None:
    out = io.StringIO()
    configure_logging("n2", "warning", "json", stream=out)
    log: Any = structlog.get_logger("test")
    log.info("dropped")
    log.warning("kept", group="S-ORDERS", term=4)
    logging.getLogger("grpc.test").warning("from a library")
    logging.getLogger("grpc.test").info("dropped too")
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["event"] for r in records] == ["kept", "from a library"]
    assert all(r["node"] == "n2" for r in records)
    assert records[0]["group"] == "S-ORDERS" and records[0]["term"] == 4
    assert records[1]["logger"] == "grpc.test" and records[1]["level"] == "warning"


@needs_node
@pytest.mark.parametrize("taken", ["client", "http"])
def test_a_node_whose_port_is_taken_says_so_in_one_line_and_exits_without_a_traceback(
    tmp_path: Path, taken: str
) -> None:
    client_port, cluster_port, http_port = free_ports(3)
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind((HOST, client_port if taken == "client" else http_port))
    holder.listen()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "cluster.node.command", "--name", "n1", "--host", HOST,
             "--port", str(client_port), "--cluster-port", str(cluster_port), "--http-port", str(http_port),
             "--data-dir", str(tmp_path), "--log-format", "json"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        holder.close()
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    failures = [json.loads(line) for line in done.stderr.splitlines() if "node_failed_to_start" in line]
    assert len(failures) == 1 and "address already in use" in failures[0]["error"], done.stderr
