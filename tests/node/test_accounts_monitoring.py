"""The monitoring endpoints with several accounts: /accountz, /accstatz, /connz?auth=1 and /subsz?subs=1 name
each client's own account, and `$SYS.REQ.USER.INFO` (`nats account info`) answers each client with its own
user and account, as nats-server 2.15.1 does with the same configuration file (they named `$G` for every
client, /accountz knew only `$G` and `$SYS`, and USER.INFO was answered in the home account only)."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats

from local.ports import HOST, free_port_base
from tests.node.config_file_node import node_from_config
from tests.node.reference_server import nats_server_from_config

ACCOUNTS = """
accounts: {
    A: { users: [ {user: a, password: a} ], jetstream: enabled }
    B: { users: [ {user: b, password: b} ], jetstream: { max_streams: 5 } }
    C: { users: [ {user: c, password: c} ] }
}
"""


def _get(http_port: int, path: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{http_port}/{path}", timeout=10) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode().strip()


async def _what_monitoring_shows(client_port: int, http_port: int) -> dict[str, Any]:
    """Two clients of A (one subscribed, one publishing to it), one of B, none of C: what each endpoint says
    of each account, less what only nats-server has (its internal imports and subscriptions)."""
    a1 = await nats.connect(f"nats://a:a@{HOST}:{client_port}")
    a2 = await nats.connect(f"nats://a:a@{HOST}:{client_port}")
    b = await nats.connect(f"nats://b:b@{HOST}:{client_port}")
    try:
        sub = await a1.subscribe("greet")
        await a1.flush()
        await a2.publish("greet", b"hello")
        await a2.flush()
        await sub.next_msg(timeout=5)
        seen: dict[str, Any] = {}
        _, accountz = await asyncio.to_thread(_get, http_port, "accountz")
        seen["accounts"] = sorted(accountz["accounts"])
        for account in ("A", "B", "C", "$G"):
            _, body = await asyncio.to_thread(_get, http_port, f"accountz?acc={account}")
            detail = body["account_detail"]
            seen[f"accountz.{account}"] = {
                key: detail[key] for key in ("account_name", "jetstream_enabled", "client_connections", "name_tag")
            }
        seen["accountz.unknown"] = await asyncio.to_thread(_get, http_port, "accountz?acc=Z")
        for path in ("accstatz", "accstatz?unused=1"):
            _, body = await asyncio.to_thread(_get, http_port, path)
            seen[path] = sorted(
                (entry["acc"], entry["conns"], entry["received"]["msgs"], entry["sent"]["msgs"])
                for entry in body["account_statz"]
                if entry["acc"] != "$SYS"  # nats-server's own clients live there
            )
        _, connz = await asyncio.to_thread(_get, http_port, "connz?auth=1")
        seen["connz"] = sorted(
            (conn.get("authorized_user"), conn.get("account"), conn.get("name_tag"), conn["subscriptions"])
            for conn in connz["connections"]
        )
        _, subsz = await asyncio.to_thread(_get, http_port, "subsz?subs=1")
        seen["subsz"] = sorted(
            (entry["account"], entry["account_tag"], entry["subject"])
            for entry in subsz["subscriptions_list"]
            if entry["subject"] == "greet"
        )
        for user, nc in (("a", a1), ("b", b)):
            answer = await nc.request("$SYS.REQ.USER.INFO", b"", timeout=5)
            seen[f"user_info.{user}"] = json.loads(answer.data)["data"]
        return seen
    finally:
        for nc in (a1, a2, b):
            await nc.close()


async def _on_both(
    tmp_path: Path, scenario: Callable[[int, int], Awaitable[dict[str, Any]]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`scenario(client_port, http_port)` on nats-server 2.15.1, then on a jetraft node, both configured with
    ACCOUNTS: (theirs, mine)."""
    reference, ours = tmp_path / "ref", tmp_path / "jetraft"
    reference.mkdir()
    ours.mkdir()
    http_port = free_port_base(1)
    async with nats_server_from_config(
        reference, f"http: {HOST}:{http_port}\njetstream {{ store_dir: '{reference / 'js'}' }}\n" + ACCOUNTS
    ) as port:
        theirs = await scenario(port, http_port)
    async with node_from_config(ours, "jetstream: enabled\n" + ACCOUNTS) as node:
        mine = await scenario(node.client_port, node.http_port)
    return theirs, mine


async def test_monitoring_names_each_clients_account_as_nats_server_does(tmp_path: Path) -> None:
    theirs, mine = await _on_both(tmp_path, _what_monitoring_shows)
    assert theirs["accounts"] == ["$G", "$SYS", "A", "B", "C"]
    assert theirs["accountz.A"]["client_connections"] == 2
    assert mine == theirs


async def _varz_once_no_client_is_left(http_port: int, timeout: float = 5.0) -> dict[str, Any]:
    """A client's close returns before the server has read the end of its socket (nats-server 2.15.1 showed
    one connection left once in CI), so read /varz until it counts none, bounded."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        _, varz = await asyncio.to_thread(_get, http_port, "varz")
        if varz["connections"] == 0 or asyncio.get_running_loop().time() > deadline:
            return varz
        await asyncio.sleep(0.02)


async def _traffic_after_clients_left(client_port: int, http_port: int) -> dict[str, Any]:
    """A's publisher sends 5 messages of 10 bytes, 3 of them to A's subscriber, and both clients close; then
    what /varz and /accstatz count. nats-server's counters only grow: a client's stay when it goes."""
    sub_client = await nats.connect(f"nats://a:a@{HOST}:{client_port}")
    pub_client = await nats.connect(f"nats://a:a@{HOST}:{client_port}")
    sub = await sub_client.subscribe("counted")
    await sub_client.flush()
    for index in range(5):
        await pub_client.publish("counted" if index < 3 else "nobody", b"0123456789")
    await pub_client.flush()
    for _ in range(3):
        await sub.next_msg(timeout=5)
    await sub_client.close()
    await pub_client.close()
    varz = await _varz_once_no_client_is_left(http_port)
    _, accstatz = await asyncio.to_thread(_get, http_port, "accstatz?unused=1&accounts=A")
    (account,) = [entry for entry in accstatz["account_statz"] if entry["acc"] == "A"]
    return {
        "varz": {key: varz[key] for key in ("in_msgs", "in_bytes", "out_msgs", "out_bytes", "connections")},
        "A": (account["conns"], account["received"], account["sent"]),
    }


async def test_traffic_counters_keep_what_closed_clients_moved(tmp_path: Path) -> None:
    """/varz in_msgs and out_bytes and an account's received/sent counted only the clients still connected,
    so they fell to 0 when those left (nats-py's upstream `test_publish` reads /varz after closing)."""
    theirs, mine = await _on_both(tmp_path, _traffic_after_clients_left)
    assert theirs["varz"]["in_msgs"] >= 5 and theirs["A"][1]["msgs"] == 5
    assert mine == theirs
