"""What a frame from a peer delivers: every field of a routed message read back as it was sent.

`RouteMesh._deliver_messages` reads each field once and asks `HasField` only where an empty value could
also mean "set" (cheaper than asking for every message); these pin the distinctions that must survive:
headers absent (a MSG) against present, `deliver_as` absent against present, queues, reply_via.
"""

from __future__ import annotations

import random

from gateway import route_pb2
from gateway.router import Message, Router
from gateway.routes import RouteMesh
from tests.gateway.test_router import FakeClient, FakeLinks


def mesh_with_client() -> tuple[Router, RouteMesh, FakeClient]:
    router = Router()
    mesh = RouteMesh(router, "n1", "nats://n1")
    client = FakeClient()
    router.subscribe_client(client, b"1", "app.>", None)
    return router, mesh, client


def frame(*messages: route_pb2.RoutedMessage) -> route_pb2.Frame:
    # through bytes, as a frame arrives
    return route_pb2.Frame.FromString(route_pb2.Frame(messages=list(messages)).SerializeToString())


async def test_headers_absent_and_present_stay_apart() -> None:
    _, mesh, client = mesh_with_client()
    mesh._apply(
        "n2",
        frame(
            route_pb2.RoutedMessage(subject=b"app.plain", payload=b"p1"),
            route_pb2.RoutedMessage(subject=b"app.hdr", reply=b"_INBOX.x.1", headers=b"NATS/1.0\r\n\r\n", payload=b"p2"),
        ),
    )
    assert client.delivered == [
        (b"1", b"app.plain", None, None, b"p1"),
        (b"1", b"app.hdr", b"_INBOX.x.1", b"NATS/1.0\r\n\r\n", b"p2"),
    ]


async def test_deliver_as_is_shown_only_when_set() -> None:
    _, mesh, client = mesh_with_client()
    mesh._apply(
        "n2",
        frame(
            route_pb2.RoutedMessage(subject=b"app.deliver", deliver_as=b"orders.1", payload=b"a"),
            route_pb2.RoutedMessage(subject=b"app.deliver", payload=b"b"),
        ),
    )
    assert [(subject, payload) for _, subject, _, _, payload in client.delivered] == [
        (b"orders.1", b"a"),
        (b"app.deliver", b"b"),
    ]


async def test_queues_choose_a_local_member_and_reply_via_names_the_requesters_peer() -> None:
    router = Router(rng=random.Random(1))
    links = FakeLinks()
    router.attach_links(links)
    mesh = RouteMesh(router, "n1", "nats://n1")
    router.attach_links(links)  # the mesh attached itself; answers go to the recording links
    got: list[Message] = []
    router.subscribe("svc", got.append, "workers")
    mesh._apply(
        "n2",
        frame(
            route_pb2.RoutedMessage(subject=b"svc", reply=b"_INBOX.r.1", queues=[b"workers"], reply_via="n3", payload=b"q"),
            # a queue this node has no member of, already handed on once: delivered to nobody
            route_pb2.RoutedMessage(subject=b"svc", queues=[b"others"], rerouted=True, payload=b"x"),
        ),
    )
    assert [(m.subject, m.reply, m.headers, m.payload) for m in got] == [("svc", "_INBOX.r.1", None, b"q")]
    # the answer goes where reply_via said, though no peer told us of interest in the inbox
    assert router.publish("_INBOX.r.1", b"answer") == 1
    assert links.forwarded == [("n3", "_INBOX.r.1", None, ())]
