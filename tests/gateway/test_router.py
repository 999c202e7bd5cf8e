"""The router on its own: local and internal subscribers, queue groups, no-responders,
auto-unsubscribe, and what it hands the route mesh."""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from gateway.headers import decode_headers
from gateway.router import REPLY_ROUTE_TTL, InvalidSubjectError, Message, Router, Subscription


@dataclass
class FakeClient:
    """A ClientSink that records deliveries as (sid, subject, reply, headers, payload)."""

    echo: bool = True
    no_responders: bool = False
    delivered: list[tuple[bytes, bytes, bytes | None, bytes | None, bytes]] = field(default_factory=list)
    closed_subs: list[Subscription] = field(default_factory=list)

    def deliver(
        self, sid: bytes, subject: bytes, reply: bytes | None, headers: bytes | None, payload: bytes
    ) -> None:
        self.delivered.append((sid, subject, reply, headers, payload))

    def subscription_closed(self, sub: Subscription) -> None:
        self.closed_subs.append(sub)


@dataclass
class FakeLinks:
    """RemoteLinks that records forwards as (peer, subject, reply, queues)."""

    forwarded: list[tuple[str, str, str | None, tuple[str, ...]]] = field(default_factory=list)
    shown: list[str | None] = field(default_factory=list)
    reply_vias: list[str | None] = field(default_factory=list)
    rerouted: list[bool] = field(default_factory=list)

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
        self.forwarded.append((peer, subject, reply, tuple(queues)))
        self.shown.append(deliver_as)
        self.reply_vias.append(reply_via)
        self.rerouted.append(rerouted)

    def rtt(self, peer: str) -> float | None:
        return None

    def peer_labels(self, peer: str) -> tuple[str, ...] | None:
        return ()

    def congested(self) -> bool:
        return False

    def when_drained(self, callback: Callable[[], None]) -> None:
        callback()


def collector() -> tuple[list[Message], Callable[[Message], None]]:
    received: list[Message] = []
    return received, received.append


def test_plain_subscribers_each_get_every_message() -> None:
    router = Router(rng=random.Random(1))
    got_a, cb_a = collector()
    got_b, cb_b = collector()
    router.subscribe("orders.*", cb_a)
    router.subscribe("orders.>", cb_b)
    assert router.publish("orders.new", b"1") == 2
    assert router.publish("orders.new.eu", b"2") == 1
    assert [m.payload for m in got_a] == [b"1"]
    assert [m.payload for m in got_b] == [b"1", b"2"]
    assert got_a[0].subject == "orders.new"


def test_client_delivery_carries_sid_reply_and_headers() -> None:
    router = Router()
    client = FakeClient()
    router.subscribe_client(client, b"7", "a.b", None)
    router.publish("a.b", b"x", reply="_INBOX.r", headers=b"NATS/1.0\r\nK: v\r\n\r\n")
    assert client.delivered == [(b"7", b"a.b", b"_INBOX.r", b"NATS/1.0\r\nK: v\r\n\r\n", b"x")]


def test_echo_off_skips_the_publisher_only() -> None:
    router = Router()
    quiet, other = FakeClient(echo=False), FakeClient()
    router.subscribe_client(quiet, b"1", "s", None)
    router.subscribe_client(other, b"1", "s", None)
    router.publish("s", b"m", origin=quiet)
    assert quiet.delivered == []
    assert len(other.delivered) == 1


@pytest.mark.parametrize("policy", ["random", "local-first", "round-robin", "nearest"])
def test_queue_group_gets_one_member_per_message(policy: str) -> None:
    router = Router(policy, rng=random.Random(7))
    counts: Counter[str] = Counter()
    for name in ("w1", "w2", "w3"):
        router.subscribe("jobs.*", lambda _m, name=name: counts.update([name]), queue="workers")
    plain, plain_cb = collector()
    router.subscribe("jobs.*", plain_cb)
    for i in range(300):
        router.publish(f"jobs.{i}", b"")
    assert sum(counts.values()) == 300
    assert len(plain) == 300
    assert set(counts) == {"w1", "w2", "w3"}, counts
    if policy == "round-robin":
        assert set(counts.values()) == {100}


def test_two_queue_groups_each_get_one_copy() -> None:
    router = Router(rng=random.Random(3))
    per_group: Counter[str] = Counter()
    for group in ("g1", "g2"):
        for _ in range(2):
            router.subscribe("s", lambda _m, group=group: per_group.update([group]), queue=group)
    for _ in range(50):
        router.publish("s")
    assert per_group == Counter({"g1": 50, "g2": 50})


