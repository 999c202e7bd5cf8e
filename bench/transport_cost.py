"""CPU and latency of one message between two endpoints: a grpc.aio stream, as the route mesh and Raft
use, against a plain asyncio TCP connection with length-prefixed frames, in one process.

    .venv/bin/python bench/transport_cost.py [--messages 5000] [--size 600] [--rounds 3]

Both sides of each transport run in this one uvloop process, so the figures are the whole cost of a
message: the sender's write, the receiver's read, and (gRPC) its poller thread. Each message is echoed
back and the next one is sent once the echo arrived (a round trip is two messages, one each way), with
the node's own gRPC settings: POSIX endpoints (raft/grpc_setup.py) and the channel and server options of
raft/transport.py. Prints, per transport, the process CPU (every thread, `time.process_time`) and the
wall time per round trip, best of `--rounds`, and how that CPU split between the loop's thread and the
others. What it asks: how much of a node's CPU per routed message is the transport itself
(bench/README.md, "What a message between nodes costs").
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from raft.grpc_setup import prefer_posix_endpoints

prefer_posix_endpoints()  # as `jetraft node` does, before grpc is imported

import argparse  # noqa: E402
import asyncio  # noqa: E402
import struct  # noqa: E402
import time  # noqa: E402
from collections.abc import Awaitable, Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import grpc  # noqa: E402
import uvloop  # noqa: E402

from raft.transport import grpc_channel_options, grpc_server_options  # noqa: E402

LENGTH = struct.Struct(">I")


@dataclass(slots=True)
class Cost:
    cpu_us: float  # every thread of the process, per round trip
    loop_thread_us: float  # the event loop's thread alone
    wall_us: float


def _identity(data: bytes) -> bytes:
    return data


async def _measure(round_trip: Callable[[], Awaitable[None]], messages: int) -> Cost:
    await round_trip()  # the connection and its first frame are set up outside the measure
    cpu, thread, wall = time.process_time(), time.thread_time(), time.perf_counter()
    for _ in range(messages):
        await round_trip()
    return Cost(
        cpu_us=(time.process_time() - cpu) / messages * 1e6,
        loop_thread_us=(time.thread_time() - thread) / messages * 1e6,
        wall_us=(time.perf_counter() - wall) / messages * 1e6,
    )


async def grpc_stream(messages: int, payload: bytes) -> Cost:
    async def echo(requests, context):  # type: ignore[no-untyped-def]
        async for request in requests:
            yield request

    handler = grpc.method_handlers_generic_handler(
        "bench.Echo", {"Stream": grpc.stream_stream_rpc_method_handler(echo, _identity, _identity)}
    )
    server = grpc.aio.server(options=grpc_server_options())
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=grpc_channel_options())
    call = channel.stream_stream("/bench.Echo/Stream", request_serializer=_identity, response_deserializer=_identity)()

    async def round_trip() -> None:
        await call.write(payload)
        await call.read()

    try:
        return await _measure(round_trip, messages)
    finally:
        await call.done_writing()
        await channel.close()
        await server.stop(0)


class _Frames(asyncio.Protocol):
    """Length-prefixed frames over a stream: echoes each whole frame, or completes `arrived`."""

    def __init__(self, echo: bool) -> None:
        self.echo = echo
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.arrived: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports subclass none of asyncio's

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while len(self.buffer) >= LENGTH.size:
            (size,) = LENGTH.unpack_from(self.buffer)
            if len(self.buffer) < LENGTH.size + size:
                return
            frame = bytes(self.buffer[: LENGTH.size + size])
            del self.buffer[: LENGTH.size + size]
            if self.echo:
                assert self.transport is not None
                self.transport.write(frame)
            elif self.arrived is not None and not self.arrived.done():
                self.arrived.set_result(None)


async def tcp_stream(messages: int, payload: bytes) -> Cost:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Frames(echo=True), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    transport, client = await loop.create_connection(lambda: _Frames(echo=False), "127.0.0.1", port)
    frame = LENGTH.pack(len(payload)) + payload

    async def round_trip() -> None:
        client.arrived = loop.create_future()
        transport.write(frame)
        await client.arrived

    try:
        return await _measure(round_trip, messages)
    finally:
        transport.close()
        server.close()
        await server.wait_closed()


async def main_async(messages: int, size: int, rounds: int) -> None:
    payload = b"x" * size
    best: dict[str, Cost] = {}
    for _ in range(rounds):
        for name, run in (("grpc.aio stream", grpc_stream), ("asyncio TCP, length-prefixed", tcp_stream)):
            cost = await run(messages, payload)
            if name not in best or cost.cpu_us < best[name].cpu_us:
                best[name] = cost
    print(f"{messages} round trips of {size}-byte messages, best of {rounds}")
    print("| transport | CPU per round trip | of it, the loop's thread | wall per round trip |")
    print("|---|---|---|---|")
    for name, cost in best.items():
        print(f"| {name} | {cost.cpu_us:.1f} us | {cost.loop_thread_us:.1f} us | {cost.wall_us:.1f} us |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--size", type=int, default=600, help="bytes per message (a frame of a few Direct Gets)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    uvloop.run(main_async(args.messages, args.size, args.rounds))


if __name__ == "__main__":
    main()
