"""Start and stop a cluster of `jetraft node` processes on 127.0.0.1.

Used by `jetraft local up`, by the integration tests and by the benchmarks:
one place that knows the port plan and how to wait for a node to be ready.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cluster.node.config import CLUSTER_SECRET_ENV
from cluster.runtime.workers import node_of, worker_name
from local.ports import HOST, free_port_base

if TYPE_CHECKING:
    from chaos.toxiproxy.process import ToxiproxyProcess


@dataclass(slots=True)
class NodeSpec:
    name: str
    client_port: int
    http_port: int
    cluster_port: int
    tags: list[str] = field(default_factory=list)
    # peer name -> address this node dials for it (the peer itself, or a proxy in front of it)
    dial: dict[str, str] = field(default_factory=dict)
    # worker processes (`jetraft node --workers`); worker i's cluster port is cluster_port + i
    workers: int = 1

    @property
    def client_url(self) -> str:
        return f"nats://{HOST}:{self.client_port}"

    @property
    def http_url(self) -> str:
        return f"http://{HOST}:{self.http_port}"

    @property
    def members(self) -> list[str]:
        """The node's cluster members: the node itself, or each of its workers (`n1/w0`, `n1/w1`)."""
        return [worker_name(self.name, index, self.workers) for index in range(self.workers)]


# How many workers every node of a local cluster runs when the caller does not say: the switch that
# runs the integration tests against several-worker nodes (JETRAFT_TEST_WORKERS=2).
WORKERS_ENV = "JETRAFT_TEST_WORKERS"


def default_workers() -> int:
    return int(os.environ.get(WORKERS_ENV) or 1)


def plan_nodes(
    nodes: int,
    mirror_nodes: int,
    port_base: int,
    http_port_base: int,
    cluster_port_base: int,
    workers: int = 1,
) -> list[NodeSpec]:
    """Node i (1-based) gets port_base + i - 1; mirror nodes m1.. take the ports after n1..nN. Cluster
    ports go `workers` apart: a node's workers listen on its cluster port and the ones after it."""
    names = [f"n{i}" for i in range(1, nodes + 1)] + [f"m{i}" for i in range(1, mirror_nodes + 1)]
    specs = [
        NodeSpec(
            name=name,
            client_port=port_base + offset,
            http_port=http_port_base + offset,
            cluster_port=cluster_port_base + offset * workers,
            tags=["mirror"] if name.startswith("m") else [],
            workers=workers,
        )
        for offset, name in enumerate(names)
    ]
    for spec in specs:
        spec.dial = {peer.name: f"{HOST}:{peer.cluster_port}" for peer in specs if peer.name != spec.name}
    return specs


@dataclass(frozen=True, slots=True)
class ProxyLink:
    """The proxy for what `source` sends to `target`: it listens where `source` dials and forwards to `target`.

    `target` is a cluster member: a node, or one worker of it (`n2/w1`). A node's workers all dial a
    peer's worker at the same address, so with several workers per node the link `n1 -> n2/w1` carries
    what every worker of n1 sends to n2's worker 1, and a node's proxies to one peer listen on
    consecutive ports, as that peer's workers do."""

    source: str
    target: str
    upstream: str
    listen: str = f"{HOST}:0"

    @property
    def name(self) -> str:
        return proxy_name(self.source, self.target)


def proxy_name(source: str, target: str) -> str:
    """The proxy carrying what member `source` sends to member `target`: `n1-to-n2`, or between
    workers `n1-to-n2.w1` (the source's node; a Toxiproxy name cannot hold a slash, and a node name
    holds no dot, so the name still says which nodes the link joins: chaos' `link_ends`)."""
    return f"{node_of(source)}-to-{target.replace('/', '.')}"


def plan_proxy_links(specs: list[NodeSpec]) -> list[ProxyLink]:
    """One link per ordered pair of nodes (mirror nodes included), upstream = the target's cluster port;
    with several workers, one per target worker, each pair's on consecutive ports. Those ports are all
    taken from one run of free ports: probed pair by pair, nothing listens on them until the proxies are
    made, so two pairs could be handed the same ports."""
    pairs = [(source, target) for source in specs for target in specs if source.name != target.name]
    needed = sum(target.workers for _, target in pairs if target.workers > 1)
    next_port = free_port_base(needed) if needed else 0
    links = []
    for source, target in pairs:
        if target.workers == 1:
            links.append(ProxyLink(source.name, target.name, f"{HOST}:{target.cluster_port}"))
            continue
        links.extend(
            ProxyLink(
                source.name,
                worker_name(target.name, index, target.workers),
                f"{HOST}:{target.cluster_port + index}",
                listen=f"{HOST}:{next_port + index}",
            )
            for index in range(target.workers)
        )
        next_port += target.workers
    return links


def route_through_proxies(specs: list[NodeSpec], listens: dict[str, str]) -> None:
    """Make each node dial its peers through the proxies (proxy name -> listen address): a peer's first
    worker's proxy, the others' on the ports after it."""
    for spec in specs:
        for peer in list(spec.dial):
            target = worker_name(peer, 0, spec.workers)
            spec.dial[peer] = listens[proxy_name(spec.name, target)]


