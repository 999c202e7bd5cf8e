"""The publish hold on its own, with a real router: a client's publish on a known stream's subject that
meets no leader's interest waits for it (bounded), in order, and is either published or answered 503.
The hold is a node option, off by default (`--publish-hold SECONDS`): each test here gives its wait."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from cluster.runtime.metrics import NodeMetrics
from cluster.runtime.publish_hold import PublishHold
from gateway.headers import decode_headers
from gateway.router import Message, Router, Subscription


@dataclass
class Client:
    """A ClientSink that records what it is given and says when something arrives."""

    echo: bool = True
    no_responders: bool = True
    delivered: list[tuple[bytes, bytes | None]] = field(default_factory=list)  # (subject, headers)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    def deliver(
        self, sid: bytes, subject: bytes, reply: bytes | None, headers: bytes | None, payload: bytes
    ) -> None:
        self.delivered.append((subject, headers))
        self.arrived.set()

    def subscription_closed(self, sub: Subscription) -> None:
        pass

    def statuses(self) -> list[int | None]:
        return [decode_headers(h).status if h else None for _, h in self.delivered]


@dataclass
class Links:
    """RemoteLinks that records what is forwarded, as (peer, subject, reply, payload)."""

    forwarded: list[tuple[str, str, str | None, bytes]] = field(default_factory=list)

    def forward(
        self,
        peer: str,
        subject: str,
        reply: str | None,
        headers: bytes | None,
        payload: bytes,
        queues: Sequence[str],
        deliver_as: str | None = None,
        reply_via: str | None = None,
        rerouted: bool = False,
    ) -> None:
        self.forwarded.append((peer, subject, reply, payload))

    def rtt(self, peer: str) -> float | None:
        return None

    def peer_labels(self, peer: str) -> tuple[str, ...] | None:
        return None

    def congested(self) -> bool:
        return False

    def when_drained(self, callback: object) -> None:
        pass


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


WAIT = 2.0


def setup(wait: float = WAIT, **hold_options: int) -> tuple[Router, Links, Client, PublishHold, Clock]:
    router = Router()
    links = Links()
    router.attach_links(links)
    client = Client()
    router.subscribe_client(client, b"1", "_INBOX.c.*", None)
    clock = Clock()
    hold = PublishHold(router, wait=wait, clock=clock, **hold_options)
    hold.expect(("", "ORDERS"), ["orders.>"])
    return router, links, client, hold, clock


async def test_a_publish_waits_for_the_leaders_interest_and_then_goes_to_it() -> None:
    router, links, client, hold, _ = setup()
    assert router.publish("orders.1", b"m1", "_INBOX.c.1", origin=client) == 0
    assert client.delivered == [] and links.forwarded == [] and hold.held == 1
    router.set_remote_interest("n2", "orders.>", None, 1)
    assert links.forwarded == [("n2", "orders.1", "_INBOX.c.1", b"m1")]
    assert client.delivered == [] and hold.held == 0 and hold.released == 1


async def test_held_publishes_go_out_in_the_order_they_came() -> None:
    router, links, client, hold, _ = setup()
    assert hold.held == 0
    for n, subject in enumerate(["orders.b", "orders.a", "orders.b", "orders.c"]):
        router.publish(subject, f"m{n}".encode(), f"_INBOX.c.{n}", origin=client)
    router.publish("orders.a", b"no reply", origin=client)
    assert hold.held == 5
    router.set_remote_interest("n3", "orders.>", None, 1)
    assert [payload for *_, payload in links.forwarded] == [b"m0", b"m1", b"m2", b"m3", b"no reply"]
    # later publishes find the interest themselves, after what was held
    router.publish("orders.a", b"m5", "_INBOX.c.5", origin=client)
    assert links.forwarded[-1] == ("n3", "orders.a", "_INBOX.c.5", b"m5")
    assert client.delivered == []


async def test_a_leader_on_this_node_releases_what_waits_for_it() -> None:
    router, _, client, hold, _ = setup()
    router.publish("orders.1", b"m1", "_INBOX.c.1", origin=client)
    got: list[Message] = []
    router.subscribe("orders.>", got.append)
    assert [(m.subject, m.payload) for m in got] == [("orders.1", b"m1")]
    assert hold.held == 0


async def test_only_the_subject_that_got_interest_goes_out() -> None:
    router, links, client, hold, _ = setup()
    hold.expect(("", "BILLS"), ["bills.*"])
    router.publish("bills.1", b"b", "_INBOX.c.1", origin=client)
    router.publish("orders.1", b"o", "_INBOX.c.2", origin=client)
    router.set_remote_interest("n2", "orders.>", None, 1)
    assert [payload for *_, payload in links.forwarded] == [b"o"]
    assert hold.held == 1


async def test_nobody_came_the_client_gets_its_503_then_and_the_message_is_gone() -> None:
    router, links, client, hold, clock = setup(wait=2.0)
    router.publish("orders.1", b"m1", "_INBOX.c.1", origin=client)
    clock.now += 1.9
    hold.expire_due()
    assert client.delivered == []
    clock.now += 0.2
    hold.expire_due()
    assert client.statuses() == [503] and hold.expired == 1 and hold.held == 0
    router.set_remote_interest("n2", "orders.>", None, 1)
    assert links.forwarded == []  # answered 503: never published as well


async def test_the_outcomes_are_counted_for_metrics() -> None:
    router = Router()
    router.attach_links(Links())
    client = Client()
    router.subscribe_client(client, b"1", "_INBOX.c.*", None)
    clock = Clock()
    metrics = NodeMetrics("n1")
    hold = PublishHold(router, wait=WAIT, clock=clock, metrics=metrics)
    hold.expect(("", "BILLS"), ["bills.>"])
    router.publish("bills.1", b"x", "_INBOX.c.1", origin=client)
    router.publish("bills.2", b"y", "_INBOX.c.2", origin=client)
    router.set_remote_interest("n2", "bills.1", None, 1)
    clock.now += hold.wait
    hold.expire_due()

    def counted(outcome: str) -> float | None:
        return metrics.registry.get_sample_value("jetraft_held_publishes_total", {"node": "n1", "outcome": outcome})

    assert (counted("released"), counted("expired")) == (1.0, 1.0)


async def test_the_timer_answers_on_its_own() -> None:
    router = Router()
    client = Client()
    router.subscribe_client(client, b"1", "_INBOX.c.*", None)
    hold = PublishHold(router, wait=0.05)
    hold.expect(("", "ORDERS"), ["orders.>"])
    router.publish("orders.1", b"m1", "_INBOX.c.1", origin=client)
    assert client.delivered == []
    await asyncio.wait_for(client.arrived.wait(), 10)
    assert client.statuses() == [503]


async def test_a_subject_of_no_known_stream_is_answered_503_at_once() -> None:
    router, _, client, hold, _ = setup()
    router.publish("bills.1", b"x", "_INBOX.c.1", origin=client)
    assert client.statuses() == [503] and hold.held == 0


async def test_a_deleted_stream_is_no_longer_waited_for() -> None:
    router, _, client, hold, _ = setup()
    hold.forget(("", "ORDERS"))
    router.publish("orders.1", b"x", "_INBOX.c.1", origin=client)
    assert client.statuses() == [503]


async def test_an_updated_stream_is_waited_for_on_its_new_subjects_only() -> None:
    router, _, client, hold, _ = setup()
    hold.expect(("", "ORDERS"), ["orders.new.>"])
    router.publish("orders.old", b"x", "_INBOX.c.1", origin=client)
    router.publish("orders.new.1", b"y", "_INBOX.c.2", origin=client)
    assert client.statuses() == [503] and hold.held == 1


async def test_beyond_the_limit_publishes_are_answered_at_once() -> None:
    router, _, client, hold, _ = setup(max_messages=2)
    for n in range(3):
        router.publish("orders.1", b"x", f"_INBOX.c.{n}", origin=client)
    assert hold.held == 2 and client.statuses() == [503]


async def test_a_subject_its_publisher_listens_to_without_echo_is_not_held() -> None:
    router, _, client, hold, _ = setup()
    client.echo = False
    router.subscribe_client(client, b"2", "orders.>", None)
    router.publish("orders.1", b"x", "_INBOX.c.1", origin=client)
    assert hold.held == 0 and client.statuses() == [503]


async def test_internal_publishers_are_not_held() -> None:
    router, _, _, hold, _ = setup()
    answers: list[Message] = []
    router.subscribe("_INBOX.internal.*", answers.append)
    router.publish("orders.1", b"x", "_INBOX.internal.1", no_responders=True)
    assert hold.held == 0 and len(answers) == 1


def test_a_hold_waits_a_positive_time() -> None:
    for wait in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="positive number of seconds"):
            PublishHold(Router(), wait=wait)
