"""One `jetraft node --config FILE.conf` process for tests: nats-server's format, free ports, stopped by PID."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from local.ports import HOST, free_port_base


@dataclass(frozen=True)
class ConfigFileNode:
    proc: subprocess.Popen[bytes]
    client_port: int
    cluster_port: int
    http_port: int
    config_path: Path
    log_path: Path

    @property
    def client_url(self) -> str:
        return f"nats://{HOST}:{self.client_port}"

    @property
    def cluster_address(self) -> str:
        return f"{HOST}:{self.cluster_port}"


def node_config_text(client_port: int, http_port: int, cluster_port: int, store_dir: Path, body: str) -> str:
    """The ports and store of a test node, then `body`: nats-server's own syntax."""
    return (
        f"server_name: n1\nlisten: {HOST}:{client_port}\nhttp: {HOST}:{http_port}\n"
        # top-level store_dir (nats-server's other spelling), so that a body's own jetstream block keeps it
        f"store_dir: '{store_dir}'\n"
        f"cluster {{ listen: {HOST}:{cluster_port} }}\n{body}"
    )


def _healthy(http_port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{http_port}/healthz", timeout=1) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextlib.asynccontextmanager
async def node_from_config(
    tmp_path: Path, body: str, timeout: float = 60.0, workers: int = 1
) -> AsyncIterator[ConfigFileNode]:
    """The node, healthy; with `workers` > 1 a node of that many workers (worker i on cluster port + i)."""
    base = free_port_base(2 + workers)
    client_port, http_port, cluster_port = base, base + 1, base + 2
    config_path = tmp_path / "node.conf"
    # `cluster { listen }` is set here; a body with its own cluster block adds to it (the later key wins in
    # nats-server's format, so the body's block would replace it: merge by writing the listen into it).
    text = node_config_text(client_port, http_port, cluster_port, tmp_path / "data", "")
    if "cluster {" in body:
        text = text.replace(f"cluster {{ listen: {HOST}:{cluster_port} }}\n", "")
        body = body.replace("cluster {", f"cluster {{\n  listen: {HOST}:{cluster_port}", 1)
    config_path.write_text(text + body)
    log_path = tmp_path / "node.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cluster.node.command", "--config", str(config_path), "--log-format", "json"]
            + (["--workers", str(workers)] if workers > 1 else []),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    node = ConfigFileNode(proc, client_port, cluster_port, http_port, config_path, log_path)
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not await asyncio.to_thread(_healthy, http_port):
            if proc.poll() is not None:
                raise AssertionError(f"node exited with {proc.returncode}: {log_path.read_text()[-2000:]}")
            if loop.time() > deadline:
                raise AssertionError(f"node not healthy within {timeout}s: {log_path.read_text()[-2000:]}")
            await asyncio.sleep(0.1)
        yield node
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(proc.wait, 10)
            except subprocess.TimeoutExpired:
                proc.kill()
                await asyncio.to_thread(proc.wait, 10)
