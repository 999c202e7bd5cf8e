"""JetStream targets for the pipeline tests and benchmark: real server processes on 127.0.0.1.

A `JetStreamTarget` is what the tests need to know about a running system:
its client URLs and whether its Direct Get replies name the responding node
(`Jetraft-Node`). `start_target(kind, nodes, workdir)` builds one:
`jetraft` (the project's own nodes through local.cluster, the
default) or `nats-server` (the reference binary); the environment variable
JETRAFT_PIPELINE_TARGET picks the kind for the whole suite.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import nats
import nats.js.errors
from nats.aio.msg import Msg

from local.ports import free_port_base

HOST = "127.0.0.1"
NATS_SERVER = Path(sys.executable).with_name("nats-server")
TARGET_ENV = "JETRAFT_PIPELINE_TARGET"


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, alive: Callable[[], None]) -> None:
    """Poll a condition held by other processes (there is no event to await across processes)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        alive()
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1.0) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


# nats-server 2.15 keeps, by default, a pool of 3 route connections to each peer plus one pinned to the
# system account: a cluster's mesh is whole when every server counts that many per peer.
ROUTES_PER_PEER = 4
# the stream `NatsServerProcesses.start` creates and deletes to see that a cluster places streams
PLACEMENT_PROBE = "PLACEMENT_PROBE"


def route_count(monitor_url: str) -> int:
    """How many route connections a nats-server has up (-1 while its monitor does not answer)."""
    try:
        # /varz, not /routez: tests compare nats-server's count of requests per endpoint with jetraft's
        with urllib.request.urlopen(f"{monitor_url}/varz", timeout=1.0) as resp:
            return int(json.load(resp)["routes"])
    except (urllib.error.URLError, OSError, ValueError, KeyError):
        return -1


@dataclass
class JetStreamTarget:
    kind: str
    urls: list[str]
    monitor_urls: list[str]
    sends_responder: bool  # Direct Get replies carry Jetraft-Node
    stop: Callable[[], None] = field(repr=False)

    @property
    def servers(self) -> str:
        """The value of the data source's 'servers' option."""
        return ",".join(self.urls)


class NatsServerProcesses:
    """nats-server nodes (one, or a cluster with routes between all of them), stopped by PID."""

    def __init__(self, nodes: int, workdir: Path) -> None:
        self.workdir = workdir
        self.names = [f"n{i}" for i in range(1, nodes + 1)]
        # one block of distinct ports: separate free_port() probes may hand out the same port twice
        base = free_port_base(3 * nodes)
        self.ports = {name: base + i for i, name in enumerate(self.names)}
        self.monitor_ports = {name: base + nodes + i for i, name in enumerate(self.names)}
        self.cluster_ports = {name: base + 2 * nodes + i for i, name in enumerate(self.names)} if nodes > 1 else {}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def command(self, name: str, jetstream: bool = True) -> list[str]:
        cmd = [str(NATS_SERVER), "-a", HOST, "-p", str(self.ports[name]), "-m", str(self.monitor_ports[name])]
        cmd += ["-n", name]
        if jetstream:
            cmd += ["-js", "-sd", str(self.workdir / name)]
        if self.cluster_ports:
            routes = ",".join(
                f"nats://{HOST}:{port}" for peer, port in self.cluster_ports.items() if peer != name
            )
            cmd += ["--cluster_name", "pipeline", "--cluster", f"nats://{HOST}:{self.cluster_ports[name]}"]
            cmd += ["--routes", routes]
        return cmd

    def start(self, jetstream: bool = True, timeout: float = 30.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        for name in self.names:
            log = open(self.workdir / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it
            self.procs[name] = subprocess.Popen(
                self.command(name, jetstream), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
            log.close()
        try:
            health = "/healthz" if jetstream else "/varz"
            wait_until(
                lambda: all(http_ok(f"http://{HOST}:{self.monitor_ports[n]}{health}") for n in self.names),
                timeout,
                f"nats-server nodes {self.names} to be healthy",
                self.check_alive,
            )
            # healthy only says a meta leader is known; a route still being dialled loses what crosses it
            # (a request's reply reached no one, CI at d0b8526), so wait for the whole mesh too
            whole = ROUTES_PER_PEER * (len(self.names) - 1)
            wait_until(
                lambda: all(route_count(f"http://{HOST}:{self.monitor_ports[n]}") >= whole for n in self.names),
                timeout,
                f"nats-server nodes {self.names} to have {whole} routes each",
                self.check_alive,
            )
            if jetstream and len(self.names) > 1:
                self._until_streams_are_placed(timeout)
        except BaseException:
            self.stop()
            raise

    def _until_streams_are_placed(self, timeout: float) -> None:
        """Create and delete a stream of as many replicas as servers until that works. nats-server's meta
        leader places a replicated stream only on servers it has heard statistics from, which follow the
        routes by a moment. In a fresh clone's run at 1129b28 test_api_audit's first R3 create on a
        freshly started cluster left no stream (no server logged a leader for it) and its publish heard
        "no responders" for 5 s; 8 fresh clusters here created their first R3 at once, so this only
        rules the case out. No event to await across processes: bounded polling, in a thread of its
        own (a caller may be inside an event loop)."""
        url = f"nats://{HOST}:{self.ports[self.names[0]]}"
        replicas = len(self.names)

        async def probe() -> None:
            nc = await nats.connect(url)
            try:
                deadline = time.monotonic() + timeout
                config = json.dumps({"name": PLACEMENT_PROBE, "subjects": [], "num_replicas": replicas})
                while True:
                    self.check_alive()
                    answer = json.loads(
                        (await nc.request(f"$JS.API.STREAM.CREATE.{PLACEMENT_PROBE}", config.encode(), 10)).data
                    )
                    if "error" not in answer:
                        await nc.request(f"$JS.API.STREAM.DELETE.{PLACEMENT_PROBE}", b"", 10)
                        return
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"nats-server nodes {self.names} never placed an R{replicas}: {answer}")
                    await asyncio.sleep(0.1)
            finally:
                await nc.close()

        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, probe()).result()

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(
                    f"nats-server {name} exited with {proc.returncode}; see {self.workdir}/{name}.log"
                )

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)

    def __enter__(self) -> NatsServerProcesses:
        """Started with JetStream (stopped again if starting fails), stopped on the way out."""
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def target(self) -> JetStreamTarget:
        return JetStreamTarget(
            kind="nats-server",
            urls=[f"nats://{HOST}:{self.ports[n]}" for n in self.names],
            monitor_urls=[f"http://{HOST}:{self.monitor_ports[n]}" for n in self.names],
            sends_responder=False,
            stop=self.stop,
        )


