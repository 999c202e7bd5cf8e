"""`jetraft toxiproxy` as users run it, and `ToxiproxyProcess` as other packages will."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from chaos.toxiproxy import VERSION, ToxiproxyProcess, ToxiproxyProcessError
from tests.chaos.conftest import HOST, EchoServer, recv_exactly

JETRAFT = Path(sys.executable).parent / "jetraft"


def _start_cli(*args: str) -> tuple[subprocess.Popen[bytes], dict[str, object]]:
    proc = subprocess.Popen(
        [str(JETRAFT), "toxiproxy", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(5)
        pytest.fail(f"exited {proc.returncode}: {proc.stderr.read().decode() if proc.stderr else ''}")
    return proc, json.loads(line)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def test_jetraft_toxiproxy_serves_until_sigterm(tmp_path: Path) -> None:
    proc, ready = _start_cli("--host", HOST)
    try:
        assert ready["event"] == "ready"
        port = int(str(ready["port"]))
        assert ready["url"] == f"http://{HOST}:{port}"
        assert requests.get(f"{ready['url']}/version", timeout=5).json() == {"version": VERSION}
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(10) == 0
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((HOST, port), timeout=5).close()
    finally:
        _kill(proc)


def test_config_file_populates_proxies_at_start(tmp_path: Path, echo: EchoServer) -> None:
    config = tmp_path / "proxies.json"
    config.write_text(json.dumps([{"name": "from-file", "upstream": echo.address, "listen": f"{HOST}:0"}]))
    proc, ready = _start_cli("--config", str(config), "--seed", "1")
    try:
        proxies = requests.get(f"{ready['url']}/proxies", timeout=5).json()
        assert list(proxies) == ["from-file"]
        host, port = proxies["from-file"]["listen"].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(b"hello")
            assert recv_exactly(sock, 5) == b"hello"
    finally:
        _kill(proc)


def test_busy_port_exits_1_with_a_message() -> None:
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [str(JETRAFT), "toxiproxy", "--port", str(port)], capture_output=True, timeout=30, check=False
        )
    assert result.returncode == 1
    assert f"cannot listen on {HOST}:{port}" in result.stderr.decode()


def test_unreadable_config_exits_1(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(JETRAFT), "toxiproxy", "--port", "0", "--config", str(tmp_path / "missing.json")],
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 1
    assert "missing.json" in result.stderr.decode()


def test_version_flag() -> None:
    result = subprocess.run(
        [str(JETRAFT), "toxiproxy", "--version"], capture_output=True, timeout=30, check=True
    )
    assert result.stdout.decode().strip() == f"jetraft toxiproxy version {VERSION}"


def test_toxiproxy_process_starts_and_stops_by_pid() -> None:
    process = ToxiproxyProcess(seed=3)
    process.start()
    try:
        pid = process.pid
        assert requests.get(f"{process.url}/proxies", timeout=5).json() == {}
    finally:
        process.stop()
    assert process.returncode() == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_toxiproxy_process_reports_a_failed_start() -> None:
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        process = ToxiproxyProcess(port=taken.getsockname()[1])
        with pytest.raises(ToxiproxyProcessError, match="exited with code 1"):
            process.start()
    assert process.returncode() == 1
