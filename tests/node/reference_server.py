"""nats-server 2.15.1 started from a configuration file, for side-by-side tests; stopped by PID."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from local.ports import HOST, free_port_base
from tests.node.config_file_node import node_from_config

NATS_SERVER = Path(sys.executable).with_name("nats-server")
T = TypeVar("T")


@contextlib.asynccontextmanager
async def nats_server_from_config(tmp_path: Path, body: str, timeout: float = 30.0) -> AsyncIterator[int]:
    """The client port of a nats-server whose configuration is `listen` plus `body`."""
    port = free_port_base(1)
    config = tmp_path / "nats-server.conf"
    config.write_text(f"listen: {HOST}:{port}\n{body}")
    log_path = tmp_path / "nats-server.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [str(NATS_SERVER), "-c", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"nats-server exited with {proc.returncode}: {log_path.read_text()}")
            try:
                _reader, writer = await asyncio.open_connection(HOST, port)
            except OSError:
                if loop.time() > deadline:
                    raise AssertionError(f"nats-server not listening within {timeout}s") from None
                await asyncio.sleep(0.05)
                continue
            writer.close()
            break
        yield port
    finally:
        await stop_servers([proc])


async def stop_servers(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM to each server still running, then wait for them all (SIGKILL after 10 s)."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            await asyncio.to_thread(proc.wait, 10)
        except subprocess.TimeoutExpired:
            proc.kill()
            await asyncio.to_thread(proc.wait, 10)


async def on_both_with_jetstream(
    tmp_path: Path, accounts_conf: str, scenario: Callable[[int], Awaitable[T]]
) -> tuple[T, T]:
    """`scenario(client port)` against nats-server 2.15.1, then a jetraft node, each given `accounts_conf`
    with JetStream on (an account's own `jetstream` block picks the account): (theirs, ours)."""
    reference, ours = tmp_path / "ref", tmp_path / "jetraft"
    reference.mkdir()
    ours.mkdir()
    async with nats_server_from_config(
        reference, f"jetstream {{ store_dir: '{reference / 'js'}' }}\n" + accounts_conf
    ) as port:
        theirs = await scenario(port)
    async with node_from_config(ours, "jetstream: enabled\n" + accounts_conf) as node:
        return theirs, await scenario(node.client_port)
