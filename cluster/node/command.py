"""`jetraft node ...`: run one node until SIGINT or SIGTERM (what containers and `jetraft local up` run)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Sequence

import structlog

from cluster.node.config import ConfigError, NodeConfig, add_node_arguments, config_from_args
from cluster.node.logs import configure_logging
from raft.grpc_setup import prefer_posix_endpoints

log = structlog.get_logger(__name__)


def parse_args(argv: Sequence[str] | None) -> NodeConfig:
    parser = argparse.ArgumentParser(prog="jetraft node", description="Run one jetraft node.")
    add_node_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return config_from_args(args)
    except ConfigError as exc:
        parser.error(str(exc))
        raise  # parser.error exits; this keeps type checkers content


async def run(config: NodeConfig) -> None:
    from cluster.node.node import Node  # heavy imports only once the flags are good

    node = Node(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await node.start()
    try:
        await stop.wait()
    finally:
        await node.stop()


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_args(argv)
    try:
        configure_logging(config.name, config.log_level, config.log_format)
    except ValueError as exc:  # a bad --log-level or $JETRAFT_LOG_LEVEL
        print(f"jetraft node: {exc}", file=sys.stderr)
        return 2
    prefer_posix_endpoints()  # before cluster.node.node imports grpc
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()
    try:
        asyncio.run(run(config))
    except OSError as exc:
        log.error("node_failed_to_start", node=config.name, error=str(exc))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
