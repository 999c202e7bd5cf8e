"""A standalone Raft node for tests and benchmarks: one group, a tiny state machine, HTTP control.

    python -m raft.testnode --id n1 --listen 127.0.0.1:7001 \\
        --peer n2=127.0.0.1:7002 --peer n3=127.0.0.1:7003 \\
        --http 127.0.0.1:8001 --data-dir /tmp/raft-n1

It runs the real host: `RaftHost` on a RocksDB log (fsync always unless
`--unsafe-no-sync`), the gRPC transport on its own server, one channel per
peer. The state machine is an append-only command log (`CommandLog`). When
ready it prints one JSON line `{"event": "ready", ...}` on stdout; logs go to
stderr.

HTTP control (JSON answers):
    GET  /status                 role, leader, term, indices, counters
    POST /propose                body = one command; answers after it is applied here
    GET  /values?from=N          applied commands with index > N (latin-1 text)
    GET  /read-index             a linearizable read point, once applied here
    POST /load                   {"count", "size", "inflight", "max_seconds"}: a bounded
                                 load generated inside this process (the leader's); latencies
    POST /transfer               {"to": node}
    POST /snapshot               snapshot and compact now
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import logging
import signal
import struct
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc
import structlog
from aiohttp import web

from raft.driver import (
    GroupOptions,
    GroupStoppedError,
    LeadershipLostError,
    NotLeaderError,
    ProposalQueueFullError,
    RaftHost,
    RaftHostError,
)
from raft.rocks_log_storage import RocksLogEngine
from raft.transport import add_raft_servicer, grpc_channel_options, grpc_server_options
from raft.types import Entry, EntryType, Snapshot

GROUP = "test"
_SNAPSHOT_HEADER = struct.Struct(">Q16sB")
_VALUE_HEADER = struct.Struct(">QI")


class CommandLog:
    """Counts applied commands and keeps a running digest of them (and, optionally, the commands).

    The result of a command is its sequence number among commands (1, 2, ...).
    """

    def __init__(self, keep_values: bool) -> None:
        self.keep_values = keep_values
        self.count = 0
        self.digest = b"\x00" * 16
        self.values: list[tuple[int, bytes]] = []
        self._applied = 0

    def apply(self, entries: Sequence[Entry]) -> list[Any]:
        results: list[Any] = []
        digest = self.digest
        blake2b = hashlib.blake2b
        for entry in entries:
            if entry.type is EntryType.NORMAL and entry.data:
                # Chained per command, so equal histories give equal digests however
                # the commands were batched into apply() calls.
                digest = blake2b(digest + entry.data, digest_size=16).digest()
                self.count += 1
                if self.keep_values:
                    self.values.append((entry.index, entry.data))
                results.append(self.count)
            else:
                results.append(None)
        self.digest = digest
        self._applied = entries[-1].index
        return results

    def snapshot(self) -> bytes:
        parts = [_SNAPSHOT_HEADER.pack(self.count, self.digest, int(self.keep_values))]
        for index, data in self.values:
            parts.append(_VALUE_HEADER.pack(index, len(data)))
            parts.append(data)
        return b"".join(parts)

    def restore(self, snapshot: Snapshot) -> None:
        data = snapshot.data
        self.count, self.digest, kept = _SNAPSHOT_HEADER.unpack_from(data)
        values = []
        pos = _SNAPSHOT_HEADER.size
        while pos < len(data):
            index, length = _VALUE_HEADER.unpack_from(data, pos)
            pos += _VALUE_HEADER.size
            values.append((index, data[pos : pos + length]))
            pos += length
        self.values = values if kept else []
        self._applied = snapshot.index

    @property
    def applied_index(self) -> int:
        return self._applied


def _percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return 0.0
    position = min(int(fraction * len(sorted_values)), len(sorted_values) - 1)
    return sorted_values[position]


async def run_load(
    host: RaftHost, count: int, size: int, inflight: int, max_seconds: float
) -> dict[str, Any]:
    """Propose `count` commands of `size` bytes, `inflight` at a time, inside this process."""
    loop = asyncio.get_running_loop()
    latencies: list[float] = []
    errors: dict[str, int] = {}
    finished = loop.create_future()
    issued = 0
    completed = 0
    padding = b"p" * max(size - 8, 0)
    deadline = time.perf_counter() + max_seconds

    def issue() -> None:
        nonlocal issued, completed
        payload = struct.pack(">Q", issued)[: max(size, 0)] + padding
        issued += 1
        started = time.perf_counter()
        try:
            future = host.propose_nowait(GROUP, payload)
        except RaftHostError as exc:
            errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
            completed += 1
            loop.call_soon(maybe_next)
            return
        future.add_done_callback(lambda f: done(f, started))

    def done(future: asyncio.Future[Any], started: float) -> None:
        nonlocal completed
        completed += 1
        exc = future.exception()
        if exc is None:
            latencies.append(time.perf_counter() - started)
        else:
            errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
        maybe_next()

    def maybe_next() -> None:
        if issued < count and time.perf_counter() < deadline:
            issue()
        elif completed == issued and not finished.done():
            finished.set_result(None)

    started_at = time.perf_counter()
    for _ in range(min(inflight, count)):
        issue()
    await finished
    elapsed = time.perf_counter() - started_at
    latencies.sort()
    return {
        "committed": len(latencies),
        "issued": issued,
        "seconds": elapsed,
        "rate": len(latencies) / elapsed if elapsed > 0 else 0.0,
        "p50_ms": _percentile(latencies, 0.50) * 1e3,
        "p99_ms": _percentile(latencies, 0.99) * 1e3,
        "max_ms": (latencies[-1] * 1e3) if latencies else 0.0,
        "errors": errors,
    }


class TestNode:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.peers: dict[str, str] = dict(args.peer)
        self.engine = RocksLogEngine(Path(args.data_dir) / "raft")
        self.host = RaftHost(args.id, self.engine, tick_interval=args.tick)
        self.machine = CommandLog(keep_values=args.keep_values)
        self.server = grpc.aio.server(options=grpc_server_options())
        self.channels: list[grpc.aio.Channel] = []
        self.runner: web.AppRunner | None = None

    async def start(self) -> None:
        args = self.args
        add_raft_servicer(self.server, self.host.transport)
        self.server.add_insecure_port(args.listen)
        await self.server.start()
        for name, address in self.peers.items():
            channel = grpc.aio.insecure_channel(address, options=grpc_channel_options())
            self.channels.append(channel)
            self.host.transport.add_peer(name, channel)
        options = GroupOptions(
            election_tick=args.election_tick,
            sync=not args.unsafe_no_sync,
            snapshot_interval=args.snapshot_interval,
            compact_keep=args.compact_keep,
        )
        voters = [args.id, *self.peers] if not args.join else []
        self.host.add_group(GROUP, self.machine, voters=voters, options=options)
        await self.host.start()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.add_routes(
            [
                web.get("/status", self.status),
                web.post("/propose", self.propose),
                web.get("/values", self.values),
                web.get("/read-index", self.read_index),
                web.post("/load", self.load),
                web.post("/transfer", self.transfer),
                web.post("/snapshot", self.snapshot),
            ]
        )
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        http_host, _, http_port = args.http.rpartition(":")
        site = web.TCPSite(self.runner, http_host, int(http_port))
        await site.start()
        print(
            json.dumps({"event": "ready", "id": args.id, "listen": args.listen, "http": args.http}),
            flush=True,
        )

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
        await self.host.stop()
        await self.server.stop(None)
        for channel in self.channels:
            await channel.close()
        self.engine.close()

    # --- HTTP handlers ---

    async def status(self, request: web.Request) -> web.Response:
        status = self.host.status(GROUP)
        stats = self.host.transport.stats
        return web.json_response(
            {
                "id": status.node_id,
                "role": status.role.value,
                "leader": status.leader_id,
                "term": status.term,
                "commit": status.commit_index,
                "applied": status.applied_index,
                "first_index": status.first_index,
                "last_index": status.last_index,
                "snapshot_index": status.snapshot_index,
                "voters": list(status.voters),
                "learners": list(status.learners),
                "snapshots_restored": status.snapshots_restored,
                "snapshots_taken": status.snapshots_taken,
                "count": self.machine.count,
                "digest": self.machine.digest.hex(),
                "fsyncs": self.engine.fsyncs,
                "write_batches": self.engine.batches,
                "iterations": self.host.iterations,
                "frames_sent": stats.frames_sent,
                "messages_sent": stats.messages_sent,
                "messages_dropped": stats.messages_dropped,
                # CPU seconds of this process (all threads): on a shared machine the
                # cost per entry is a steadier figure than wall-clock throughput.
                "cpu_seconds": time.process_time(),
            }
        )

    async def propose(self, request: web.Request) -> web.Response:
        data = await request.read()
        if not data:
            return web.json_response({"error": "empty command"}, status=400)
        try:
            seq = await self.host.propose(GROUP, data)
        except NotLeaderError as exc:
            return web.json_response({"error": "not leader", "leader": exc.leader_id}, status=409)
        except ProposalQueueFullError as exc:
            return web.json_response({"error": str(exc)}, status=429)
        except (LeadershipLostError, GroupStoppedError) as exc:
            return web.json_response({"error": str(exc), "outcome": "unknown"}, status=503)
        return web.json_response({"seq": seq, "applied": self.host.status(GROUP).applied_index})

    async def values(self, request: web.Request) -> web.Response:
        try:
            after = int(request.query.get("from", "0"))
        except ValueError:
            return web.json_response({"error": "from must be an integer"}, status=400)
        if not self.machine.keep_values:
            return web.json_response({"error": "started without --keep-values"}, status=400)
        selected = [[index, data.decode("latin-1")] for index, data in self.machine.values if index > after]
        return web.json_response({"values": selected, "applied": self.machine.applied_index})

    async def read_index(self, request: web.Request) -> web.Response:
        try:
            index = await self.host.read_index(GROUP)
        except NotLeaderError as exc:
            return web.json_response({"error": "no leader", "leader": exc.leader_id}, status=503)
        except RaftHostError as exc:
            return web.json_response({"error": str(exc)}, status=503)
        return web.json_response({"index": index, "count": self.machine.count})

    async def load(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        try:
            count = int(body.get("count", 10_000))
            size = int(body.get("size", 128))
            inflight = int(body.get("inflight", 1_000))
            max_seconds = float(body.get("max_seconds", 30.0))
        except (TypeError, ValueError):
            return web.json_response(
                {"error": "count, size, inflight, max_seconds must be numbers"}, status=400
            )
        if not (0 < count <= 10_000_000 and 8 <= size <= 1 << 20 and inflight > 0 and 0 < max_seconds <= 600):
            return web.json_response({"error": "load parameters out of range"}, status=400)
        if not self.host.is_leader(GROUP):
            return web.json_response(
                {"error": "not leader", "leader": self.host.leader_of(GROUP)}, status=409
            )
        fsyncs_before = self.engine.fsyncs
        result = await run_load(self.host, count, size, inflight, max_seconds)
        result["fsyncs"] = self.engine.fsyncs - fsyncs_before
        return web.json_response(result)

    async def transfer(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        target = body.get("to")
        if not isinstance(target, str):
            return web.json_response({"error": "to must name a node"}, status=400)
        try:
            await self.host.transfer_leadership(GROUP, target)
        except (RaftHostError, TimeoutError) as exc:
            return web.json_response({"error": str(exc) or "transfer timed out"}, status=503)
        return web.json_response({"leader": self.host.leader_of(GROUP)})

    async def snapshot(self, request: web.Request) -> web.Response:
        index = self.host.snapshot_now(GROUP)
        return web.json_response(
            {"snapshot_index": index, "first_index": self.host.status(GROUP).first_index}
        )


async def _json_body(request: web.Request) -> dict[str, Any]:
    if not request.can_read_body:
        return {}
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise web.HTTPBadRequest(
            text='{"error": "body is not JSON"}', content_type="application/json"
        ) from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(
            text='{"error": "body must be a JSON object"}', content_type="application/json"
        )
    return body


def _peer(spec: str) -> tuple[str, str]:
    name, sep, address = spec.partition("=")
    if not sep or not name or ":" not in address:
        raise argparse.ArgumentTypeError(f"--peer {spec!r} must be NAME=HOST:PORT")
    return name, address


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m raft.testnode", description=__doc__.split("\n")[0])
    parser.add_argument("--id", required=True, help="this node's id, e.g. n1")
    parser.add_argument("--listen", required=True, help="HOST:PORT of this node's Raft gRPC server")
    parser.add_argument("--peer", action="append", type=_peer, default=[], help="NAME=HOST:PORT (repeatable)")
    parser.add_argument("--http", required=True, help="HOST:PORT of the HTTP control interface")
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--tick", type=float, default=0.05, help="seconds per Raft tick (default 0.05)")
    parser.add_argument(
        "--election-tick", type=int, default=10, help="election timeout in ticks (randomised up to 2x)"
    )
    parser.add_argument(
        "--snapshot-interval", type=int, default=10_000, help="entries between snapshots (0: never)"
    )
    parser.add_argument("--compact-keep", type=int, default=1_000, help="entries kept behind a snapshot")
    parser.add_argument("--keep-values", action="store_true", help="keep every applied command (for /values)")
    parser.add_argument("--join", action="store_true", help="start with no membership; wait to be added")
    parser.add_argument("--unsafe-no-sync", action="store_true", help="UNSAFE: never fsync the Raft log")
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop")
    parser.add_argument("--log-level", default="WARNING")
    return parser.parse_args(argv)


def _configure_logging(level: str) -> None:
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise SystemExit(f"unknown log level {level!r}")
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.JSONRenderer()],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
    )


async def _main(args: argparse.Namespace) -> None:
    node = TestNode(args)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await node.start()
    try:
        await stop.wait()
    finally:
        await node.stop()


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    _configure_logging(args.log_level)
    if args.uvloop:
        import uvloop

        uvloop.install()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(args))


if __name__ == "__main__":
    main()