class ToxiproxyAPIError(RuntimeError):
    """The Toxiproxy server refused a call."""


def create_proxies(api_url: str, links: list[ProxyLink], timeout: float = 10.0) -> dict[str, str]:
    """Create the proxies (each on a free 127.0.0.1 port); proxy name -> the address it listens on.

    Plain HTTP, so the same call works against the embedded server and the real Toxiproxy.
    """
    listens: dict[str, str] = {}
    for link in links:
        body = json.dumps({"name": link.name, "upstream": link.upstream, "listen": link.listen}).encode()
        request = urllib.request.Request(
            f"{api_url}/proxies", data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as resp:
                listens[link.name] = json.loads(resp.read())["listen"]
        except urllib.error.HTTPError as exc:
            raise ToxiproxyAPIError(f"creating proxy {link.name}: HTTP {exc.code} {exc.read()!r}") from exc
    return listens


def start_faultable_links(
    specs: list[NodeSpec], toxiproxy_port: int = 0, log_path: str | Path | None = None
) -> ToxiproxyProcess:
    """Start the embedded Toxiproxy, create one proxy per ordered node pair and route the specs through them."""
    from chaos.toxiproxy.process import ToxiproxyProcess  # the chaos package only when asked for

    process = ToxiproxyProcess(port=toxiproxy_port, log_path=log_path)
    process.start()
    try:
        route_through_proxies(specs, create_proxies(process.url, plan_proxy_links(specs)))
    except BaseException:
        process.stop()
        raise
    return process


def plan_free_nodes(nodes: int, mirror_nodes: int, workers: int | None = None) -> list[NodeSpec]:
    """`plan_nodes` on one run of free ports: client ports, then HTTP ports, then cluster ports
    (`workers` per node; $JETRAFT_TEST_WORKERS or 1 when not given)."""
    workers = default_workers() if workers is None else workers
    total = nodes + mirror_nodes
    base = free_port_base((2 + workers) * total)
    return plan_nodes(nodes, mirror_nodes, base, base + total, base + 2 * total, workers)


@functools.cache
def node_available(timeout: float = 60.0) -> bool:
    """Whether `jetraft node` runs here (`python -m cluster.node.command --help` succeeds): tests that need nodes ask."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "cluster.node.command", "--help"],
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


class NodeProcessError(RuntimeError):
    """A node process failed to start or died."""


class LocalCluster:
    """A set of node processes; `start()` returns once every node is healthy and the meta group has a leader."""

    def __init__(
        self,
        specs: list[NodeSpec],
        data_dir: str | Path,
        extra_args: list[str] | None = None,
        log_dir: str | Path | None = None,
        toxiproxy: ToxiproxyProcess | None = None,
        cluster_secret: str | None = None,
    ) -> None:
        self.specs = specs
        # The nodes prove themselves to each other with it (cluster/node/cluster_auth.py); given to them in
        # the environment, never on their command line. One is made up for each cluster unless given.
        self.cluster_secret = cluster_secret or secrets.token_urlsafe(32)
        # stopped with the cluster when given
        self.toxiproxy = toxiproxy
        self.data_dir = Path(data_dir)
        self.log_dir = Path(log_dir) if log_dir is not None else self.data_dir / "logs"
        self.extra_args = extra_args or []
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def spec(self, name: str) -> NodeSpec:
        """The node `name`, or the node of worker `name` (`n1/w1`: what stream info names a peer)."""
        for spec in self.specs:
            if spec.name == node_of(name):
                return spec
        raise KeyError(name)

    @property
    def client_urls(self) -> list[str]:
        return [spec.client_url for spec in self.specs]

    def command(self, spec: NodeSpec) -> list[str]:
        cmd = [
            sys.executable, "-m", "cluster.node.command",
            "--name", spec.name, "--host", HOST,
            "--port", str(spec.client_port),
            "--cluster-port", str(spec.cluster_port),
            "--http-port", str(spec.http_port),
            "--data-dir", str(self.data_dir),
            "--log-format", "json",
        ]  # fmt: skip
        for peer, address in spec.dial.items():
            cmd += ["--peer", f"{peer}={address}"]
        for tag in spec.tags:
            cmd += ["--tag", tag]
        if spec.workers > 1:
            cmd += ["--workers", str(spec.workers)]
        return cmd + self.extra_args

    def start_node(self, name: str) -> subprocess.Popen[bytes]:
        spec = self.spec(name)
        name = spec.name
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - owned by the child for its lifetime
        proc = subprocess.Popen(
            self.command(spec),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, CLUSTER_SECRET_ENV: self.cluster_secret},
        )
        log.close()
        self.procs[name] = proc
        return proc

    def start(self, timeout: float = 60.0) -> None:
        for spec in self.specs:
            self.start_node(spec.name)
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise

    def health(self, name: str, timeout: float = 1.0) -> dict[str, object] | None:
        """The node's /healthz body when it answers 200 within `timeout` seconds, else None."""
        status, body = self.health_report(name, timeout)
        return body if status == 200 else None

    def health_report(self, name: str, timeout: float = 1.0) -> tuple[int, dict[str, object] | None]:
        """The node's /healthz status and body, healthy or not (503 lists its `problems`); (0, None)
        when it does not answer within `timeout` seconds."""
        try:
            with urllib.request.urlopen(f"{self.spec(name).http_url}/healthz", timeout=timeout) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            try:
                return exc.code, json.loads(exc.read())
            except (OSError, ValueError):
                return exc.code, None
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError):
            return 0, None

    def meta_leader(self, name: str | None = None) -> str | None:
        """The meta leader as node `name` (the first node by default) reports it on /healthz, even
        while that node reports itself unhealthy for another reason."""
        _, body = self.health_report(name or self.specs[0].name, timeout=5.0)
        leader = None if body is None else body.get("meta_leader")
        return str(leader) if leader else None

    def meta_leader_member(self, name: str | None = None) -> str | None:
        """The cluster member that leads the meta group (a node, or the worker of a several-worker node
        that leads: the one whose own metrics and state are the leader's), as node `name` reports it."""
        _, body = self.health_report(name or self.specs[0].name, timeout=5.0)
        leader = None if body is None else body.get("meta_leader_worker") or body.get("meta_leader")
        return str(leader) if leader else None

    def wait_until(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll a cross-process condition (no event to await across processes) until it holds."""
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive()
            if predicate():
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(0.05)

    def wait_ready(self, timeout: float = 60.0, names: list[str] | None = None) -> None:
        names = names or [spec.name for spec in self.specs]

        def ready() -> bool:
            bodies = [self.health(name) for name in names]
            return all(body is not None and body.get("meta_leader") for body in bodies)

        self.wait_until(ready, timeout, f"nodes {', '.join(names)} to be healthy with a meta leader")

    def _check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None and not getattr(proc, "_jetraft_expected_exit", False):
                raise NodeProcessError(
                    f"node {name} exited with code {proc.returncode}; see {self.log_dir / (name + '.log')}"
                )

    def kill_node(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Stop one node by PID (SIGKILL by default: a crash, not a shutdown; a supervisor's workers die
        with it, cluster/node/process_setup.py)."""
        proc = self.procs[self.spec(name).name]
        proc._jetraft_expected_exit = True  # type: ignore[attr-defined]
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, sig)
        proc.wait(timeout=15)

    def node_pids(self, name: str) -> list[int]:
        """Every process of node `name` (or of the node of worker `name`): the node's own, and for a
        several-worker node its workers (its children, as /proc lists them), to freeze or account for
        the whole node."""
        pid = self.procs[self.spec(name).name].pid
        children = Path(f"/proc/{pid}/task/{pid}/children")
        try:
            return [pid, *(int(child) for child in children.read_text().split())]
        except OSError:
            return [pid]

    def restart_node(self, name: str) -> None:
        self.start_node(name)

    def stop_node(self, name: str, grace: float = 10.0) -> None:
        """Stop one node by PID as a shutdown: SIGTERM, then SIGKILL if it still runs after `grace` seconds."""
        proc = self.procs[name]
        proc._jetraft_expected_exit = True  # type: ignore[attr-defined]
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)

    def is_running(self, name: str) -> bool:
        proc = self.procs.get(name)
        return proc is not None and proc.poll() is None

    def exited_unexpectedly(self) -> list[str]:
        """Nodes that exited without being asked to; each is reported once (then counts as expected)."""
        exited = []
        for name, proc in self.procs.items():
            if proc.poll() is not None and not getattr(proc, "_jetraft_expected_exit", False):
                proc._jetraft_expected_exit = True  # type: ignore[attr-defined]
                exited.append(name)
        return exited

    @property
    def toxiproxy_url(self) -> str | None:
        return self.toxiproxy.url if self.toxiproxy is not None else None

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM every node, then SIGKILL whatever is still running after `grace` seconds; then the proxies."""
        try:
            self._stop_nodes(grace)
        finally:
            if self.toxiproxy is not None:
                self.toxiproxy.stop()

    def _stop_nodes(self, grace: float) -> None:
        for proc in self.procs.values():
            proc._jetraft_expected_exit = True  # type: ignore[attr-defined]
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)


@contextlib.contextmanager
def faultable_cluster(
    data_dir: str | Path | None = None,
    nodes: int = 3,
    mirror_nodes: int = 1,
    extra_args: Sequence[str] = (),
) -> Iterator[LocalCluster]:
    """A local cluster whose node-to-node links all go through an embedded Toxiproxy, stopped (by PID) on
    exit; in a temporary directory, removed after, unless `data_dir` is given."""
    temporary = data_dir is None
    directory = Path(tempfile.mkdtemp(prefix="jetraft-faultable-")) if data_dir is None else Path(data_dir)
    specs = plan_free_nodes(nodes, mirror_nodes)
    toxiproxy = start_faultable_links(specs, 0, log_path=None)
    cluster = LocalCluster(specs, directory, extra_args=list(extra_args), toxiproxy=toxiproxy)
    try:
        cluster.start(timeout=60)
        yield cluster
    finally:
        cluster.stop()
        if temporary:
            shutil.rmtree(directory, ignore_errors=True)
