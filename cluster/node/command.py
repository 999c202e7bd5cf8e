"""`jetraft node ...`: run one node until SIGINT or SIGTERM (what containers and `jetraft local up` run), or
until its lame duck mode (SIGUSR2, cluster/node/lame_duck.py) has handed everything over.

With `--workers N` (N > 1) this process is the node's supervisor
(cluster/node/supervision/supervisor.py), and runs this same command once per worker with
`--worker-index i` added.
"""

from __future__ import annotations

# Run as `python -m cluster.node.command` (workers are): first of all, before about a second of imports, hold
# SIGUSR2, which would kill the node now, and keep rich out (cluster/node/process_setup.py). `jetraft node`
# does both in cli.main.
if __name__ == "__main__":
    from cluster.node.process_setup import prepare_node_process

    prepare_node_process()

import argparse
import asyncio
import contextlib
import gc
import os
import signal
import sys
from collections.abc import Sequence

import structlog

from cluster.node.config import ConfigError, NodeConfig, add_node_arguments, config_from_args
from cluster.node.logs import configure_logging
from cluster.node.process_setup import die_with_parent, lame_duck_requests, profiled
from cluster.node.supervision.worker_share import NodeShare
from cluster.node.supervision.worker_status import SUPERVISOR_PID_ENV, report_started
from cluster.node.worker_config import worker_config
from cluster.runtime.phase_cpu import install_phase_clock
from gateway.transports.listen import EarlyListeners, bind_listening_socket
from raft.grpc_setup import prefer_posix_endpoints

log = structlog.get_logger(__name__)

# Python's cyclic garbage collector runs a young collection every 700 container allocations and a
# full one every ten of the middle generation's: a node creating streams one after another (each
# leaves ~150 objects alive: its store, state machine, Raft group, subscriptions, metric series)
# spent 0.19-0.27 ms of a 2.2 ms create in it, most in full collections that scan every object of
# the process. With young collections every 10,000 allocations, full ones come 14 times less often;
# garbage in cycles still goes, a few thousand objects later.
YOUNG_COLLECTION_THRESHOLD = 10_000


def tune_garbage_collector() -> None:
    """At process start: collect the young generation less often (see YOUNG_COLLECTION_THRESHOLD)."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, middle, old)


def freeze_startup_objects() -> None:
    """Once the node is up: what it made to start (modules, classes, the services' own objects, ~70,000
    objects) lives as long as the process, so no full collection needs to scan it again
    (`gc.freeze`: a full collection of a node with 1,000 streams scanned 210,000 objects, 140,000
    after this). Collected once first, so no garbage of the start-up is kept for ever."""
    gc.collect()
    gc.freeze()


def parse_args(argv: Sequence[str] | None) -> NodeConfig:
    parser = argparse.ArgumentParser(prog="jetraft node", description="Run one jetraft node.")
    add_node_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return config_from_args(args)
    except ConfigError as exc:
        parser.error(str(exc))
        raise  # parser.error exits; this keeps type checkers content


def bind_client_ports(config: NodeConfig) -> EarlyListeners:
    """The client and WebSocket ports, listening before the node's second of imports (see
    gateway/transports/listen.py). OSError when one is taken."""
    listeners = EarlyListeners()
    shared = config.workers > 1  # the node's workers share its ports (as GatewayServer's reuse_port)
    try:
        listeners.client = bind_listening_socket(config.host, config.client_port, reuse_port=shared)
        if config.websocket is not None:
            ws_host = config.websocket.listen_host(config.host)
            listeners.websocket = bind_listening_socket(ws_host, config.websocket.port, reuse_port=shared)
    except OSError:
        listeners.close()
        raise
    return listeners


async def run(config: NodeConfig, listeners: EarlyListeners) -> None:
    from cluster.node.account_jetstream import HomeAccountChangedError
    from cluster.node.lame_duck import run_lame_duck
    from cluster.node.node import Node  # heavy imports only once the flags are good

    share = None
    if config.worker_index is not None:  # one worker of a node: what its supervisor gave it of the node
        share = NodeShare.from_environment(config.name, config.worker_index, config.workers)
    node = Node(config, share, listeners)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    # asked while the node still starts, lame duck mode begins once it is up
    lame_duck_asked = lame_duck_requests(loop)
    lame_duck: asyncio.Task[None] | None = None

    async def lame_duck_when_asked() -> None:
        await lame_duck_asked.wait()
        await run_lame_duck(node, config.lame_duck_duration, config.lame_duck_grace_period, stop.set)

    try:
        await node.start()
        lame_duck = loop.create_task(lame_duck_when_asked())
        freeze_startup_objects()
        report_started(node.http.port)
        await stop.wait()
    except HomeAccountChangedError as exc:
        log.error("node_failed_to_start", node=config.name, error=str(exc))
        raise SystemExit(1) from None
    finally:
        if lame_duck is not None:
            lame_duck.cancel()
        # also after a failed start (a port taken): what did start (the cluster port's gRPC server)
        # stops while the loop runs, instead of complaining from its finaliser once the loop is closed
        await node.stop()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    config = parse_args(args)
    supervising = config.workers > 1 and config.worker_index is None
    if config.worker_index is not None:
        supervisor_pid = os.environ.get(SUPERVISOR_PID_ENV)
        if supervisor_pid is not None:
            die_with_parent(int(supervisor_pid))
        config = worker_config(config, config.worker_index)
    tune_garbage_collector()
    try:
        configure_logging(config.name, config.log_level, config.log_format)
    except ValueError as exc:  # a bad --log-level or $JETRAFT_LOG_LEVEL
        print(f"jetraft node: {exc}", file=sys.stderr)
        return 2
    if supervising:
        # here, not at the top: a worker or a node of one process would import the supervisor's HTTP
        # client (aiohttp) for nothing, a fifth of its start-up
        from cluster.node.supervision.supervisor import run_supervisor

        try:
            asyncio.run(run_supervisor(config, args))
        except OSError as exc:
            log.error("node_failed_to_start", node=config.name, error=str(exc))
            return 1
        return 0
    try:
        listeners = bind_client_ports(config)
    except OSError as exc:
        log.error("node_failed_to_start", node=config.name, error=str(exc))
        return 1
    prefer_posix_endpoints()  # before cluster.node.node imports grpc
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()
    install_phase_clock(config.name)
    try:
        with profiled(config.name):
            asyncio.run(run(config, listeners))
    except OSError as exc:
        log.error("node_failed_to_start", node=config.name, error=str(exc))
        return 1
    finally:
        listeners.close()  # what no listener took: the start failed before it
    return 0


if __name__ == "__main__":
    sys.exit(main())