def test_no_responders_503_goes_to_a_client_that_asked_for_it() -> None:
    router = Router()
    client = FakeClient(no_responders=True)
    router.subscribe_client(client, b"9", "_INBOX.abc.*", None)
    assert router.publish("service.nobody", b"req", reply="_INBOX.abc.1", origin=client) == 0
    [(sid, subject, reply, headers, payload)] = client.delivered
    assert (sid, subject, reply, payload) == (b"9", b"_INBOX.abc.1", None, b"")
    assert headers is not None
    decoded = decode_headers(headers)
    assert (decoded.status, decoded.get("Nats-Subject")) == (503, "service.nobody")


def test_no_503_without_the_option_or_without_a_reply() -> None:
    router = Router()
    client = FakeClient(no_responders=False)
    router.subscribe_client(client, b"1", "_INBOX.>", None)
    router.publish("nobody", b"", reply="_INBOX.x", origin=client)
    asking = FakeClient(no_responders=True)
    router.subscribe_client(asking, b"1", "_INBOX.>", None)
    router.publish("nobody", b"", origin=asking)
    assert client.delivered == []
    assert asking.delivered == []


def test_no_503_when_someone_answers() -> None:
    router = Router()
    client = FakeClient(no_responders=True)
    router.subscribe_client(client, b"1", "_INBOX.>", None)
    router.subscribe("svc", lambda m: router.publish(m.reply or "", b"pong"))
    router.publish("svc", b"ping", reply="_INBOX.q", origin=client)
    assert [(d[1], d[4]) for d in client.delivered] == [(b"_INBOX.q", b"pong")]


def test_internal_publisher_gets_503_on_its_reply_subject() -> None:
    router = Router()
    replies, cb = collector()
    router.subscribe("_INBOX.internal", cb)
    router.publish("nobody", b"", reply="_INBOX.internal", no_responders=True)
    [reply] = replies
    assert reply.headers is not None
    assert decode_headers(reply.headers).status == 503


def test_auto_unsubscribe_after_max_messages_withdraws_interest() -> None:
    router = Router()
    changes: list[tuple[str, str | None, int]] = []
    router.add_interest_listener(lambda s, q, c: changes.append((s, q, c)))
    client = FakeClient()
    sub = router.subscribe_client(client, b"1", "ticks", None)
    router.auto_unsubscribe(sub, 2)
    for _ in range(5):
        router.publish("ticks", b"t")
    assert len(client.delivered) == 2
    assert sub.closed
    assert client.closed_subs == [sub]
    assert changes == [("ticks", None, 1), ("ticks", None, 0)]
    assert not router.has_interest("ticks")


def test_auto_unsubscribe_below_delivered_count_removes_now() -> None:
    router = Router()
    got, cb = collector()
    sub = router.subscribe("x", cb)
    router.publish("x")
    router.publish("x")
    router.auto_unsubscribe(sub, 1)
    assert sub.closed
    router.publish("x")
    assert len(got) == 2


def test_internal_subscribe_with_max_msgs() -> None:
    router = Router()
    got, cb = collector()
    router.subscribe("once", cb, max_msgs=1)
    router.publish("once")
    router.publish("once")
    assert len(got) == 1


def test_unsubscribe_from_inside_a_callback_is_safe() -> None:
    router = Router(rng=random.Random(0))
    got: list[str] = []
    subs: list[Subscription] = []

    def first(_m: Message) -> None:
        got.append("first")
        for sub in subs:
            router.unsubscribe(sub)

    subs.append(router.subscribe("s", first))
    subs.append(router.subscribe("s", lambda _m: got.append("second")))
    router.publish("s")
    router.publish("s")
    assert got == ["first"]


def test_failing_callback_does_not_stop_delivery() -> None:
    router = Router()
    got, cb = collector()

    def broken(_m: Message) -> None:
        raise RuntimeError("boom")

    router.subscribe("s", broken)
    router.subscribe("s", cb)
    router.publish("s", b"1")
    assert len(got) == 1


@pytest.mark.parametrize(
    ("subject", "queue"), [("a..b", None), ("a.>.b", None), ("", None), ("ok", "bad queue")]
)
def test_invalid_subscriptions_are_refused(subject: str, queue: str | None) -> None:
    with pytest.raises(InvalidSubjectError):
        Router().subscribe(subject, lambda _m: None, queue=queue)


