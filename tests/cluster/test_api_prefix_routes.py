"""A prefix mapper that took a request from a peer names where the requester's reply goes."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

from cluster.api.prefixes import PREFIX_QUEUE, PrefixMapper
from cluster.runtime.context import NodeContext
from gateway.router import Router
from tests.gateway.test_router import FakeLinks


def _mapper_node() -> tuple[Router, FakeLinks]:
    router, links = Router(), FakeLinks()
    router.attach_links(links)
    PrefixMapper(cast(NodeContext, SimpleNamespace(router=router)), ["$JS.hub.API"]).open()
    return router, links


def test_a_request_from_a_peer_is_mapped_with_the_requesters_node_named() -> None:
    router, links = _mapper_node()
    router.set_remote_interest("api-node", "$JS.API.>", "_jsapi", 1)
    router.set_remote_interest("requester-node", "_INBOX.abc.*", None, 1)
    # the requester's node chose this node's mapper for the request
    router.deliver_routed("$JS.hub.API.STREAM.INFO.S", "_INBOX.abc.1", None, b"{}", [PREFIX_QUEUE])
    assert links.forwarded == [("api-node", "$JS.API.STREAM.INFO.S", "_INBOX.abc.1", ("_jsapi",))]
    # whoever answers may not have the requester's interest yet: it sends the answer there
    assert links.reply_vias == ["requester-node"]


def test_a_mapped_request_nobody_serves_gets_no_responders() -> None:
    router, links = _mapper_node()
    router.set_remote_interest("requester-node", "_INBOX.abc.*", None, 1)
    router.deliver_routed("$JS.hub.API.STREAM.INFO.S", "_INBOX.abc.1", None, b"{}", [PREFIX_QUEUE])
    [(peer, subject, _reply, _queues)] = links.forwarded
    assert (peer, subject) == ("requester-node", "_INBOX.abc.1")
