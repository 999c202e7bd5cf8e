"""Start, kill and restart `python -m raft.testnode` processes on 127.0.0.1 (tests and benchmarks).

Ports come from the kernel (bind to port 0), so parallel runs never collide;
processes are stopped by PID (SIGKILL for a crash, SIGTERM for a clean stop),
and `close()` kills whatever is still running.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from local.ports import free_ports
from raft.grpc_setup import prefer_posix_endpoints

HOST = "127.0.0.1"


class NodeRequestError(RuntimeError):
    """A test node answered with an error status (or not at all)."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"{status}: {body}")
        self.status = status
        self.body = body


@dataclass
class NodeProcess:
    name: str
    raft_port: int
    http_port: int
    data_dir: Path
    process: asyncio.subprocess.Process | None = None
    extra_args: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.http_port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None


class TestNodeCluster:
    """N test nodes forming one Raft group."""

    __test__ = False  # not a pytest test class despite the name

    def __init__(
        self, base_dir: Path, names: Sequence[str] = ("n1", "n2", "n3"), args: Sequence[str] = ()
    ) -> None:
        self.base_dir = base_dir
        self.args = list(args)
        ports = iter(free_ports(2 * len(names)))
        self.nodes: dict[str, NodeProcess] = {
            name: NodeProcess(name, next(ports), next(ports), base_dir / name) for name in names
        }
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
        return self._session

    def _command(self, node: NodeProcess) -> list[str]:
        command = [
            sys.executable, "-m", "raft.testnode",
            "--id", node.name,
            "--listen", f"{HOST}:{node.raft_port}",
            "--http", f"{HOST}:{node.http_port}",
            "--data-dir", str(node.data_dir),
        ]  # fmt: skip
        for peer in self.nodes.values():
            if peer is not node:
                command += ["--peer", f"{peer.name}={HOST}:{peer.raft_port}"]
        return command + self.args + node.extra_args

    async def start(self, name: str, ready_timeout: float = 30.0) -> None:
        """Start `name` and wait for its ready line."""
        node = self.nodes[name]
        if node.running:
            raise RuntimeError(f"{name} is already running")
        node.data_dir.mkdir(parents=True, exist_ok=True)
        log_file = open(self.base_dir / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it open
        try:
            node.process = await asyncio.create_subprocess_exec(
                *self._command(node),
                stdout=asyncio.subprocess.PIPE,
                stderr=log_file,
                env=_node_env(),
            )
        finally:
            log_file.close()
        assert node.process.stdout is not None
        try:
            line = await asyncio.wait_for(node.process.stdout.readline(), ready_timeout)
        except TimeoutError:
            await self.kill(name)
            raise RuntimeError(f"{name} did not get ready within {ready_timeout}s") from None
        if not line:
            code = await node.process.wait()
            raise RuntimeError(
                f"{name} exited with {code} before it was ready; see {self.base_dir / name}.log"
            )
        event = json.loads(line)
        if event.get("event") != "ready":
            raise RuntimeError(f"{name} said {line!r} instead of ready")

    async def start_all(self) -> None:
        await asyncio.gather(*(self.start(name) for name in self.nodes))

    async def kill(self, name: str) -> float:
        """kill -9 `name`; returns time.monotonic() taken just before the signal is sent."""
        node = self.nodes[name]
        process = node.process
        killed_at = time.monotonic()
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
            await process.wait()
        return killed_at

    async def terminate(self, name: str, timeout: float = 10.0) -> None:
        node = self.nodes[name]
        process = node.process
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), timeout)
        except TimeoutError:
            await self.kill(name)

    async def close(self) -> None:
        for name in self.nodes:
            await self.kill(name)
        if self._session is not None:
            await self._session.close()
            self._session = None

    # --- HTTP ---

    async def request(self, name: str, method: str, path: str, **kwargs: Any) -> Any:
        node = self.nodes[name]
        try:
            async with self.session.request(method, node.url + path, **kwargs) as resp:
                body = await resp.json(content_type=None)
                if resp.status != 200:
                    raise NodeRequestError(resp.status, body)
                return body
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise NodeRequestError(0, repr(exc)) from exc

    async def status(self, name: str) -> dict[str, Any]:
        return await self.request(name, "GET", "/status")

    async def leader(self, among: Sequence[str] | None = None, timeout: float = 30.0) -> str:
        """The node that says it leads and that every running node in `among` follows."""
        names = [n for n in (among or self.nodes) if self.nodes[n].running]
        deadline = time.monotonic() + timeout
        while True:
            statuses = []
            for name in names:
                with contextlib.suppress(NodeRequestError):
                    statuses.append(await self.status(name))
            leaders = [s["id"] for s in statuses if s["role"] == "leader"]
            if (
                len(leaders) == 1
                and len(statuses) == len(names)
                and all(s["leader"] == leaders[0] for s in statuses)
            ):
                return leaders[0]
            if time.monotonic() > deadline:
                raise TimeoutError(f"no agreed leader among {names} within {timeout}s: {statuses}")
            # The nodes are other processes: there is nothing to await but their answers.
            await asyncio.sleep(0.05)


def _node_env() -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    prefer_posix_endpoints(env)  # as `jetraft node` does: the test node imports grpc at once
    return env