@pytest.mark.parametrize("subject", ["a..b", "", "a.", "a b"])
def test_publishing_to_a_malformed_subject_is_refused(subject: str) -> None:
    with pytest.raises(InvalidSubjectError):
        Router().publish(subject)


def test_a_request_on_an_empty_token_gets_no_responders() -> None:
    # nats-server matches nobody on `a..b` and answers a request with its 503 (checked on 2.15.1)
    router = Router()
    client = FakeClient(no_responders=True)
    router.subscribe_client(client, b"9", "_INBOX.>", None)
    router.subscribe("a.>", lambda _m: pytest.fail("`a..b` matches nobody"))
    with pytest.raises(InvalidSubjectError):
        router.publish("a..b", b"req", reply="_INBOX.1", origin=client)
    [(_sid, _subject, _reply, headers, _payload)] = client.delivered
    assert headers is not None and decode_headers(headers).status == 503


def test_published_wildcard_tokens_are_literal() -> None:
    # nats-server (non-pedantic) delivers `a.>` as a literal subject; nats-py's consumer create
    # subjects (CONSUMER.CREATE.<stream>.<name>.<filter>) rely on it
    router = Router()
    wide, cb_wide = collector()
    star, cb_star = collector()
    literal, cb_literal = collector()
    router.subscribe("a.>", cb_wide)
    router.subscribe("a.*", cb_star)
    router.subscribe("a.b", cb_literal)
    assert router.publish("a.>") == 2
    assert router.publish("a.*") == 2
    assert len(wide) == 2 and len(star) == 2 and literal == []
    # a `>` before the last token too: nats-server delivers `a.>.b` to `a.>` (and stores it)
    assert router.publish("a.>.b") == 1
    assert [m.subject for m in wide][-1] == "a.>.b"


def test_interest_counts_per_filter_and_queue() -> None:
    router = Router()
    s1 = router.subscribe("a", lambda _m: None)
    router.subscribe("a", lambda _m: None)
    router.subscribe("a", lambda _m: None, queue="q")
    assert sorted(router.local_interest(), key=str) == sorted([("a", None, 2), ("a", "q", 1)], key=str)
    router.unsubscribe(s1)
    router.unsubscribe(s1)  # idempotent
    assert ("a", None, 1) in router.local_interest()


def test_remote_interest_gets_one_forward_per_peer() -> None:
    router = Router()
    links = FakeLinks()
    router.attach_links(links)
    router.set_remote_interest("n2", "orders.*", None, 1)
    router.set_remote_interest("n2", "orders.>", None, 3)
    router.set_remote_interest("n3", "orders.new", None, 1)
    got, cb = collector()
    router.subscribe("orders.new", cb)
    assert router.publish("orders.new", b"x", reply="r") == 3
    assert sorted(links.forwarded) == [("n2", "orders.new", "r", ()), ("n3", "orders.new", "r", ())]
    assert len(got) == 1

    router.clear_remote_interest("n2")
    links.forwarded.clear()
    router.publish("orders.new")
    assert links.forwarded == [("n3", "orders.new", None, ())]
    router.set_remote_interest("n3", "orders.new", None, 0)
    assert router.remote_interest("n3") == []


def test_deliver_as_matches_one_subject_and_shows_another() -> None:
    # JetStream delivers to an inbox or deliver subject, showing the stored message's subject
    router = Router()
    links = FakeLinks()
    router.attach_links(links)
    router.set_remote_interest("n2", "_INBOX.pull", None, 1)
    got, cb = collector()
    router.subscribe("_INBOX.pull", cb)
    assert router.publish("_INBOX.pull", b"job", reply="$JS.ACK.x", deliver_as="work.job") == 2
    assert [(m.subject, m.reply, m.payload) for m in got] == [("work.job", "$JS.ACK.x", b"job")]
    assert links.forwarded == [("n2", "_INBOX.pull", "$JS.ACK.x", ())] and links.shown == ["work.job"]
    # and a routed copy is shown the same way on the receiving node
    got.clear()
    router.deliver_routed("_INBOX.pull", None, None, b"again", (), "work.job")
    assert [m.subject for m in got] == ["work.job"]


