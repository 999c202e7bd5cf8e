"""The client's details stamped on its API requests (`Nats-Request-Info`, gateway/connect_options.py): the
header itself, and a client port that stamps what its client said in CONNECT on the subjects it is told to,
and nothing else, whatever the client sent under that name."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import nats
import pytest_asyncio

from gateway.connect_options import (
    REQUEST_INFO_HEADER,
    RequestInfoPolicy,
    client_info,
    encode_client_info,
    stamp_request_info,
    strip_request_info,
)
from gateway.headers import decode_headers
from gateway.router import Message, Router
from gateway.server import GatewayServer
from local.ports import HOST

TIMEOUT = 5.0


def test_a_request_without_headers_gets_a_block_of_its_own() -> None:
    block = stamp_request_info(None, b'{"id":1}')
    assert block == b'NATS/1.0\r\nNats-Request-Info: {"id":1}\r\n\r\n'


def test_the_clients_own_headers_are_kept_and_a_forged_request_info_dropped() -> None:
    sent = b"NATS/1.0\r\nX-Mine: 1\r\nnats-request-info: forged\r\nNats-Request-Info: again\r\n\r\n"
    headers = decode_headers(stamp_request_info(sent, b'{"id":2}'))
    assert headers.fields == [("X-Mine", "1"), (REQUEST_INFO_HEADER, '{"id":2}')]


def test_stripping_gives_back_what_the_client_sent() -> None:
    assert strip_request_info(stamp_request_info(None, b"{}")) is None
    mine = b"NATS/1.0\r\nX-Mine: 1\r\n\r\n"
    assert strip_request_info(stamp_request_info(mine, b"{}")) == mine


def test_requests_answered_with_messages_are_not_stamped() -> None:
    policy = RequestInfoPolicy(
        prefixes=("$JS.API.", "$JS.hub.API."), server="n1", cluster="", unaudited=("DIRECT.GET.",)
    )
    assert policy.stamps("$JS.API.STREAM.INFO.S") and policy.stamps("$JS.hub.API.INFO")
    assert not policy.stamps("$JS.API.DIRECT.GET.S") and not policy.stamps("$JS.hub.API.DIRECT.GET.S")


def test_client_info_leaves_out_what_is_empty_in_nats_servers_order() -> None:
    info = client_info(
        start="2026-01-01T00:00:00Z",
        host="127.0.0.1",
        client_id=7,
        account="$G",
        user="",
        name="app",
        lang="python3",
        version="2.16.0",
        rtt_ns=0,
        server="n1",
        cluster="",
    )
    assert list(info) == ["start", "host", "id", "acc", "name", "lang", "ver", "server", "kind", "client_type"]
    assert encode_client_info(info).startswith(b'{"start":"2026-01-01T00:00:00Z","host":"127.0.0.1","id":7,')


@pytest_asyncio.fixture
async def server() -> AsyncIterator[GatewayServer]:
    gateway = GatewayServer(Router(), name="t1")
    gateway.request_info = RequestInfoPolicy(
        prefixes=("$JS.API.",), server="t1", cluster="c1", unaudited=("DIRECT.GET.",)
    )
    await gateway.start()
    try:
        yield gateway
    finally:
        await gateway.stop()


async def test_requests_on_the_policys_subjects_carry_the_client_as_connect_named_it(
    server: GatewayServer,
) -> None:
    received: asyncio.Queue[Message] = asyncio.Queue()
    server.router.subscribe(">", received.put_nowait)
    client = await nats.connect(f"nats://{HOST}:{server.port}", name="app", allow_reconnect=False)
    try:
        # a client watching the API gets the request as its client sent it, unstamped
        spy = await client.subscribe("$JS.API.>")
        await client.publish("$JS.API.INFO", b"", headers={REQUEST_INFO_HEADER: '{"acc":"evil"}'})
        await client.publish("other.subject", b"")
        await client.publish("$JS.API.DIRECT.GET.S", b"")
        await client.flush()
        api = await asyncio.wait_for(received.get(), TIMEOUT)
        other = await asyncio.wait_for(received.get(), TIMEOUT)
        direct_get = await asyncio.wait_for(received.get(), TIMEOUT)
        watched = await spy.next_msg(TIMEOUT)
    finally:
        await client.close()
    assert api.subject == "$JS.API.INFO" and api.headers is not None
    info = json.loads(decode_headers(api.headers).get(REQUEST_INFO_HEADER) or "")
    assert info["acc"] == "$G" and info["name"] == "app" and info["lang"] == "python3"
    assert info["server"] == "t1" and info["cluster"] == "c1" and info["host"] == "127.0.0.1"
    assert info["kind"] == "Client" and info["client_type"] == "nats" and info["id"] >= 1 and info["rtt"] > 0
    assert other.subject == "other.subject" and other.headers is None
    assert direct_get.subject == "$JS.API.DIRECT.GET.S" and direct_get.headers is None
    # the forged header was replaced, then the stamp taken off: nothing left (nats-server would show the
    # forgery here, a known difference, tests/node/test_api_audit.py compares the usual case)
    assert watched.headers is None


async def test_while_nobody_watches_requests_are_not_stamped_and_a_forgery_is_dropped() -> None:
    gateway = GatewayServer(Router(), name="t1")
    gateway.request_info = RequestInfoPolicy(prefixes=("$JS.API.",), server="t1", cluster="", watched="audits")
    await gateway.start()
    received: asyncio.Queue[Message] = asyncio.Queue()
    gateway.router.subscribe("$JS.API.>", received.put_nowait)
    client = await nats.connect(f"nats://{HOST}:{gateway.port}", allow_reconnect=False)
    try:
        await client.publish("$JS.API.INFO", b"", headers={REQUEST_INFO_HEADER: '{"acc":"evil"}', "X-Mine": "1"})
        unwatched = await asyncio.wait_for(received.get(), TIMEOUT)
        gateway.router.subscribe("audits", lambda msg: None)
        await client.publish("$JS.API.INFO", b"")
        watched = await asyncio.wait_for(received.get(), TIMEOUT)
    finally:
        await client.close()
        await gateway.stop()
    assert unwatched.headers == b"NATS/1.0\r\nX-Mine: 1\r\n\r\n"
    assert watched.headers is not None and REQUEST_INFO_HEADER.encode() in watched.headers
