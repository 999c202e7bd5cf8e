"""A node of several workers: the supervisor process that starts, watches and restarts them.

`jetraft node --workers N` (N > 1) runs this instead of a node: N worker
processes, each `jetraft node` with the same flags plus `--worker-index i`
(cluster/node/worker_config.py says what a worker is). The supervisor holds
no cluster state; it
- starts every worker and restarts one that exits (backing off up to 5 s),
- serves the node's HTTP port: `/healthz` healthy when every worker is (with their PIDs),
  `/metrics` the workers' series merged, each labelled with its worker, and nats-server's
  monitoring endpoints (/varz, /connz, /jsz, ...) merged into the node's (supervisor_http.py),
- on SIGTERM or SIGINT stops the workers by PID (SIGTERM, then SIGKILL after
  a grace period) and exits; if it dies without that, the kernel kills the
  workers (cluster/node/process_setup.py),
- on SIGUSR2 (lame duck mode, cluster/node/lame_duck.py) passes it to every worker, restarts none
  of them again, and exits once they all have.

A worker tells its supervisor its HTTP port on a pipe (the fd in
`$JETRAFT_WORKER_STATUS_FD`) once it has started.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp
import structlog
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest

from cluster.node.config import NodeConfig
from cluster.node.http_listener import Handler, HttpListener, HttpRequest, HttpResponse
from cluster.node.http_server import QueryError, bool_param, json_reply
from cluster.node.process_setup import lame_duck_requests
from cluster.node.supervision.connection_slots import CONNECTION_SLOTS_FD_ENV, create_connection_slots
from cluster.node.supervision.merged_bodies import NodeIdentity
from cluster.node.supervision.node_endpoints import SYS_REQUEST_HEADER, NodeSettings
from cluster.node.supervision.node_health import MergedMetrics, node_health
from cluster.node.supervision.shared_holdings import HOLDINGS_FD_ENV, create_holdings_slots
from cluster.node.supervision.supervisor_http import NodeMonitoringEndpoints, forwarded
from cluster.node.supervision.worker_status import STATUS_FD_ENV, SUPERVISOR_PID_ENV
from cluster.node.worker_config import dial_host
from cluster.runtime.workers import worker_name
from gateway.server import new_server_id

log = structlog.get_logger(__name__)

RESTART_BACKOFF_FIRST = 0.5
RESTART_BACKOFF_MAX = 5.0
# a worker that ran this long before exiting is restarted at once, its backoff forgotten
STABLE_RUN = 30.0
STOP_GRACE = 8.0
WORKER_HTTP_TIMEOUT = 2.0


@dataclass
class WorkerProcess:
    index: int
    name: str
    process: asyncio.subprocess.Process | None = None
    http_port: int | None = None


class Supervisor:
    def __init__(self, config: NodeConfig, argv: Sequence[str]) -> None:
        self.config = config
        self.argv = list(argv)
        self.workers = [
            WorkerProcess(i, worker_name(config.name, i, config.workers)) for i in range(config.workers)
        ]
        self.registry = CollectorRegistry()
        self.merged = MergedMetrics()
        self.registry.register(self.merged)  # type: ignore[arg-type]
        self.restarts = Counter(
            "jetraft_worker_restarts_total", "Worker processes the supervisor restarted after they exited",
            ["node", "worker"], registry=self.registry,
        )  # fmt: skip
        self.up = Gauge(
            "jetraft_worker_up", "Whether the worker process is running and has reported its HTTP port",
            ["node", "worker"], registry=self.registry,
        )  # fmt: skip
        # the node's one count of client connections, which every worker holds max_connections against
        self._connection_slots = create_connection_slots(config.workers)
        # what the node's replicas hold, for its JetStream limits, which every worker holds the node to
        self._holdings_slots = create_holdings_slots(config.workers)
        self._stopping = False
        self._lame_duck = False  # SIGUSR2 came: workers that exit are not restarted
        self._watchers: list[asyncio.Task[None]] = []
        self._listener: HttpListener | None = None
        self._session: aiohttp.ClientSession | None = None
        # the node's own identity on its monitoring endpoints: one id for the node, whatever its
        # workers' (each has its own, new at each restart)
        self.identity = NodeIdentity(
            name=config.name,
            server_id=new_server_id(),
            http_port=config.http_port,
            cluster_port=config.cluster_port,
            peers=dict(config.peers),
            store_dir=str(config.node_data_dir),
            started_ns=time.time_ns(),
        )
        self.endpoints = NodeMonitoringEndpoints(self.identity, self._ask_workers)

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        config = self.config
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=WORKER_HTTP_TIMEOUT))
        routes: dict[str, Handler] = {"/healthz": self._healthz, "/metrics": self._metrics}
        routes.update(self.endpoints.routes())
        self._listener = HttpListener(config.host, config.http_port, routes)
        await self._listener.start()
        if config.http_port == 0:
            self.endpoints.node = dataclasses.replace(self.identity, http_port=self._listener.port)
        loop = asyncio.get_running_loop()
        for worker in self.workers:
            self.up.labels(config.name, worker.name).set(0)
            self._watchers.append(loop.create_task(self._keep_running(worker), name=f"worker-{worker.index}"))
        log.info("supervisor_started", node=config.name, workers=config.workers, http_port=config.http_port)

    async def lame_duck(self) -> None:
        """Every worker goes through lame duck mode and exits; none is restarted. Returns once all did."""
        if self._lame_duck or self._stopping:
            return
        self._lame_duck = True
        log.info("supervisor_lame_duck", node=self.config.name)
        for worker in self.workers:
            # one still starting is told once it reports it is up (_run_once): a Python process that has
            # not yet set its handler would die of SIGUSR2's default action
            if worker.process is not None and worker.process.returncode is None and worker.http_port is not None:
                with contextlib.suppress(ProcessLookupError):
                    worker.process.send_signal(signal.SIGUSR2)
        await asyncio.gather(*self._watchers, return_exceptions=True)

    async def stop(self) -> None:
        self._stopping = True
        log.info("supervisor_stopping", node=self.config.name)
        running = [w.process for w in self.workers if w.process is not None and w.process.returncode is None]
        for process in running:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        if running:
            _done, late = await asyncio.wait([asyncio.ensure_future(p.wait()) for p in running], timeout=STOP_GRACE)
            if late:
                for process in running:
                    if process.returncode is None:
                        log.warning("worker_killed_after_grace", node=self.config.name, pid=process.pid)
                        with contextlib.suppress(ProcessLookupError):
                            process.kill()
                await asyncio.gather(*(p.wait() for p in running))
        for task in self._watchers:
            task.cancel()
        await asyncio.gather(*self._watchers, return_exceptions=True)
        for worker in self.workers:  # one a watcher was starting while the others stopped
            process = worker.process
            if process is not None and process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        if self._listener is not None:
            await self._listener.stop()
        if self._session is not None:
            await self._session.close()
        os.close(self._connection_slots)
        os.close(self._holdings_slots)

    # -- workers ----------------------------------------------------------------------------------

    async def _keep_running(self, worker: WorkerProcess) -> None:
        backoff = RESTART_BACKOFF_FIRST
        while not (self._stopping or self._lame_duck):
            started = time.monotonic()
            try:
                code = await self._run_once(worker)
            except OSError as exc:  # could not even start it (out of processes or descriptors): try again
                log.error("worker_start_failed", node=self.config.name, worker=worker.name, error=str(exc))
                code = -1
            if self._stopping or self._lame_duck:
                return
            ran = time.monotonic() - started
            backoff = RESTART_BACKOFF_FIRST if ran >= STABLE_RUN else backoff
            log.warning("worker_exited", node=self.config.name, worker=worker.name, code=code, restart_in=backoff)
            self.restarts.labels(self.config.name, worker.name).inc()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, RESTART_BACKOFF_MAX)

    async def _run_once(self, worker: WorkerProcess) -> int:
        read_fd, write_fd = os.pipe()
        env = {
            **os.environ,
            STATUS_FD_ENV: str(write_fd),
            SUPERVISOR_PID_ENV: str(os.getpid()),
            CONNECTION_SLOTS_FD_ENV: str(self._connection_slots),
            HOLDINGS_FD_ENV: str(self._holdings_slots),
            # where the worker answering a $SYS request for the node asks the node's bodies, and its id
            **NodeSettings(
                f"{dial_host(self.config.host)}:{self.endpoints.node.http_port}", self.identity.server_id
            ).environment(),
        }
        try:
            worker.process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "cluster.node.command", *self.argv, "--worker-index", str(worker.index),
                pass_fds=(write_fd, self._connection_slots, self._holdings_slots), env=env,
            )  # fmt: skip
        finally:
            os.close(write_fd)
        log.info("worker_started", node=self.config.name, worker=worker.name, pid=worker.process.pid)
        status = await _read_status(read_fd)
        if status is not None:
            worker.http_port = status
            self.up.labels(self.config.name, worker.name).set(1)
            if self._lame_duck:  # SIGUSR2 came while it started: it goes through lame duck mode too
                with contextlib.suppress(ProcessLookupError):
                    worker.process.send_signal(signal.SIGUSR2)
        code = await worker.process.wait()
        worker.http_port = None
        self.up.labels(self.config.name, worker.name).set(0)
        return code

    # -- HTTP -------------------------------------------------------------------------------------

    async def _ask_worker(self, worker: WorkerProcess, path: str) -> tuple[int, bytes] | None:
        port, session = worker.http_port, self._session
        if port is None or session is None:
            return None
        try:
            async with session.get(f"http://{dial_host(self.config.host)}:{port}{path}") as resp:
                return resp.status, await resp.read()
        except (aiohttp.ClientError, TimeoutError, OSError):
            return None

    async def _ask_workers(self, path: str) -> dict[str, tuple[int, bytes] | None]:
        """Every worker's answer to `path` at once, each bounded by the session's timeout."""
        answers = await asyncio.gather(*(self._ask_worker(w, path) for w in self.workers))
        return {worker.name: answer for worker, answer in zip(self.workers, answers, strict=True)}

    async def _healthz(self, request: HttpRequest) -> HttpResponse:
        if not request.has_header(SYS_REQUEST_HEADER):
            self.endpoints.count("/healthz")
        try:
            bool_param(request.query, "js-enabled-only")
            bool_param(request.query, "js-server-only")
        except QueryError as exc:
            return HttpResponse.text(400, str(exc))
        query = urlencode(forwarded(request.query))
        path = f"/healthz?{query}" if query else "/healthz"
        answers = await asyncio.gather(*(self._ask_worker(w, path) for w in self.workers))
        bodies: dict[str, dict[str, Any] | None] = {}
        for worker, answer in zip(self.workers, answers, strict=True):
            body = None
            if answer is not None:
                with contextlib.suppress(ValueError):
                    body = json.loads(answer[1])
            bodies[worker.name] = body
        ok, details = node_health(self.config.name, bodies)
        # the worker processes, for per-process accounting (CPU from /proc/<pid>/stat) and operators
        details["pids"] = {w.name: w.process.pid for w in self.workers if w.process and w.process.returncode is None}
        body = {"status": "ok" if ok else "unavailable", **details}
        return json_reply(request, body, 200 if ok else 503)

    async def _metrics(self, _request: HttpRequest) -> HttpResponse:
        answers = await asyncio.gather(*(self._ask_worker(w, "/metrics") for w in self.workers))
        self.merged.texts = {
            worker.name: answer[1].decode()
            for worker, answer in zip(self.workers, answers, strict=True)
            if answer is not None and answer[0] == 200
        }
        return HttpResponse(200, generate_latest(self.registry), CONTENT_TYPE_LATEST)


async def _read_status(read_fd: int) -> int | None:
    """The HTTP port the worker writes once started; None if it exits first (the pipe closes)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    pipe = os.fdopen(read_fd, "rb", buffering=0)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    try:
        line = await reader.readline()
    finally:
        transport.close()
    try:
        return int(line.strip())
    except ValueError:
        return None


async def run_supervisor(config: NodeConfig, argv: Sequence[str]) -> None:
    supervisor = Supervisor(config, argv)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    lame_duck_asked = lame_duck_requests(loop)

    async def lame_duck_when_asked() -> None:
        await lame_duck_asked.wait()
        await supervisor.lame_duck()
        stop.set()

    await supervisor.start()
    lame_duck = loop.create_task(lame_duck_when_asked())
    try:
        await stop.wait()
    finally:
        lame_duck.cancel()
        await supervisor.stop()