def test_queue_group_spreads_across_peers_by_weight() -> None:
    router = Router("random", rng=random.Random(11))
    links = FakeLinks()
    router.attach_links(links)
    local = Counter[str]()
    router.subscribe("svc", lambda _m: local.update(["here"]), queue="q")
    router.set_remote_interest("n2", "svc", "q", 1)
    router.set_remote_interest("n3", "svc", "q", 2)
    for _ in range(400):
        router.publish("svc")
    remote = Counter(peer for peer, _, _, queues in links.forwarded if queues == ("q",))
    assert local["here"] + remote["n2"] + remote["n3"] == 400
    # Expected shares 100 / 100 / 200 of 400; loose bounds, the seed is fixed.
    assert 50 < local["here"] < 150 and 50 < remote["n2"] < 150 and 150 < remote["n3"] < 250


def test_local_first_never_forwards_while_a_local_member_exists() -> None:
    router = Router("local-first", rng=random.Random(5))
    links = FakeLinks()
    router.attach_links(links)
    got, cb = collector()
    router.subscribe("svc", cb, queue="q")
    router.set_remote_interest("n2", "svc", "q", 5)
    for _ in range(50):
        router.publish("svc")
    assert len(got) == 50
    assert links.forwarded == []


def test_local_first_prefers_a_worker_of_the_same_machine_to_other_nodes() -> None:
    router = Router("local-first", rng=random.Random(5), same_machine=lambda peer: peer.startswith("n1/"))
    links = FakeLinks()
    router.attach_links(links)
    router.set_remote_interest("n2/w0", "svc", "q", 5)
    router.set_remote_interest("n1/w1", "svc", "q", 1)
    for _ in range(50):
        router.publish("svc")
    assert {peer for peer, *_ in links.forwarded} == {"n1/w1"}
    router.set_remote_interest("n1/w1", "svc", "q", 0)  # the sibling's member left: any node will do
    router.publish("svc")
    assert links.forwarded[-1][0] == "n2/w0"


def test_routed_message_reaches_plain_subscribers_and_one_member_of_the_named_group() -> None:
    router = Router(rng=random.Random(2))
    links = FakeLinks()
    router.attach_links(links)
    router.set_remote_interest("n2", ">", None, 1)
    plain, plain_cb = collector()
    members: Counter[int] = Counter()
    router.subscribe("svc.*", plain_cb)
    for i in range(3):
        router.subscribe("svc.*", lambda _m, i=i: members.update([i]), queue="q")
    assert router.deliver_routed("svc.a", None, None, b"1", ["q"]) == 2
    assert router.deliver_routed("svc.a", None, None, b"2", []) == 1
    assert len(plain) == 2
    assert sum(members.values()) == 1
    # A routed message is never forwarded again, although n2 has interest.
    assert links.forwarded == []


def test_a_routed_message_whose_group_left_this_node_goes_once_to_another_members_node() -> None:
    """A replica of a deleted stream left `_sys_` while a Direct Get chosen for it was on the way:
    the request goes on to a node that still has a member (a mirror), rather than back to its sender."""
    router = Router(rng=random.Random(3))
    links = FakeLinks()
    router.attach_links(links)
    router.set_remote_interest("n1", "$JS.API.DIRECT.GET.S", "_sys_", 1)  # the sender's own member
    router.set_remote_interest("m1", "$JS.API.DIRECT.GET.S", "_sys_", 1)
    plain, plain_cb = collector()
    router.subscribe("$JS.API.DIRECT.GET.>", plain_cb)
    sent = router.deliver_routed("$JS.API.DIRECT.GET.S", "_INBOX.r", None, b"{}", ["_sys_"], from_peer="n1")
    assert sent == 2 and len(plain) == 1  # the plain subscriber here, and the hand-on
    assert links.forwarded == [("m1", "$JS.API.DIRECT.GET.S", "_INBOX.r", ("_sys_",))]
    assert links.rerouted == [True]
    # the requester's reply interest is on the sender's node
    assert links.reply_vias == ["n1"]


def test_a_routed_message_goes_back_to_its_sender_when_only_it_has_a_member() -> None:
    """A stream scaled down: the replica this node had left `_sys_` while a Direct Get was on its way,
    and the one that stays is on the requester's node, which sent it."""
    router = Router(rng=random.Random(3))
    links = FakeLinks()
    router.attach_links(links)
    router.set_remote_interest("n1", "$JS.API.DIRECT.GET.S", "_sys_", 1)
    assert router.deliver_routed("$JS.API.DIRECT.GET.S", "_INBOX.r", None, b"{}", ["_sys_"], from_peer="n1") == 1
    assert links.forwarded == [("n1", "$JS.API.DIRECT.GET.S", "_INBOX.r", ("_sys_",))]
    assert links.rerouted == [True]


