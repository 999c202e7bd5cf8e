"""A gateway-only node: the NATS client port and the route mesh, no JetStream.

    python -m gateway.standalone --name n1 --port 4222 --cluster-port 6222 \\
        --peer n2=127.0.0.1:6223 --peer n3=127.0.0.1:6224 [--queue-policy random] \\
        [--user U --password P | --token T]

For the integration tests and benchmarks; cluster/ composes the same classes
(`Router`, `GatewayServer`, `RouteMesh`) with JetStream. Prints one JSON line
to stdout when it is listening (`{"event": "ready", ...}`) and one each time
the set of connected peers changes (`{"event": "peers", ...}`), so a parent
process can wait for those instead of guessing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
from collections.abc import Sequence
from typing import Any

import grpc
import structlog

from gateway.auth import make_authenticator
from gateway.limits import Limits
from gateway.queue_policy import POLICY_NAMES
from gateway.router import Router
from gateway.routes import DEFAULT_PING_INTERVAL, RouteMesh, add_route_servicer
from gateway.server import GatewayServer

_DEFAULT_LIMITS = Limits()


def _emit(event: str, **fields: Any) -> None:
    # The parent may have stopped reading (it is shutting us down): not worth a traceback.
    with contextlib.suppress(BrokenPipeError):
        print(json.dumps({"event": event, **fields}), flush=True)


def _peer(spec: str) -> tuple[str, str]:
    name, sep, address = spec.partition("=")
    host, colon, port = address.rpartition(":")
    if not sep or not name or not colon or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"--peer {spec!r} must be NAME=HOST:PORT")
    return name, address


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m gateway.standalone", description=__doc__.split("\n")[0])
    parser.add_argument("--name", required=True, help="node name, e.g. n1")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=4222, help="NATS client port (0: any free port)")
    parser.add_argument(
        "--cluster-port", type=int, default=None, help="gRPC route port (omit for a lone node)"
    )
    parser.add_argument("--peer", type=_peer, action="append", default=[], help="NAME=HOST:PORT of a peer")
    parser.add_argument("--queue-policy", choices=POLICY_NAMES, default="random")
    parser.add_argument("--user")
    parser.add_argument("--password")
    parser.add_argument("--token")
    parser.add_argument("--max-payload", type=int, default=_DEFAULT_LIMITS.max_payload)
    parser.add_argument("--max-pending", type=int, default=_DEFAULT_LIMITS.max_pending)
    parser.add_argument(
        "--ping-interval", type=float, default=_DEFAULT_LIMITS.ping_interval, help="client PING interval, s"
    )
    parser.add_argument(
        "--route-ping-interval", type=float, default=DEFAULT_PING_INTERVAL, help="RTT probe interval, s"
    )
    parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    args = parser.parse_args(argv)
    if args.peer and args.cluster_port is None:
        parser.error("--peer needs --cluster-port")
    try:
        args.auth = make_authenticator(args.user, args.password, args.token)
    except ValueError as exc:
        parser.error(str(exc))
    return args


async def run(args: argparse.Namespace) -> None:
    router = Router(args.queue_policy)
    limits = Limits(
        max_payload=args.max_payload, max_pending=args.max_pending, ping_interval=args.ping_interval
    )
    server = GatewayServer(
        router, name=args.name, host=args.host, port=args.port, limits=limits, auth=args.auth
    )
    await server.start()
    grpc_server: grpc.aio.Server | None = None
    channels: list[grpc.aio.Channel] = []
    mesh: RouteMesh | None = None
    if args.cluster_port is not None:

        def peers_changed(urls: dict[str, str]) -> None:
            server.set_cluster_urls(urls.values())
            _emit("peers", node=args.name, peers=sorted(urls))

        mesh = RouteMesh(
            router,
            args.name,
            server.client_url,
            ping_interval=args.route_ping_interval,
            on_peers_changed=peers_changed,
        )
        grpc_server = grpc.aio.server()
        add_route_servicer(grpc_server, mesh)
        bound = grpc_server.add_insecure_port(f"{args.host}:{args.cluster_port}")
        if not bound:
            raise SystemExit(f"cannot listen on {args.host}:{args.cluster_port}")
        await grpc_server.start()
        for name, address in args.peer:
            channel = grpc.aio.insecure_channel(address)
            channels.append(channel)
            mesh.add_peer(name, channel)
    _emit("ready", node=args.name, port=server.port, cluster_port=args.cluster_port, url=server.client_url)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()

    if mesh is not None:
        await mesh.close()
    await server.stop()
    if grpc_server is not None:
        await grpc_server.stop(grace=0.5)
    for channel in channels:
        await channel.close()


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    # stdout carries only the JSON events above; logs go to stderr.
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.format_exc_info,
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(args.log_level)),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    if args.loop == "uvloop":
        with contextlib.suppress(ImportError):
            import uvloop

            uvloop.install()
    try:
        asyncio.run(run(args))
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
