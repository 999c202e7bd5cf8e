"""`jetraft local up`: a local cluster of node processes on 127.0.0.1, until interrupted.

A node that dies leaves the others running (said on stderr). `jetraft local stop|kill|start NAME`,
run beside it with the same `--data-dir`, stops (SIGTERM), kills (SIGKILL) or starts one node of
the running cluster, through files in the data directory (local/control.py), no signal to the command.

With `--toxiproxy`, every node-to-node link goes through its own proxy on an
embedded Toxiproxy server (proxy `nX-to-nY` for what nX sends to nY), whose
API URL is printed so faults can be injected with any Toxiproxy client.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

from chaos.toxiproxy.process import ToxiproxyProcessError
from cluster.node.config import DEFAULT_DIRECT_GET_POLICY, DIRECT_GET_POLICIES
from local.cluster import (
    LocalCluster,
    NodeProcessError,
    ToxiproxyAPIError,
    plan_nodes,
    start_faultable_links,
)
from local.control import ControlError, ControlInbox, Request, send_request


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jetraft local", description="run a local cluster on 127.0.0.1")
    sub = parser.add_subparsers(dest="action", required=True)
    up = sub.add_parser("up", help="start the nodes, print their URLs, run until interrupted")
    up.add_argument("--nodes", type=int, default=3)
    up.add_argument("--mirror-nodes", type=int, default=1, help="nodes tagged 'mirror' (m1, m2, ...)")
    up.add_argument("--port-base", type=int, default=4222, help="client port of n1; node i gets base + i - 1")
    up.add_argument("--http-port-base", type=int, default=8222)
    up.add_argument("--cluster-port-base", type=int, default=6222)
    up.add_argument("--data-dir", default="./data")
    up.add_argument(
        "--workers", type=int, default=1, help="worker processes per node (cluster ports go this many apart)"
    )
    up.add_argument(
        "--direct-get-policy",
        choices=DIRECT_GET_POLICIES,
        default=DEFAULT_DIRECT_GET_POLICY,
        help="which replica answers a Direct Get (default: %(default)s: any replica or mirror, as nats-server picks a queue member)",
    )
    up.add_argument(
        "--publish-hold",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="each node's --publish-hold: how long a publish that meets no stream leader waits for one "
        "(default: 0, off: answered 503 at once, as nats-server does)",
    )
    up.add_argument("--startup-timeout", type=float, default=60.0)
    up.add_argument(
        "--toxiproxy", action="store_true", help="route every node-to-node link through an embedded Toxiproxy"
    )
    up.add_argument("--toxiproxy-port", type=int, default=8474, help="Toxiproxy API port (0: any free port)")
    for action, what in (
        ("stop", "stop one node of the running cluster (SIGTERM, a clean shutdown)"),
        ("kill", "kill one node of the running cluster (SIGKILL, a crash)"),
        ("start", "start a stopped node of the running cluster again, with its data"),
    ):
        control = sub.add_parser(action, help=what)
        control.add_argument("node", help="the node's name (n1, n2, m1, ...)")
        control.add_argument("--data-dir", default="./data", help="the running `local up`'s --data-dir")
        control.add_argument("--timeout", type=float, default=90.0)
    return parser


def _control(args: argparse.Namespace) -> int:
    try:
        print(send_request(args.data_dir, args.action, args.node, timeout=args.timeout), flush=True)
    except ControlError as exc:
        print(f"jetraft local: {exc}", file=sys.stderr)
        return 1
    return 0


def _carry_out(cluster: LocalCluster, request: Request, startup_timeout: float) -> tuple[bool, str]:
    name = request.node
    if name not in cluster.procs:
        return False, f"no node {name!r}; nodes: {', '.join(cluster.procs)}"
    if request.action == "start":
        if cluster.is_running(name):
            return False, f"node {name} is already running"
        cluster.restart_node(name)
        try:
            cluster.wait_ready(startup_timeout, names=[name])
        except (TimeoutError, NodeProcessError) as exc:
            return False, f"node {name} did not come back: {exc}"
        return True, f"node {name} started"
    if not cluster.is_running(name):
        return False, f"node {name} is not running"
    if request.action == "kill":
        cluster.kill_node(name)
        return True, f"node {name} killed"
    cluster.stop_node(name)
    return True, f"node {name} stopped"


def _state(cluster: LocalCluster) -> dict[str, object]:
    return {
        "nodes": {
            spec.name: {
                "running": cluster.is_running(spec.name),
                "pid": cluster.procs[spec.name].pid,
                "client_url": spec.client_url,
                "http_url": spec.http_url,
            }
            for spec in cluster.specs
        },
        "toxiproxy": cluster.toxiproxy_url,
    }


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.action != "up":
        return _control(args)
    if not args.publish_hold >= 0:  # NaN too
        print(f"jetraft local: --publish-hold must be 0 (off) or more seconds, not {args.publish_hold}", file=sys.stderr)
        return 2
    if args.nodes < 1 or args.mirror_nodes < 0 or args.workers < 1:
        print(
            "jetraft local: --nodes and --workers must be at least 1 and --mirror-nodes at least 0",
            file=sys.stderr,
        )
        return 2
    specs = plan_nodes(
        args.nodes, args.mirror_nodes, args.port_base, args.http_port_base, args.cluster_port_base, args.workers
    )
    toxiproxy = None
    if args.toxiproxy:
        try:
            toxiproxy = start_faultable_links(specs, args.toxiproxy_port)
        except (ToxiproxyProcessError, ToxiproxyAPIError, OSError) as exc:
            print(f"jetraft local: cannot start Toxiproxy: {exc}", file=sys.stderr)
            return 1
    node_args = ["--direct-get-policy", args.direct_get_policy]
    if args.publish_hold > 0:
        node_args += ["--publish-hold", str(args.publish_hold)]
    cluster = LocalCluster(specs, args.data_dir, extra_args=node_args, toxiproxy=toxiproxy)
    # The handler only records the signal. It once set a threading.Event, whose lock the handler then
    # takes: a second signal landing while the first handler held it (two quick Ctrl-Cs, or a SIGTERM
    # from both a supervisor and a user) deadlocked the command with its nodes still running.
    stop_signals: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, _frame: stop_signals.append(signum))
    try:
        cluster.start(timeout=args.startup_timeout)
    except (TimeoutError, NodeProcessError) as exc:
        print(f"jetraft local: {exc}", file=sys.stderr)
        return 1
    for spec in specs:
        role = " (mirror)" if "mirror" in spec.tags else ""
        print(f"{spec.name}{role}: {spec.client_url}  http {spec.http_url}", flush=True)
    if cluster.toxiproxy_url is not None:
        print(f"toxiproxy: {cluster.toxiproxy_url}  (proxies nX-to-nY for every node pair)", flush=True)
    inbox = ControlInbox(args.data_dir)
    inbox.publish_state(_state(cluster))
    print("ready", flush=True)
    try:
        # Runs until interrupted: a node that dies is reported and the survivors keep serving (a
        # cluster that loses a node is what it is for); `jetraft local start NAME` brings it back.
        while not stop_signals:
            time.sleep(0.2)
            changed = False
            for name in cluster.exited_unexpectedly():
                code = cluster.procs[name].returncode
                print(
                    f"jetraft local: node {name} exited with code {code}; the others keep running"
                    f" (`jetraft local start {name} --data-dir {args.data_dir}` starts it again)",
                    file=sys.stderr,
                    flush=True,
                )
                changed = True
            for request in inbox.take():
                ok, message = _carry_out(cluster, request, args.startup_timeout)
                print(f"jetraft local: {message}", file=sys.stderr if not ok else sys.stdout, flush=True)
                inbox.answer(request, ok, message)
                changed = True
            if changed:
                inbox.publish_state(_state(cluster))
    finally:
        print("stopping", flush=True)
        inbox.close()
        cluster.stop()
    return 0
