"""CPU of a request/reply that crosses the route mesh, in one process: where a routed Direct Get's CPU goes.

    .venv/bin/python bench/route_hop_bench.py [--requests 20000] [--per-frame 8] [--grpc]

Two routers, each with its RouteMesh. Router A has a client subscribed to an inbox; router B has a
`_sys_` queue member on `$JS.API.DIRECT.GET.S.>` that answers each request with a Direct Get-sized
reply (headers and 128 bytes). A publishes requests with unique reply subjects, as a client's node does.

Without `--grpc` the frames go from one mesh to the other as bytes, by hand (`_next_frame`, serialize,
parse, `_apply`), `--per-frame` requests to a frame: the Python work of both nodes for one routed
request, gRPC left out. With `--grpc` the two meshes talk over real grpc.aio calls on 127.0.0.1
(`--per-frame` requests in flight), which adds what gRPC costs per frame. The figure is process CPU
time (`time.process_time`) per request, best of five runs; nothing else is timed.
"""

from __future__ import annotations

import os

# as `jetraft node` does (raft/grpc_setup.py), before grpc is imported
os.environ.setdefault("GRPC_EXPERIMENTS", "-event_engine_client,-event_engine_listener")

import argparse
import asyncio
import time

import grpc

from gateway import route_pb2
from gateway.router import Message, Router, Subscription
from gateway.routes import RouteMesh, _PeerLink, add_route_servicer
from local.ports import free_port
from raft.transport import grpc_channel_options

INBOX = "_INBOX.abcdefghijklmnopqrstuv"
REQUEST_SUBJECT = "$JS.API.DIRECT.GET.S.bench.key.1"
ANSWER_HEADERS = (
    b"NATS/1.0\r\nNats-Stream: S\r\nNats-Subject: bench.key.1\r\nNats-Sequence: 12\r\n"
    b"Nats-Time-Stamp: 2026-11-26T10:00:00.123456789Z\r\nJetraft-Node: n2\r\nJetraft-Role: follower\r\n"
    b"Jetraft-Last-Sequence: 100\r\n\r\n"
)
ANSWER_PAYLOAD = b"x" * 128
RUNS = 5


class _Client:
    """A client connection as the router sees it: counts what it is sent."""

    echo = True
    no_responders = True

    def __init__(self) -> None:
        self.received = 0
        self.on_answer = lambda: None

    def deliver(self, sid: bytes, subject: bytes, reply: bytes | None, headers: bytes | None, payload: bytes) -> None:
        self.received += 1
        self.on_answer()

    def subscription_closed(self, sub: Subscription) -> None:
        pass


def _two_nodes() -> tuple[Router, Router, RouteMesh, RouteMesh, _Client]:
    client_node, responder_node = Router(), Router()
    mesh_a = RouteMesh(client_node, "n1", "nats://n1")
    mesh_b = RouteMesh(responder_node, "n2", "nats://n2")

    def answer(msg: Message) -> None:
        assert msg.reply is not None
        responder_node.publish(msg.reply, ANSWER_PAYLOAD, None, ANSWER_HEADERS)

    responder_node.subscribe("$JS.API.DIRECT.GET.S.>", answer, "_sys_")
    client = _Client()
    client_node.subscribe_client(client, b"1", INBOX + ".*", None)
    return client_node, responder_node, mesh_a, mesh_b, client


async def without_grpc(requests: int, per_frame: int) -> list[float]:
    client_node, _, mesh_a, mesh_b, client = _two_nodes()
    links = []
    for mesh, peer in ((mesh_a, "n2"), (mesh_b, "n1")):
        # a link whose call is up, written by hand instead of by its write loop
        link = _PeerLink(mesh, peer, grpc.aio.insecure_channel("127.0.0.1:1"), ())
        mesh._links[peer] = link
        mesh._inbound_sessions[peer] = "bench"
        link.connected = link.session_open = True
        links.append(link)
    to_b, to_a = links

    def carry(link: _PeerLink, mesh: RouteMesh, sender: str) -> None:
        data = link._next_frame(0.0).SerializeToString()
        mesh._apply(sender, route_pb2.Frame.FromString(data))

    # the interest snapshots
    for mesh, peer in ((mesh_a, "n1"), (mesh_b, "n2")):
        for subject, queue, count in mesh.router.local_interest():
            (to_b if peer == "n1" else to_a).interest[(subject, queue)] = count
    carry(to_b, mesh_b, "n1")
    carry(to_a, mesh_a, "n2")
    sent = 0
    cpu = []
    for _ in range(RUNS):
        start = time.process_time()
        for _ in range(requests // per_frame):
            for _ in range(per_frame):
                sent += 1
                client_node.publish(REQUEST_SUBJECT, b"", f"{INBOX}.{sent}", origin=client)
            carry(to_b, mesh_b, "n1")
            carry(to_a, mesh_a, "n2")
        cpu.append((time.process_time() - start) / requests)
    assert client.received == sent, (client.received, sent)
    for link in links:
        await link.stop()
    return cpu


async def over_grpc(requests: int, in_flight: int) -> list[float]:
    client_node, responder_node, mesh_a, mesh_b, client = _two_nodes()
    servers, channels = [], []
    for mesh in (mesh_a, mesh_b):
        port = free_port()
        server = grpc.aio.server(options=grpc_channel_options())
        add_route_servicer(server, mesh)
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        servers.append((server, port))
    for mesh, peer, (_, port) in ((mesh_a, "n2", servers[1]), (mesh_b, "n1", servers[0])):
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=grpc_channel_options())
        channels.append(channel)
        mesh.add_peer(peer, channel)
    try:
        await mesh_a.wait_connected()
        await mesh_b.wait_connected()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while not (responder_node.has_interest(INBOX + ".0") and client_node.has_interest(REQUEST_SUBJECT)):
            assert loop.time() < deadline, "interest never crossed the mesh"
            await asyncio.sleep(0.01)
        cpu = []
        sent = 0
        for _ in range(RUNS):
            answered = 0
            done = loop.create_future()

            def send() -> None:
                nonlocal sent
                sent += 1
                client_node.publish(REQUEST_SUBJECT, b"", f"{INBOX}.{sent}", origin=client)

            def on_answer(finished: asyncio.Future[None] = done) -> None:
                nonlocal answered
                answered += 1
                if answered == requests:
                    finished.set_result(None)
                elif answered + in_flight <= requests:
                    send()

            client.on_answer = on_answer
            start = time.process_time()
            for _ in range(in_flight):
                send()
            await asyncio.wait_for(done, 120)
            cpu.append((time.process_time() - start) / requests)
        return cpu
    finally:
        await mesh_a.close()
        await mesh_b.close()
        for server, _ in servers:
            await server.stop(0)
        for channel in channels:
            await channel.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--per-frame", type=int, default=8, help="requests per frame (in flight, with --grpc)")
    parser.add_argument("--grpc", action="store_true", help="over real gRPC calls on 127.0.0.1")
    args = parser.parse_args()
    run = over_grpc(args.requests, args.per_frame) if args.grpc else without_grpc(args.requests, args.per_frame)
    cpu = asyncio.run(run)
    what = "over gRPC" if args.grpc else "without gRPC"
    print(
        f"routed request/reply {what}, {args.per_frame} per frame: best {min(cpu) * 1e6:.2f} us of CPU per request "
        f"(runs: {', '.join(f'{c * 1e6:.2f}' for c in cpu)})"
    )


if __name__ == "__main__":
    main()
