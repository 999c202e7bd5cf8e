"""`jetraft local up`: a local cluster of node processes on 127.0.0.1, until interrupted.

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
        help="which replica answers a Direct Get (default: %(default)s, the one on the client's node)",
    )
    up.add_argument("--startup-timeout", type=float, default=60.0)
    up.add_argument(
        "--toxiproxy", action="store_true", help="route every node-to-node link through an embedded Toxiproxy"
    )
    up.add_argument("--toxiproxy-port", type=int, default=8474, help="Toxiproxy API port (0: any free port)")
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
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
    cluster = LocalCluster(
        specs, args.data_dir, extra_args=["--direct-get-policy", args.direct_get_policy], toxiproxy=toxiproxy
    )
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
    print("ready", flush=True)
    code = 0
    try:
        while not stop_signals and code == 0:
            time.sleep(0.2)
            for name, proc in cluster.procs.items():
                if proc.poll() is not None:
                    print(f"jetraft local: node {name} exited with code {proc.returncode}", file=sys.stderr)
                    code = 1
    finally:
        print("stopping", flush=True)
        cluster.stop()
    return code