def test_a_handed_on_message_is_never_handed_on_again() -> None:
    router = Router(rng=random.Random(3))
    links = FakeLinks()
    router.attach_links(links)
    router.set_remote_interest("m1", "svc", "q", 1)
    assert router.deliver_routed("svc", None, None, b"x", ["q"], from_peer="n2", rerouted=True) == 0
    assert links.forwarded == []


def test_a_routed_request_for_a_subscriber_gone_meanwhile_goes_to_the_unserved_handler_once() -> None:
    """A stream leader stepped down while a request forwarded to it was on the route: the handler for
    its prefix gets the request and where the reply goes; other subjects, replies-less messages and
    requests handed on already are dropped as before."""
    router = Router(rng=random.Random(3))
    router.attach_links(FakeLinks())
    handed: list[tuple[str, str | None, bytes, str | None]] = []
    router.on_unserved("$JSR.S.", lambda m, via: handed.append((m.subject, m.reply, m.payload, via)))
    assert router.deliver_routed("$JSR.S.ORDERS.INFO", "_INBOX.r", None, b"{}", [], from_peer="n1") == 1
    assert handed == [("$JSR.S.ORDERS.INFO", "_INBOX.r", b"{}", "n1")]
    # the reply interest the sender named wins over the sender itself
    router.deliver_routed("$JSR.S.ORDERS.INFO", "_INBOX.s", None, b"", [], reply_via="n3", from_peer="n1")
    assert handed[-1][3] == "n3"
    assert (
        router.deliver_routed("$JSR.S.ORDERS.INFO", "_INBOX.t", None, b"", [], from_peer="n1", rerouted=True)
        == 0
    )
    assert router.deliver_routed("$JSR.S.ORDERS.INFO", None, None, b"", [], from_peer="n1") == 0
    assert router.deliver_routed("orders.new", "_INBOX.u", None, b"", [], from_peer="n1") == 0
    # a subscriber here takes it: no hand-on
    got, cb = collector()
    router.subscribe("$JSR.S.ORDERS.*", cb)
    assert router.deliver_routed("$JSR.S.ORDERS.INFO", "_INBOX.v", None, b"", [], from_peer="n1") == 1
    assert len(got) == 1 and len(handed) == 2


def test_a_publish_handed_on_is_marked_so_that_the_next_node_never_hands_it_on() -> None:
    router = Router(rng=random.Random(3))
    links = FakeLinks()
    router.attach_links(links)
    router.set_remote_interest("n2", "$JSR.S.ORDERS.*", None, 1)
    router.publish("$JSR.S.ORDERS.INFO", b"", "_INBOX.r", rerouted=True)
    router.publish("$JSR.S.ORDERS.INFO", b"", "_INBOX.s")
    assert links.rerouted == [True, False]


def test_a_routed_message_whose_group_has_no_member_anywhere_is_dropped() -> None:
    router = Router(rng=random.Random(3))
    links = FakeLinks()
    router.attach_links(links)
    router.set_remote_interest("n2", "svc", "q", 0)  # the sender's last member is gone too
    assert router.deliver_routed("svc", None, None, b"x", ["q"], from_peer="n2") == 0
    assert links.forwarded == []


@pytest.mark.parametrize(
    "made_local",
    [{"local_queues": ("_jsapi",)}, {"group_policies": {"_jsapi": "local-first"}}],
    ids=["local_queues", "group_policy"],
)
def test_a_group_kept_local_falls_back_to_peers_while_others_spread(made_local: dict[str, Any]) -> None:
    # local_queues: the node's own API groups; a group policy: `_sys_` under local-first
    router = Router("random", rng=random.Random(3), **made_local)
    links = FakeLinks()
    router.attach_links(links)
    got, cb = collector()
    sub = router.subscribe("$JS.API.>", cb, queue="_jsapi")
    router.subscribe("svc", lambda _m: None, queue="other")
    router.set_remote_interest("n2", "$JS.API.>", "_jsapi", 3)
    router.set_remote_interest("n2", "svc", "other", 3)
    for _ in range(50):
        router.publish("$JS.API.INFO")
        router.publish("svc")
    assert len(got) == 50
    forwarded = Counter(queues for _, _, _, queues in links.forwarded)
    assert forwarded[("_jsapi",)] == 0
    assert forwarded[("other",)] > 0  # the other group still spreads by the random policy
    # with no local member left, the peer's members take the requests
    router.unsubscribe(sub)
    router.publish("$JS.API.INFO")
    assert Counter(queues for _, _, _, queues in links.forwarded)[("_jsapi",)] == 1


