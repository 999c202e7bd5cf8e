"""`pip install jetraft` runs nodes and local clusters; the demo and the Spark pipeline need their extras
and say so. Checked by running the real commands with the extras' packages made unimportable (for the
command and every process it starts), as in a plain venv without them."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from local.cluster import node_available, plan_free_nodes
from tests.process_output import read_lines_until

# Top-level modules of the packages only the extras bring.
EXTRAS_MODULES = ("nats", "toxiproxy", "matplotlib", "pyspark", "pyarrow")

_BLOCKER = '''
import importlib.abc, os, sys

class _Blocked(importlib.abc.MetaPathFinder):
    names = set(os.environ["JETRAFT_TEST_BLOCKED"].split(","))

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None

sys.meta_path.insert(0, _Blocked())
'''


def _env_without_extras(tmp_path: Path) -> dict[str, str]:
    site = tmp_path / "blocker"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_BLOCKER)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(Path(__file__).resolve().parent.parent)])
    env["JETRAFT_TEST_BLOCKED"] = ",".join(EXTRAS_MODULES)
    return env


def test_the_blocker_really_blocks_the_extras(tmp_path: Path) -> None:
    probe = subprocess.run(
        [sys.executable, "-c", "import nats"], env=_env_without_extras(tmp_path), capture_output=True, text=True
    )
    assert probe.returncode != 0 and "No module named 'nats'" in probe.stderr


def _local_up(tmp_path: Path, nodes: int, mirror_nodes: int, *options: str) -> subprocess.Popen[bytes]:
    specs = plan_free_nodes(nodes, mirror_nodes)
    command = [
        sys.executable, "-m", "cli.main", "local", "up",
        "--nodes", str(nodes), "--mirror-nodes", str(mirror_nodes),
        "--port-base", str(specs[0].client_port), "--http-port-base", str(specs[0].http_port),
        "--cluster-port-base", str(specs[0].cluster_port), "--data-dir", str(tmp_path / "data"),
        "--workers", str(specs[0].workers),  # the plan's ($JETRAFT_TEST_WORKERS): its cluster ports go that far apart
        *options,
    ]  # fmt: skip
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_env_without_extras(tmp_path),
        start_new_session=True,
    )


def _stopped(proc: subprocess.Popen[bytes], timeout: float, data_dir: Path) -> int | None:
    """Its exit code once it exits within `timeout`; None if it does not. Either way, nothing it
    started outlives the test: it is killed by PID if it hangs, and so are its nodes (each runs in a
    session of its own, so killing the command does not take them along)."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None
    finally:
        if proc.stdout is not None:
            proc.stdout.close()
        for pid in _node_pids(data_dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _node_pids(data_dir: Path) -> list[int]:
    """The node processes still running with their data under `data_dir`."""
    wanted = str(data_dir).encode()
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if b"cluster.node.command" in (args := cmdline.read_bytes()) and wanted in args:
                pids.append(int(cmdline.parent.name))
    return pids


@pytest.mark.skipif(not node_available(), reason="needs a runnable `jetraft node` (cluster.node.command)")
def test_local_up_runs_a_cluster_with_a_mirror_node_without_any_extra(tmp_path: Path) -> None:
    proc = _local_up(tmp_path, 2, 1)
    try:
        lines = read_lines_until(proc, "ready", timeout=90)
        assert [line.split(":")[0] for line in lines[:3]] == ["n1", "n2", "m1 (mirror)"]
        leaders = set()
        for line in lines[:3]:
            http_url = line.split()[-1]
            with urllib.request.urlopen(f"{http_url}/healthz", timeout=5) as resp:
                leaders.add(json.loads(resp.read())["meta_leader"])
        assert len(leaders) == 1 and None not in leaders, leaders
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        assert _stopped(proc, timeout=30, data_dir=tmp_path / "data") == 0


@pytest.mark.skipif(not node_available(), reason="needs a runnable `jetraft node` (cluster.node.command)")
def test_local_up_stops_its_nodes_when_signals_come_in_a_burst(tmp_path: Path) -> None:
    """Ctrl-C pressed again and again, or a supervisor's SIGTERM on top of the user's: it still stops."""
    proc = _local_up(tmp_path, 1, 0)
    lines = read_lines_until(proc, "ready", timeout=90)
    client_port = int(lines[0].split()[1].rpartition(":")[2])
    # signals without pause for 3 s, or until it is gone: some land while an earlier one is being handled
    deadline = time.monotonic() + 3
    sent = 0
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            os.kill(proc.pid, signal.SIGINT if sent % 2 else signal.SIGTERM)
        except ProcessLookupError:
            break
        sent += 1
    code = _stopped(proc, timeout=30, data_dir=tmp_path / "data")
    assert code is not None, f"deadlocked in its signal handler after {sent} signals"
    # a signal landing after its handlers are gone, while the interpreter exits, may end it by signal:
    # by then its node is stopped
    assert code in (0, -signal.SIGINT, -signal.SIGTERM), code
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", client_port), timeout=2).close()


def test_the_demo_without_its_extra_says_which_to_install(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "cli.main", "demo", "read-after-write"],
        env=_env_without_extras(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "pip install 'jetraft[demo]'" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_the_pipeline_without_its_extra_says_which_to_install(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", "import pipeline"],
        env=_env_without_extras(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "pip install 'jetraft[spark]'" in result.stderr, result.stderr


def _local_control(tmp_path: Path, action: str, node: str) -> subprocess.CompletedProcess[str]:
    """`jetraft local <action> <node>` beside the `local up` running on tmp_path's data (no extras either)."""
    command = [sys.executable, "-m", "cli.main", "local", action, node, "--data-dir", str(tmp_path / "data")]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(tmp_path / "blocker"), str(Path(__file__).resolve().parent.parent)]
    )
    env["JETRAFT_TEST_BLOCKED"] = ",".join(EXTRAS_MODULES)
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, check=False)


def _healthy(http_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{http_url}/healthz", timeout=5) as resp:
            return resp.status == 200
    except OSError:
        return False


@pytest.mark.skipif(not node_available(), reason="needs a runnable `jetraft node` (cluster.node.command)")
def test_local_up_hands_its_publish_hold_to_every_node(tmp_path: Path) -> None:
    proc = _local_up(tmp_path, 2, 0, "--publish-hold", "1.5")
    try:
        read_lines_until(proc, "ready", timeout=90)
        commands = [Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") for pid in _node_pids(tmp_path / "data")]
        assert commands and all(b"--publish-hold" in args for args in commands)
        assert {args[args.index(b"--publish-hold") + 1] for args in commands} == {b"1.5"}
    finally:
        proc.send_signal(signal.SIGINT)
        assert _stopped(proc, 60, tmp_path / "data") == 0


@pytest.mark.parametrize("value", ["-1", "nan"])
def test_local_up_refuses_a_publish_hold_below_zero(tmp_path: Path, value: str) -> None:
    proc = _local_up(tmp_path, 1, 0, "--publish-hold", value)
    assert _stopped(proc, 30, tmp_path / "data") == 2
    assert not (tmp_path / "data").exists()  # refused before anything started


@pytest.mark.skipif(not node_available(), reason="needs a runnable `jetraft node` (cluster.node.command)")
def test_local_up_keeps_the_survivors_and_stops_and_starts_one_node(tmp_path: Path) -> None:
    proc = _local_up(tmp_path, 3, 0)
    try:
        lines = read_lines_until(proc, "ready", timeout=90)
        http = {line.split(":")[0]: line.split()[-1] for line in lines[:3]}
        state = json.loads((tmp_path / "data" / "local-control" / "cluster.json").read_text())
        assert state["pid"] == proc.pid and sorted(state["nodes"]) == ["n1", "n2", "n3"]

        killed = _local_control(tmp_path, "kill", "n2")
        assert killed.returncode == 0 and "n2 killed" in killed.stdout, killed
        assert _local_control(tmp_path, "kill", "n2").returncode == 1  # it is not running any more
        assert proc.poll() is None and _healthy(http["n1"]) and _healthy(http["n3"])
        assert not _healthy(http["n2"])
        started = _local_control(tmp_path, "start", "n2")
        assert started.returncode == 0 and "n2 started" in started.stdout, started
        assert _healthy(http["n2"])

        # a node dying on its own (not asked for): the command says so and keeps the others
        n3_pid = json.loads((tmp_path / "data" / "local-control" / "cluster.json").read_text())["nodes"][
            "n3"
        ]["pid"]
        os.kill(n3_pid, signal.SIGKILL)
        stopped = _local_control(tmp_path, "stop", "n1")  # the command still answers after n3's death
        assert stopped.returncode == 0 and "n1 stopped" in stopped.stdout, stopped
        state = json.loads((tmp_path / "data" / "local-control" / "cluster.json").read_text())
        running = {name: node["running"] for name, node in state["nodes"].items()}
        assert proc.poll() is None and running == {"n1": False, "n2": True, "n3": False}, running
        for name in ("n1", "n3"):
            again = _local_control(tmp_path, "start", name)
            assert again.returncode == 0, again
        assert all(_healthy(url) for url in http.values())
        assert _local_control(tmp_path, "start", "n9").returncode == 1
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        assert _stopped(proc, timeout=30, data_dir=tmp_path / "data") == 0
    assert not (tmp_path / "data" / "local-control" / "cluster.json").exists()
    assert _local_control(tmp_path, "start", "n1").returncode == 1  # nothing runs there now
