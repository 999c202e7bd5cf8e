"""Operator mode (`operator`, `resolver: MEMORY`, `resolver_preload`) compared line by line with nats-server
2.15.1 started from the same configuration: user JWTs let in or refused, accounts kept apart, permissions
and JetStream from the JWTs, and a connection closed when its JWT expires."""

from __future__ import annotations

import json
import time
from pathlib import Path

from local.ports import HOST
from tests.gateway.jwt_factory import (
    Key,
    account_jwt,
    account_key,
    operator_jwt,
    operator_key,
    user_jwt,
    user_key,
)
from tests.node.raw_client import RawClient
from tests.node.reference_server import on_both_with_jetstream

OPERATOR, OPERATOR_SIGNER = operator_key(), operator_key()
A, A_SIGNER, B, SYS, UNKNOWN = (account_key() for _ in range(5))
A1, A2, A_BEARER, B1, B_BEARER, REVOKED, STRANGER, ADMIN = (user_key() for _ in range(8))
NOW = int(time.time())
# REVOKED's revocation covers every JWT of it issued before an hour from now: whenever the test runs

OPERATOR_CONF = f"""
operator: {operator_jwt(OPERATOR, signing_keys=[OPERATOR_SIGNER.public], system_account=SYS.public)}
resolver: MEMORY
resolver_preload: {{
  {A.public}: "{account_jwt(OPERATOR, A, signing_keys=[A_SIGNER.public], revocations={REVOKED.public: NOW + 3600},
                            limits={"disk_storage": 1_000_000, "mem_storage": -1, "streams": -1, "consumer": -1})}"
  {B.public}: "{account_jwt(OPERATOR_SIGNER, B, limits={"disallow_bearer": True},
                            default_permissions={"pub": {"deny": ["secret.>"]}})}"
  {SYS.public}: "{account_jwt(OPERATOR, SYS)}"
}}
"""  # fmt: skip


async def _bound_to(client: RawClient, account: Key, closed: bool = False) -> str:
    """What the INFO after the client's first PONG says of its account (it follows that PONG: the PONG to
    one more PING comes after it)."""
    for _ in range(0 if closed else 2):
        if any(info.get("connect_info") for info in client.infos):
            break
        await client.exchange()
    infos = [info for info in client.infos if info.get("connect_info")]
    if len(infos) != 1:
        return f"{len(infos)} connect INFOs"
    info = infos[0]
    return f"remote_account is {'its' if info.get('remote_account') == account.public else 'another'}" + (
        ", the system account" if info.get("acc_is_sys") else ""
    )


async def _connect(port: int, jwt: str, key: Key | None) -> RawClient:
    return await RawClient.connect(HOST, port, nkey_seed=key.seed if key else None, user_jwt=jwt, no_responders=True)


async def users_let_in_keep_to_their_accounts(port: int) -> list[str]:
    a1 = await _connect(port, user_jwt(A, A1), A1)
    # issued by the account's signing key, on the account's behalf
    a2 = await _connect(port, user_jwt(A_SIGNER, A2, issuer_account=A.public, pub={"allow": ["ok.>"]}), A2)
    bearer = await _connect(port, user_jwt(A, A_BEARER, bearer_token=True), None)
    b1 = await _connect(port, user_jwt(B, B1), B1)
    try:
        lines = [f"nonce of {len(a1.info.get('nonce', ''))} characters"]
        lines += await a1.exchange("SUB x.> 1\r\n")
        lines += await b1.exchange("PUB x.b 4\r\nfrom\r\nPUB secret.b 1\r\ns\r\n")
        lines += await a2.exchange("PUB ok.no 0\r\n\r\nPUB x.a2 2\r\nhi\r\n")
        lines += await bearer.exchange("PUB x.bearer 1\r\nz\r\n")
        lines += await a1.exchange()
        # the INFO after the first PONG names each client's account, and says which is the system's
        for client, account in ((a1, A), (a2, A), (b1, B)):
            lines.append(await _bound_to(client, account))
        return lines
    finally:
        for client in (a1, a2, bearer, b1):
            await client.close()


async def users_refused(port: int) -> list[str]:
    cases: list[tuple[str, str | None, Key | None]] = [
        ("no JWT", None, None),
        ("signed by another key", user_jwt(A, A1), A2),
        ("account not in the resolver", user_jwt(UNKNOWN, STRANGER), STRANGER),
        ("a key the account does not name", user_jwt(UNKNOWN, STRANGER, issuer_account=A.public), STRANGER),
        ("revoked", user_jwt(A, REVOKED), REVOKED),
        ("expired", user_jwt(A, A1, exp=NOW - 60), A1),
        ("bearer where the account disallows it", user_jwt(B, B_BEARER, bearer_token=True), None),
        ("only over WebSocket", user_jwt(A, A1, allowed_connection_types=["WEBSOCKET"]), A1),
        ("from another network", user_jwt(A, A1, src=["10.0.0.0/8"]), A1),
    ]
    lines = []
    for what, jwt, key in cases:
        client = await (_connect(port, jwt, key) if jwt else RawClient.connect(HOST, port))
        try:
            lines += [what, *await client.read_until_closed()]
        finally:
            await client.close()
    client = await _connect(port, user_jwt(A, A1, src=["127.0.0.0/8"], allowed_connection_types=["STANDARD"]), A1)
    try:
        lines += ["from this network", *await client.exchange()]
    finally:
        await client.close()
    return lines