def test_interest_watch_hears_local_subscribers_come_and_go() -> None:
    router = Router()
    seen: list[bool] = []
    watch = router.watch_interest("deliver.push", lambda: seen.append(router.has_interest("deliver.push")))
    sub = router.subscribe("deliver.push", lambda _m: None)
    router.subscribe("other.subject", lambda _m: None)
    client = FakeClient()
    wide = router.subscribe_client(client, b"1", "deliver.*", None)
    router.unsubscribe(sub)
    router.unsubscribe(wide)
    # the callback runs once the change is made: has_interest already tells the new truth
    assert seen == [True, True, True, False]
    router.unwatch_interest(watch)
    router.unwatch_interest(watch)  # idempotent
    router.subscribe("deliver.push", lambda _m: None)
    assert len(seen) == 4


def test_interest_watch_hears_peers_interest_over_the_mesh() -> None:
    router = Router()
    router.attach_links(FakeLinks())
    calls: list[bool] = []
    router.watch_interest("deliver.push", lambda: calls.append(router.has_interest("deliver.push")))
    router.set_remote_interest("n2", "deliver.>", None, 1)
    router.set_remote_interest("n2", "deliver.>", None, 1)  # nothing new: no call
    router.set_remote_interest("n3", "deliver.push", None, 2)
    router.set_remote_interest("n3", "unrelated", None, 1)
    router.set_remote_interest("n3", "deliver.push", None, 0)
    router.set_remote_interest("n3", "deliver.push", None, 0)  # already gone: no call
    router.clear_remote_interest("n2")
    assert calls == [True, True, True, False]


def test_interest_watch_needs_a_literal_subject() -> None:
    with pytest.raises(InvalidSubjectError):
        Router().watch_interest("deliver.*", lambda: None)


def test_a_failing_interest_watch_does_not_stop_the_others() -> None:
    router = Router()
    calls: list[str] = []

    def broken() -> None:
        raise RuntimeError("boom")

    router.watch_interest("s", broken)
    router.watch_interest("s", lambda: calls.append("second"))
    router.subscribe("s", lambda _m: None)
    assert calls == ["second"]


def test_a_reply_route_counts_as_interest_until_it_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    router = Router()
    router.attach_links(FakeLinks())
    assert not router.has_interest("_INBOX.requester")
    router.deliver_routed("svc", "_INBOX.requester", None, b"", (), reply_via="n2")
    assert router.has_interest("_INBOX.requester")
    later = time.monotonic() + 2 * REPLY_ROUTE_TTL
    monkeypatch.setattr(time, "monotonic", lambda: later)
    assert not router.has_interest("_INBOX.requester")


def test_the_internal_space_is_closed_to_clients_whatever_their_wildcards() -> None:
    router = Router(rng=random.Random(3), internal_prefixes=("$JSR.",))
    links = FakeLinks()
    router.attach_links(links)
    advertised: list[tuple[str, str | None, int]] = []
    router.add_interest_listener(lambda subject, queue, count: advertised.append((subject, queue, count)))
    client = FakeClient()
    router.subscribe_client(client, b"1", ">", None)
    router.subscribe_client(client, b"2", "$JSR.>", None)
    # a client's `>` is no interest in an internal subject, and its `$JSR.>` is not even advertised
    assert not router.has_interest("$JSR.S.ORDERS.INFO")
    assert advertised == [(">", None, 1)]
    # a peer's interest counts there only under the internal prefix (its internal subscriptions)
    router.set_remote_interest("n2", ">", None, 1)
    assert not router.has_interest("$JSR.S.ORDERS.INFO")
    router.set_remote_interest("n3", "$JSR.S.ORDERS.*", None, 1)
    got, cb = collector()
    router.subscribe("$JSR.S.ORDERS.*", cb)
    assert router.publish("$JSR.S.ORDERS.INFO", b"{}", "_INBOX.r") == 2  # here, and n3
    assert [f[0] for f in links.forwarded] == ["n3"] and len(got) == 1 and client.delivered == []
    # and a client's publish into it reaches nobody
    assert router.publish("$JSR.S.ORDERS.PURGE", b"{}", "_INBOX.s", origin=client) == 0
    assert len(got) == 1
    # outside it, the client's wildcard works as ever
    router.publish("orders.new", b"x")
    assert [d[1] for d in client.delivered] == [b"orders.new"]
