"""Reply routes: a request passed on to a third node names where its answer goes.

The meta leader passes a client's STREAM.INFO on to the stream leader. The
requester's node sent its reply interest to the stream leader over their own
link, which may lag behind the request's two hops: the answer must still
reach the requester.
"""

from __future__ import annotations

import pytest

from gateway import router as router_module
from gateway.router import Router
from tests.gateway.test_router import FakeClient, FakeLinks, collector


def test_pass_on_names_the_peer_where_the_reply_subject_has_interest() -> None:
    router, links = Router(), FakeLinks()
    router.attach_links(links)
    router.set_remote_interest("stream-leader", "$JSC.S.ORDERS.*", None, 1)
    router.set_remote_interest("requester-node", "_INBOX.abc.*", None, 1)
    assert router.pass_on("$JSC.S.ORDERS.INFO", b"{}", "_INBOX.abc.1", None) == 1
    assert links.forwarded == [("stream-leader", "$JSC.S.ORDERS.INFO", "_INBOX.abc.1", ())]
    assert links.reply_vias == ["requester-node"]


def test_pass_on_names_nobody_for_a_local_requester_or_no_reply() -> None:
    router, links = Router(), FakeLinks()
    router.attach_links(links)
    router.set_remote_interest("stream-leader", "svc", None, 1)
    router.subscribe_client(FakeClient(), b"1", "_INBOX.local.*", None)
    router.pass_on("svc", b"", "_INBOX.local.1", None)
    router.pass_on("svc", b"", None, None)
    assert links.reply_vias == [None, None]


def test_an_answer_before_the_requesters_interest_goes_to_the_named_peer() -> None:
    router, links = Router(), FakeLinks()
    router.attach_links(links)
    request, on_request = collector()
    router.subscribe("svc", on_request)
    router.deliver_routed("svc", "_INBOX.abc.1", None, b"q", [], reply_via="requester-node")
    assert [m.reply for m in request] == ["_INBOX.abc.1"]

    assert router.publish("_INBOX.abc.1", b"answer", deliver_as="orders.1") == 1
    assert links.forwarded == [("requester-node", "_INBOX.abc.1", None, ())]
    assert links.shown == ["orders.1"]
    # a subject nobody named is still nobody's
    assert router.publish("_INBOX.other.1", b"x") == 0


def test_once_the_interest_arrives_it_decides() -> None:
    router, links = Router(), FakeLinks()
    router.attach_links(links)
    router.deliver_routed("svc", "_INBOX.abc.1", None, b"q", [], reply_via="requester-node")
    router.set_remote_interest("elsewhere", "_INBOX.abc.*", None, 1)
    router.publish("_INBOX.abc.1", b"answer")
    assert [peer for peer, *_ in links.forwarded] == ["elsewhere"]


def test_reply_routes_expire_and_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(router_module.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(router_module, "REPLY_ROUTES_MAX", 3)
    router, links = Router(), FakeLinks()
    router.attach_links(links)
    for i in range(5):
        router.deliver_routed("svc", f"_INBOX.r.{i}", None, b"", [], reply_via="p")
    # the two oldest made room for the newest
    assert [router.publish(f"_INBOX.r.{i}", b"") for i in range(5)] == [0, 0, 1, 1, 1]
    clock[0] += router_module.REPLY_ROUTE_TTL + 1
    assert router.publish("_INBOX.r.4", b"") == 0