async def _ask(client: RawClient, subject: str) -> tuple[str, str]:
    """Request `subject` on an inbox of the client's: the answer's protocol line and body."""
    await client.send(f"SUB _INBOX.ask 1\r\nPUB {subject} _INBOX.ask 0\r\n\r\n")
    return await client.next_message()


async def expiry_closes_the_connection(port: int) -> list[str]:
    client = await _connect(port, user_jwt(A, A1, exp=int(time.time()) + 2), A1)
    try:
        lines = [*await client.exchange(), *await client.read_until_closed()]
        return [*lines, await _bound_to(client, A, closed=True)]
    finally:
        await client.close()


async def jetstream_where_the_account_has_it(port: int) -> list[str]:
    lines = []
    for jwt, key in ((user_jwt(A, A1), A1), (user_jwt(B, B1), B1)):
        client = await _connect(port, jwt, key)
        try:
            _, body = await _ask(client, "$JS.API.INFO")
            reply = json.loads(body)
            # the account's JetStream limits, from its JWT (0 left for a count is no limit)
            lines += [reply["type"], json.dumps(reply.get("error")), json.dumps(reply.get("limits"))]
        finally:
            await client.close()
    return lines


async def the_system_account_asks_the_servers(port: int) -> list[str]:
    lines = []
    for jwt, key in ((user_jwt(SYS, ADMIN), ADMIN), (user_jwt(A, A1), A1)):
        client = await _connect(port, jwt, key)
        try:
            line, body = await _ask(client, "$SYS.REQ.SERVER.PING.VARZ")
            lines.append(await _bound_to(client, SYS if key is ADMIN else A))
            if line.startswith("MSG "):
                varz = json.loads(body)["data"]
                lines += ["answered", str(varz["system_account"] == SYS.public)]
            else:
                lines += [" ".join(line.split()[:3]), body.strip()]  # no responders: a status message
        finally:
            await client.close()
    return lines


async def _all(port: int) -> dict[str, list[str]]:
    scenarios = (users_let_in_keep_to_their_accounts, users_refused, jetstream_where_the_account_has_it,
                 the_system_account_asks_the_servers, expiry_closes_the_connection)  # fmt: skip
    return {scenario.__name__: await scenario(port) for scenario in scenarios}


async def test_operator_mode_matches_nats_server(tmp_path: Path) -> None:
    theirs, ours = await on_both_with_jetstream(tmp_path, OPERATOR_CONF, _all)
    # What nats-server says, so that a change on either side shows here first.
    assert theirs["users_let_in_keep_to_their_accounts"] == [
        "nonce of 15 characters",
        "-ERR 'Permissions Violation for Publish to \"secret.b\"'",
        "-ERR 'Permissions Violation for Publish to \"x.a2\"'",
        "MSG x.bearer 1 1",
        "z",
        *["remote_account is its"] * 3,
    ], theirs
    refused = ["-ERR 'Authorization Violation'", "<closed>"]
    assert theirs["users_refused"] == [
        *(line for what in ("no JWT", "signed by another key", "account not in the resolver",
                            "a key the account does not name", "revoked", "expired",
                            "bearer where the account disallows it", "only over WebSocket",
                            "from another network") for line in (what, *refused)),
        "from this network",
    ], theirs  # fmt: skip
    assert theirs["expiry_closes_the_connection"] == [
        "-ERR 'User Authentication Expired'",
        "<closed>",
        "remote_account is its",
    ], theirs
    assert theirs["the_system_account_asks_the_servers"] == [
        "remote_account is its, the system account",
        "answered",
        "True",
        "remote_account is its",
        "HMSG _INBOX.ask 1",
        "NATS/1.0 503\r\nNats-Subject: $SYS.REQ.SERVER.PING.VARZ",
    ], theirs
    assert theirs["jetstream_where_the_account_has_it"][0:3] == [
        "io.nats.jetstream.api.v1.account_info_response",
        "null",
        json.dumps({"max_memory": -1, "max_storage": 1_000_000, "max_streams": -1, "max_consumers": -1,
                    "max_ack_pending": -1, "memory_max_stream_bytes": -1, "storage_max_stream_bytes": -1,
                    "max_bytes_required": False}),
    ], theirs  # fmt: skip
    assert ours == theirs
