"""`jetraft toxiproxy`: serve the Toxiproxy HTTP API with the embedded proxy until SIGINT or SIGTERM.

Prints one JSON line `{"event": "ready", "url": ..., "port": ...}` on stdout
once the API answers (logs go to stderr), so `--port 0` is usable by scripts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from pathlib import Path

import orjson

from chaos.toxiproxy.api import VERSION, populate
from chaos.toxiproxy.server import DEFAULT_HOST, DEFAULT_PORT, ToxiproxyServer
from cluster.node.logs import configure_logging


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jetraft toxiproxy", description="Serve the Toxiproxy HTTP API with an embedded TCP proxy."
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help="address of the HTTP API (default %(default)s)")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="port of the HTTP API, 0 for any free one"
    )
    parser.add_argument(
        "--config", type=Path, help="JSON file of proxies to create at start (as POST /populate)"
    )
    parser.add_argument("--seed", type=int, help="seed for toxicity draws, jitter and slicing")
    parser.add_argument("--log-level", default=None, help="log level (default $JETRAFT_LOG_LEVEL or INFO)")
    parser.add_argument("--log-format", choices=["json", "console", "auto"], default="auto")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    return parser


async def _serve(args: argparse.Namespace) -> int:
    log = configure_logging("toxiproxy", args.log_level, args.log_format)
    server = ToxiproxyServer(args.host, args.port, seed=args.seed)
    try:
        await server.start()
    except OSError as exc:
        print(
            f"jetraft toxiproxy: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        return 1
    try:
        if args.config is not None:
            status, answer = await populate(server.collection, orjson.loads(args.config.read_bytes()))
            if status >= 300:
                log.error("populating from config failed", config=str(args.config), error=answer.get("error"))
            else:
                log.info(
                    "populated from config", config=str(args.config), proxies=len(answer["proxies"] or [])
                )
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stopping.set)
        log.info("toxiproxy API listening", url=server.url, version=VERSION)
        print(json.dumps({"event": "ready", "url": server.url, "port": server.port}), flush=True)
        await stopping.wait()
        log.info("shutting down")
    finally:
        await server.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.version:
        print(f"jetraft toxiproxy version {VERSION}")
        return 0
    try:
        return asyncio.run(_serve(args))
    except (OSError, ValueError) as exc:
        # an unreadable or malformed --config file
        print(f"jetraft toxiproxy: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