def start_jetraft(nodes: int, workdir: Path) -> JetStreamTarget:
    """The project's own nodes; their Direct Get replies name the responder (Jetraft-Node)."""
    from local.cluster import LocalCluster, plan_free_nodes

    specs = plan_free_nodes(nodes, 0)
    cluster = LocalCluster(specs, workdir)
    cluster.start(timeout=60.0)
    return JetStreamTarget(
        kind="jetraft",
        urls=cluster.client_urls,
        monitor_urls=[spec.http_url for spec in specs],
        sends_responder=True,
        stop=cluster.stop,
    )


def start_target(kind: str, nodes: int, workdir: Path) -> JetStreamTarget:
    if workdir.exists():
        shutil.rmtree(workdir)
    if kind == "nats-server":
        processes = NatsServerProcesses(nodes, workdir)
        processes.start()
        return processes.target()
    if kind == "jetraft":
        return start_jetraft(nodes, workdir)
    raise ValueError(f"{TARGET_ENV} must be 'nats-server' or 'jetraft', not {kind!r}")


@contextlib.contextmanager
def side_by_side(tmp_path_factory: Any, nodes: int = 3) -> Iterator[dict[str, JetStreamTarget]]:
    """A nats-server cluster and a jetraft cluster of `nodes` each, by kind, stopped (by PID) on exit:
    for tests that send both the same requests and compare the answers."""
    started: dict[str, JetStreamTarget] = {}
    try:
        for kind in ("nats-server", "jetraft"):
            started[kind] = start_target(kind, nodes, tmp_path_factory.mktemp(kind))
        yield started
    finally:
        for target in started.values():
            target.stop()



T = TypeVar("T")


async def when_served(
    attempt: Callable[[], Awaitable[T]],
    what: str,
    *,
    unserved: tuple[type[Exception], ...] = (nats.errors.NoRespondersError, nats.js.errors.NoStreamResponseError),
    tries: int = 50,
) -> T:
    """`attempt` (a publish or a request on a stream's subject), tried again, bounded, while the server
    answers "no responders". Right after a stream is created, its leader's interest reaches the server
    asked on its own time, on nats-server's routes as on jetraft's mesh (and a jetraft stream may hand
    its leadership to its preferred member), and meanwhile a publish hears 503; nats-py does not ask
    again. A 503 stored nothing, so asking again is safe. `unserved`: how the client reports that 503
    (a pull's fetch raises ServiceUnavailableError)."""
    for _ in range(tries):
        try:
            return await attempt()
        except unserved:
            await asyncio.sleep(0.1)
    raise AssertionError(f"{what} never served")


async def request_when_served(
    nc: nats.NATS, subject: str, payload: bytes, headers: dict[str, str] | None = None, timeout: float = 10.0
) -> Msg:
    """A publish's reply (its ack or error) through `when_served`."""
    return await when_served(lambda: nc.request(subject, payload, timeout=timeout, headers=headers), subject)
