"""Users and permissions from nats-server's config file, compared line by line with nats-server 2.15.1
started from the same `authorization` block."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable
from pathlib import Path

import bcrypt
import nacl.signing
import nkeys

from local.ports import HOST
from tests.node.config_file_node import node_from_config
from tests.node.raw_client import RawClient
from tests.node.reference_server import nats_server_from_config

# The cheapest cost bcrypt allows, to keep the test quick; nats-server takes any.
HASHED = bcrypt.hashpw(b"h4shed", bcrypt.gensalt(rounds=4)).decode()


def _user_seed() -> bytes:
    return bytes(nkeys.encode_seed(bytes(nacl.signing.SigningKey.generate()), nkeys.PREFIX_BYTE_USER))


NKEY_SEED, STRANGER_SEED = _user_seed(), _user_seed()
NKEY_PUBLIC = nkeys.from_seed(bytearray(NKEY_SEED)).public_key.decode()

AUTHORIZATION = """
authorization {
  PASS: "s3cret"
  users = [
    {user: alice, password: $PASS, permissions: {
      publish: { allow: "orders.>", deny: "orders.secret" }
      subscribe: { allow: ["orders.*", "_INBOX.>"], deny: "orders.secret" }
    }}
    {user: bob, password: b0b}
    {user: svc, password: svc, permissions: { subscribe: "svc.req", allow_responses: true }}
    {user: old, password: old, permissions: { publish: ["a.b", "c.*"], subscribe: "x.>" }}
    {user: hashed, password: "HASHED", permissions: { publish: "h.>" }}
    {nkey: NKEY, permissions: { subscribe: "n.>" }}
  ]
}
""".replace("HASHED", HASHED).replace("NKEY", NKEY_PUBLIC)

Scenario = Callable[[int], Awaitable[list[str]]]


async def alice_publishes_and_subscribes(port: int) -> list[str]:
    alice = await RawClient.connect(HOST, port, user="alice", **{"pass": "s3cret"})
    try:
        lines = await alice.exchange("SUB orders.* 1\r\nSUB orders.secret 2\r\nSUB public.x 3\r\nSUB orders.> 4\r\n")
        lines += await alice.exchange("SUB orders.* workers 5\r\nSUB _INBOX.abc 6\r\n")
        lines += await alice.exchange("PUB orders.new 2\r\nhi\r\nPUB orders.secret 1\r\nx\r\nPUB public.x 0\r\n\r\n")
        lines += await alice.exchange("PUB orders.a.b 1\r\ny\r\n")
        return lines
    finally:
        await alice.close()


async def deny_filters_a_wildcard_subscription(port: int) -> list[str]:
    alice = await RawClient.connect(HOST, port, user="alice", **{"pass": "s3cret"})
    bob = await RawClient.connect(HOST, port, user="bob", **{"pass": "b0b"})
    try:
        lines = await alice.exchange("SUB orders.* 1\r\n")
        lines += await bob.exchange("PUB orders.secret 6\r\nhidden\r\nPUB orders.open 5\r\nshown\r\n")
        lines += await alice.exchange()
        return lines
    finally:
        await alice.close()
        await bob.close()


async def a_service_answers_each_request_once(port: int) -> list[str]:
    svc = await RawClient.connect(HOST, port, user="svc", **{"pass": "svc"})
    bob = await RawClient.connect(HOST, port, user="bob", **{"pass": "b0b"})
    try:
        lines = await bob.exchange("SUB reply.1 1\r\n")
        lines += await svc.exchange("SUB svc.req 9\r\nSUB other 10\r\n")
        lines += await bob.exchange("PUB svc.req reply.1 3\r\nask\r\n")
        lines += await svc.exchange()
        lines += await svc.exchange("PUB reply.1 3\r\nyes\r\nPUB reply.1 5\r\nagain\r\nPUB svc.req 0\r\n\r\n")
        lines += await bob.exchange()
        return lines
    finally:
        await svc.close()
        await bob.close()


async def old_style_lists_allow(port: int) -> list[str]:
    old = await RawClient.connect(HOST, port, user="old", **{"pass": "old"})
    try:
        return await old.exchange("PUB a.b 0\r\n\r\nPUB c.d 0\r\n\r\nPUB c.d.e 0\r\n\r\nSUB x.y 1\r\nSUB y 2\r\n")
    finally:
        await old.close()


async def wrong_password_and_unknown_user(port: int) -> list[str]:
    lines = []
    for user, password in (("alice", "nope"), ("mallory", "s3cret")):
        client = await RawClient.connect(HOST, port, user=user, **{"pass": password})
        try:
            lines += await client.read_until_closed()
        finally:
            await client.close()
    return lines


async def a_bcrypt_password(port: int) -> list[str]:
    client = await RawClient.connect(HOST, port, user="hashed", **{"pass": "h4shed"})
    try:
        lines = await client.exchange("SUB h.1 1\r\nPUB h.1 2\r\nok\r\nPUB nope 0\r\n\r\n")
    finally:
        await client.close()
    for password in ("wrong", HASHED):  # the hash itself is not the password
        client = await RawClient.connect(HOST, port, user="hashed", **{"pass": password})
        try:
            lines += await client.read_until_closed()
        finally:
            await client.close()
    return lines


async def an_nkey_user(port: int) -> list[str]:
    client = await RawClient.connect(HOST, port, nkey_seed=NKEY_SEED)
    try:
        nonce = client.info.get("nonce", "")
        lines = [f"nonce of {len(nonce)} characters"]
        lines += await client.exchange("SUB n.1 1\r\nSUB m 2\r\nPUB n.1 1\r\nk\r\n")
    finally:
        await client.close()
    # A key nobody configured, a signature by another key, and none at all.
    stranger = nkeys.from_seed(bytearray(STRANGER_SEED))
    for options in (
        {"nkey_seed": STRANGER_SEED},
        {"nkey": NKEY_PUBLIC, "sig": base64.b64encode(stranger.sign(b"not the nonce")).decode()},
        {"nkey": NKEY_PUBLIC},
    ):
        client = await RawClient.connect(HOST, port, **options)
        try:
            lines += await client.read_until_closed()
        finally:
            await client.close()
    return lines


SCENARIOS: list[Scenario] = [
    an_nkey_user,
    a_bcrypt_password,
    alice_publishes_and_subscribes,
    deny_filters_a_wildcard_subscription,
    a_service_answers_each_request_once,
    old_style_lists_allow,
    wrong_password_and_unknown_user,
]


async def test_permission_errors_match_nats_server(tmp_path: Path) -> None:
    (tmp_path / "ref").mkdir()
    (tmp_path / "jetraft").mkdir()
    async with nats_server_from_config(tmp_path / "ref", AUTHORIZATION) as port:
        expected = {scenario.__name__: await scenario(port) for scenario in SCENARIOS}
    async with node_from_config(tmp_path / "jetraft", AUTHORIZATION) as node:
        got = {scenario.__name__: await scenario(node.client_port) for scenario in SCENARIOS}
    # What nats-server says, so that a change on either side shows here first. A subscription on
    # orders.> is allowed by orders.*: nats-server matches the subscription's `>` as one token.
    assert [line for line in expected["alice_publishes_and_subscribes"] if line.startswith("-ERR")] == [
        "-ERR 'Permissions Violation for Subscription to \"orders.secret\"'",
        "-ERR 'Permissions Violation for Subscription to \"public.x\"'",
        "-ERR 'Permissions Violation for Publish to \"orders.secret\"'",
        "-ERR 'Permissions Violation for Publish to \"public.x\"'",
    ], expected
    assert expected["a_bcrypt_password"] == [
        "MSG h.1 1 2",
        "ok",
        "-ERR 'Permissions Violation for Publish to \"nope\"'",
        *(["-ERR 'Authorization Violation'", "<closed>"] * 2),
    ]
    assert expected["an_nkey_user"] == [
        "nonce of 15 characters",
        "-ERR 'Permissions Violation for Subscription to \"m\"'",
        "MSG n.1 1 1",
        "k",
        *(["-ERR 'Authorization Violation'", "<closed>"] * 3),
    ]
    assert expected["deny_filters_a_wildcard_subscription"] == ["MSG orders.open 1 5", "shown"]
    assert expected["wrong_password_and_unknown_user"] == ["-ERR 'Authorization Violation'", "<closed>"] * 2
    assert got == expected


LIMITS = "max_connections: 2\nmax_subscriptions: 2\nmax_payload: 16\n"


async def limits_scenario(port: int) -> list[str]:
    first = await RawClient.connect(HOST, port)
    second = await RawClient.connect(HOST, port)
    try:
        lines = [f"max_payload {first.info['max_payload']}"]
        lines += await first.exchange("SUB a 1\r\nSUB b 2\r\nSUB c 3\r\nUNSUB 1\r\nSUB c 4\r\n")
        # nats-server sends INFO before it counts a connection, and reads from it only after: the
        # second client's PONG shows it is counted before the third connects.
        lines += await second.exchange()
        # A third client gets INFO, then the error, and is closed.
        reader, writer = await asyncio.open_connection(HOST, port)
        while line := await asyncio.wait_for(reader.readline(), 10):
            lines.append("INFO" if line.startswith(b"INFO ") else line.decode().rstrip("\r\n"))
        lines.append("<closed>")
        writer.close()
        lines += await second.exchange("PUB x 17\r\n" + "y" * 17 + "\r\n")
        return lines
    finally:
        await first.close()
        await second.close()


async def test_connection_subscription_and_payload_limits_match_nats_server(tmp_path: Path) -> None:
    (tmp_path / "ref").mkdir()
    (tmp_path / "jetraft").mkdir()
    async with nats_server_from_config(tmp_path / "ref", LIMITS) as port:
        expected = await limits_scenario(port)
    assert expected == [
        "max_payload 16",
        "-ERR 'maximum subscriptions exceeded'",
        "INFO",
        "-ERR 'maximum connections exceeded'",
        "<closed>",
        "-ERR 'Maximum Payload Violation'",
        "<closed>",
    ]
    async with node_from_config(tmp_path / "jetraft", LIMITS) as node:
        assert await limits_scenario(node.client_port) == expected
