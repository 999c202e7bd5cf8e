"""A node's own JetStream limits (`jetstream { max_memory_store, max_file_store }`): the same limits given to
nats-server 2.15.1 and to a jetraft node without peers, the same requests, the same answers.

As nats-server: the limits count what the node stores, not the account's (ACCOUNT INFO's `limits` stay -1);
a stream's max_bytes is reserved from them at create and update (10028 memory, 10047 file; a stream without
max_bytes takes one byte); a publish is refused with 10023 once the node holds more than its limit (the one
that crosses it is stored); /varz and /jsz show them as `config.max_memory` and `config.max_storage`."""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import nats
import pytest

from cluster.node.config import ConfigError, add_node_arguments, config_from_args
from local.ports import HOST, free_port_base
from tests.node.config_file_node import node_from_config
from tests.node.reference_server import NATS_SERVER, nats_server_from_config

T = TypeVar("T")

LIMITS = "max_memory_store: 3000, max_file_store: '1K'"  # 1K as a string: 1024 bytes


async def on_both_with_limits(
    tmp_path: Path, limits: str, scenario: Callable[[int, int], Awaitable[T]], rest: str = "", workers: int = 1
) -> tuple[T, T]:
    """`scenario(client port, http port)` against nats-server 2.15.1, then a jetraft node (of `workers`
    workers), both given `jetstream { <limits> }` and `rest`: (theirs, ours)."""
    reference, ours = tmp_path / "ref", tmp_path / "jetraft"
    reference.mkdir()
    ours.mkdir()
    http_port = free_port_base(1)
    body = f"http: {HOST}:{http_port}\njetstream {{ store_dir: '{reference / 'js'}', {limits} }}\n{rest}"
    async with nats_server_from_config(reference, body) as port:
        theirs = await scenario(port, http_port)
    async with node_from_config(ours, f"jetstream {{ {limits} }}\n{rest}", workers=workers) as node:
        return theirs, await scenario(node.client_port, node.http_port)


def _stream(op: str, name: str, **config: Any) -> tuple[str, dict[str, Any]]:
    return f"$JS.API.STREAM.{op}.{name}", {"name": name, "subjects": [name.lower()], **config}


ADMIN = [
    ("$JS.API.INFO", {}),
    _stream("CREATE", "M1", storage="memory", max_bytes=2048),
    _stream("CREATE", "M2", storage="memory", max_bytes=2048),  # 4096 of 3000: 10028
    _stream("CREATE", "M3", storage="memory"),  # no max_bytes: one byte, which is free
    _stream("UPDATE", "M1", storage="memory", max_bytes=1024),  # shrinking frees room
    _stream("CREATE", "M2", storage="memory", max_bytes=1976),  # exactly what is left
    _stream("UPDATE", "M2", storage="memory", max_bytes=1977),  # one byte more: 10028
    _stream("CREATE", "S0"),
    _stream("CREATE", "S1", max_bytes=1025),  # over max_file_store on its own: 10047
    _stream("CREATE", "S1", max_bytes=600),
    _stream("UPDATE", "S1", max_bytes=1025),  # grows by 425 where 424 are left: 10047
    _stream("UPDATE", "S1", max_bytes=1024),
    _stream("CREATE", "S2"),  # every byte reserved: not even the one byte of a stream without max_bytes
    ("$JS.API.INFO", {}),
]


def _essence(subject: str, reply: dict[str, Any]) -> dict[str, Any]:
    if "error" in reply:
        return {"type": reply["type"], "error": reply["error"]}
    if subject == "$JS.API.INFO":
        keep = ("memory", "storage", "reserved_memory", "reserved_storage", "streams", "limits")
        return {key: reply[key] for key in keep}
    return {"type": reply["type"], "max_bytes": reply["config"]["max_bytes"]}


def _get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=10) as response:
        body: dict[str, Any] = json.loads(response.read())
        return body


async def varz_and_jsz(http_port: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The node's /varz and /jsz bodies."""
    varz = await asyncio.to_thread(_get, f"http://{HOST}:{http_port}/varz")
    jsz = await asyncio.to_thread(_get, f"http://{HOST}:{http_port}/jsz")
    return varz, jsz


async def _admin(client_port: int, http_port: int) -> list[Any]:
    nc = await nats.connect(f"nats://{HOST}:{client_port}")
    answers: list[Any] = []
    try:
        for subject, body in ADMIN:
            reply = await nc.request(subject, json.dumps(body).encode() if body else b"", timeout=10)
            answers.append(_essence(subject, json.loads(reply.data)))
    finally:
        await nc.close()
    varz, jsz = await varz_and_jsz(http_port)
    for config in (varz["jetstream"]["config"], jsz["config"]):
        answers.append({key: config[key] for key in ("max_memory", "max_storage")})
    answers.append({key: jsz[key] for key in ("reserved_memory", "reserved_storage")})
    return answers


async def test_stream_creates_and_updates_reserve_the_nodes_bytes_as_in_nats_server(tmp_path: Path) -> None:
    expected, got = await on_both_with_limits(tmp_path, LIMITS, _admin)
    codes = [answer.get("error", {}).get("err_code") for answer in expected[: len(ADMIN)]]
    assert codes == [None, None, 10028, None, None, None, 10028, None, 10047, None, 10047, None, 10047, None]
    assert expected[0]["limits"]["max_memory"] == -1  # the account has no limits of its own
    assert expected[-3:] == [
        {"max_memory": 3000, "max_storage": 1024},
        {"max_memory": 3000, "max_storage": 1024},
        {"reserved_memory": 3000, "reserved_storage": 1024},
    ]
    for (subject, _), want, have in zip(ADMIN, expected, got, strict=False):
        assert (subject, have) == (subject, want)
    assert got == expected


async def _publishes(client_port: int, _http_port: int) -> list[Any]:
    """400-byte messages into a memory stream and two file streams until the node is past its limits."""
    nc = await nats.connect(f"nats://{HOST}:{client_port}")
    answers: list[Any] = []
    try:
        for name, storage in (("M", "memory"), ("F", "file"), ("G", "file")):
            body = {"name": name, "subjects": [name.lower()], "storage": storage}
            reply = await nc.request(f"$JS.API.STREAM.CREATE.{name}", json.dumps(body).encode(), timeout=10)
            assert "error" not in json.loads(reply.data)
        for subject in ["m"] * 9 + ["f"] * 3 + ["g"] * 2 + ["m"]:
            reply = await nc.request(subject, b"x" * 400, timeout=10)
            answers.append(json.loads(reply.data))
        for name in ("M", "F", "G"):
            info = json.loads((await nc.request(f"$JS.API.STREAM.INFO.{name}", b"", timeout=10)).data)
            answers.append({key: info["state"][key] for key in ("messages", "bytes")})
    finally:
        await nc.close()
    return answers


async def test_a_publish_past_the_nodes_limit_is_refused_as_by_nats_server(tmp_path: Path) -> None:
    # 3200: a memory message of 400 bytes counts 417 (subject, payload and 16), so the 8th crosses the limit
    expected, got = await on_both_with_limits(tmp_path, "max_memory_store: 3200, max_file_store: 1000", _publishes)
    refused = [i for i, answer in enumerate(expected[:15]) if "error" in answer]
    # the 8th memory message crosses the limit and is stored; the 9th is refused; the node's file limit
    # counts both file streams: the third message to F crosses it, and G gets nothing
    assert refused == [8, 12, 13, 14]
    assert expected[8] == {
        "error": {"code": 503, "err_code": 10023, "description": "insufficient resources"},
        "stream": "M",
        "seq": 0,
    }
    assert expected[15] == {"messages": 8, "bytes": 8 * 417}
    assert got == expected


async def test_a_node_of_two_workers_holds_its_limits_as_one_nats_server(tmp_path: Path) -> None:
    """The same publishes to a node of two workers: its streams are spread over both (each new one goes
    to the worker with fewer), and the limit counts what the whole node holds, as nats-server's counts
    what its server holds (each worker counting its own let G's worker take messages past the limit)."""
    expected, got = await on_both_with_limits(
        tmp_path, "max_memory_store: 3200, max_file_store: 1000", _publishes, workers=2
    )
    assert [i for i, answer in enumerate(expected[:15]) if "error" in answer] == [8, 12, 13, 14]
    assert got == expected


CONSUMER_LIMITS = "limits { max_ack_pending: 100, max_request_batch: 10 }"


def _consumer(name: str, **config: Any) -> tuple[str, dict[str, Any]]:
    body = {"stream_name": "S", "config": {"durable_name": name, "ack_policy": "explicit", **config}}
    return f"$JS.API.CONSUMER.CREATE.S.{name}", body


CONSUMERS = [
    _consumer("C1"),  # max_ack_pending: the server's 100 (below the default 1000); max_batch: its 10
    _consumer("C2", max_ack_pending=101),  # 10121, limit of 100
    _consumer("C3", max_ack_pending=-1),  # no limit asked: nats-server lets it be
    _consumer("C4", max_batch=11),  # 10125
    _consumer("C5", max_batch=10, max_ack_pending=100),
    _consumer("P1", deliver_subject="push.p1"),  # a push consumer has no max_batch
    _consumer("P2", deliver_subject="push.p2", max_ack_pending=500),  # 10121 for push ones too
]


async def _consumer_answers(port: int, user: str) -> list[dict[str, Any]]:
    nc = await nats.connect(f"nats://{user}{HOST}:{port}")
    answers: list[dict[str, Any]] = []
    try:
        reply = await nc.request("$JS.API.STREAM.CREATE.S", json.dumps({"name": "S", "subjects": ["s"]}).encode())
        assert "error" not in json.loads(reply.data)
        for subject, body in CONSUMERS:
            answer = json.loads((await nc.request(subject, json.dumps(body).encode(), timeout=10)).data)
            if "error" in answer:
                answers.append({"error": answer["error"]})
            else:
                config = answer["config"]
                answers.append({key: config.get(key) for key in ("max_ack_pending", "max_batch")})
    finally:
        await nc.close()
    return answers


async def test_consumers_within_the_servers_limits_as_in_nats_server(tmp_path: Path) -> None:
    expected, got = await on_both_with_limits(
        tmp_path, CONSUMER_LIMITS, lambda port, _http: _consumer_answers(port, "")
    )
    assert expected == [
        {"max_ack_pending": 100, "max_batch": 10},
        {"error": {"code": 400, "err_code": 10121, "description": "consumer max ack pending exceeds system limit of 100"}},
        {"max_ack_pending": -1, "max_batch": 10},
        {"error": {"code": 400, "err_code": 10125, "description": "consumer max request batch exceeds server limit of 10"}},
        {"max_ack_pending": 100, "max_batch": 10},
        {"max_ack_pending": 100, "max_batch": None},
        {"error": {"code": 400, "err_code": 10121, "description": "consumer max ack pending exceeds system limit of 100"}},
    ]
    assert got == expected


ACCOUNT_CAP = "accounts: { A: { users: [ {user: a, password: a} ], jetstream: { max_ack_pending: 50 } } }\n"


async def test_the_servers_and_the_accounts_max_ack_pending_combine_as_in_nats_server(tmp_path: Path) -> None:
    """The lower default wins; a consumer over both is told the server's limit (checked first)."""
    expected, got = await on_both_with_limits(
        tmp_path, CONSUMER_LIMITS, lambda port, _http: _consumer_answers(port, "a:a@"), ACCOUNT_CAP
    )
    assert expected[0] == {"max_ack_pending": 50, "max_batch": 10}
    assert expected[1]["error"]["description"] == "consumer max ack pending exceeds system limit of 100"
    assert expected[4]["error"]["description"] == "consumer max ack pending exceeds system limit of 50"
    assert got == expected


async def _copies(client_port: int, _http_port: int) -> dict[str, list[int]]:
    """A memory stream of five 400-byte messages, mirrored into a file stream on a node that may store 1000
    bytes: each copy is 430 bytes, so the third crosses the limit and is the last; a source made then gets
    nothing. What the copies hold once the mirror has three, then over the next second (how long a copy
    that should not be made has to show up)."""
    nc = await nats.connect(f"nats://{HOST}:{client_port}")

    async def held(name: str) -> int:
        info = json.loads((await nc.request(f"$JS.API.STREAM.INFO.{name}", b"", timeout=10)).data)
        count: int = info["state"]["messages"]
        return count

    async def create(body: dict[str, Any]) -> None:
        reply = await nc.request(f"$JS.API.STREAM.CREATE.{body['name']}", json.dumps(body).encode(), timeout=10)
        assert "error" not in json.loads(reply.data), reply.data

    try:
        await create({"name": "O", "subjects": ["o"], "storage": "memory"})
        for _ in range(5):
            await nc.request("o", b"x" * 400, timeout=10)
        await create({"name": "M", "mirror": {"name": "O"}})
        async with asyncio.timeout(20):
            while await held("M") < 3:
                await asyncio.sleep(0.05)
        await create({"name": "X", "sources": [{"name": "O"}]})
        samples: dict[str, list[int]] = {"M": [], "X": []}
        for _ in range(4):
            await asyncio.sleep(0.25)
            for name in samples:
                samples[name].append(await held(name))
        return samples
    finally:
        await nc.close()


async def test_mirror_and_source_copies_stop_at_the_nodes_limit_as_in_nats_server(tmp_path: Path) -> None:
    expected, got = await on_both_with_limits(tmp_path, "max_file_store: 1000", _copies)
    assert expected == {"M": [3, 3, 3, 3], "X": [0, 0, 0, 0]}
    assert got == expected


def _node_config(path: Path, *argv: str) -> None:
    parser = argparse.ArgumentParser()
    add_node_arguments(parser)
    config_from_args(parser.parse_args(["--config", str(path), *argv]))


LONE_LIMITS = "max_memory_store: 1000, max_file_store: 1000"


@pytest.mark.parametrize(
    ("limits", "account", "words"),
    [
        (LONE_LIMITS, "max_mem: 1001, max_file: 1000", "insufficient memory resources available (10028)"),
        (LONE_LIMITS, "max_mem: 1000, max_file: 1001", "insufficient storage resources available (10047)"),
        # no limits of the node's own: nats-server's default memory limit, 75% of the machine's, counts
        ("", "max_mem: 1000T, max_file: 1", "insufficient memory resources available (10028)"),
    ],
)
async def test_an_account_that_may_hold_more_than_a_lone_node_stops_it_as_nats_server(
    tmp_path: Path, limits: str, account: str, words: str
) -> None:
    """A nats-server without a cluster does not start when the account may hold more than the server."""
    accounts = f"accounts: {{ A: {{ users: [ {{user: a, password: a}} ], jetstream: {{ {account} }} }} }}\n"
    conf = tmp_path / "nats-server.conf"
    conf.write_text(f"listen: {HOST}:{free_port_base(1)}\njetstream {{ store_dir: '{tmp_path / 'js'}', {limits} }}\n{accounts}")
    done = await asyncio.to_thread(
        subprocess.run, [str(NATS_SERVER), "-c", str(conf)], capture_output=True, timeout=30, check=False
    )
    expected = f"Can't start JetStream: Error enabling jetstream on configured accounts: {words}"
    assert done.returncode == 1
    assert expected in done.stderr.decode()
    ours = tmp_path / "node.conf"
    ours.write_text(f"server_name: n1\njetstream {{ {limits} }}\n{accounts}")
    with pytest.raises(ConfigError) as refused:
        _node_config(ours)
    assert str(refused.value) == expected
    # a node with peers starts, as a clustered nats-server does
    _node_config(ours, "--peer", "n2=127.0.0.1:1")


async def test_an_account_that_may_store_more_than_a_lone_nodes_default_still_starts_it_as_nats_server(
    tmp_path: Path,
) -> None:
    """nats-server 2.15.1 does not hold an account's max_file to its default storage limit (it does to its
    default memory limit): it starts with an account that may store a petabyte, and so does the node."""
    accounts = "accounts: { A: { users: [ {user: a, password: a} ], jetstream: { max_file: 1000T } } }\n"
    reference = tmp_path / "reference"
    reference.mkdir()
    async with nats_server_from_config(reference, f"jetstream {{ store_dir: '{reference / 'js'}' }}\n{accounts}"):
        pass  # it is serving, its JetStream started (a JetStream that cannot start stops it before it listens)
    ours = tmp_path / "node.conf"
    ours.write_text(f"server_name: n1\njetstream: enabled\n{accounts}")
    _node_config(ours)  # no ConfigError


DUPLICATES = [
    _stream("CREATE", "D1"),  # the default two minutes, held to the server's one
    _stream("CREATE", "D2", duplicate_window=61_000_000_000),  # 10052, the limit as Go prints it
    _stream("CREATE", "D3", max_age=30_000_000_000),  # a max_age below the window is the window
    _stream("CREATE", "D4", duplicate_window=60_000_000_000),
    _stream("UPDATE", "D1", duplicate_window=120_000_000_000),  # 10052 on update too
]


async def _duplicate_windows(client_port: int, _http_port: int) -> list[Any]:
    nc = await nats.connect(f"nats://{HOST}:{client_port}")
    answers: list[Any] = []
    try:
        for subject, body in DUPLICATES:
            reply = json.loads((await nc.request(subject, json.dumps(body).encode(), timeout=10)).data)
            answers.append(reply.get("error") or reply["config"]["duplicate_window"])
    finally:
        await nc.close()
    return answers


async def test_a_streams_duplicate_window_within_the_servers_as_in_nats_server(tmp_path: Path) -> None:
    expected, got = await on_both_with_limits(tmp_path, "limits { duplicate_window: '1m' }", _duplicate_windows)
    too_large = {
        "code": 500,
        "err_code": 10052,
        "description": "duplicates window can not be larger then server limit of 1m0s",
    }
    assert expected == [60_000_000_000, too_large, 30_000_000_000, 60_000_000_000, too_large]
    assert got == expected


ACCOUNTS = """
accounts {
  A: { jetstream: enabled, users: [{user: a, password: a}] }
  B: { jetstream: enabled, users: [{user: b, password: b}] }
}
"""


async def _two_accounts(client_port: int, _http_port: int) -> list[Any]:
    """Both accounts reserve from the node's one max_file_store and max_memory_store."""
    answers: list[Any] = []
    for user, requests in (
        ("a", [_stream("CREATE", "S1", max_bytes=600), _stream("CREATE", "M1", storage="memory", max_bytes=2000)]),
        ("b", [
            _stream("CREATE", "S1", max_bytes=600),  # 1200 of 1024 with A's: 10047
            _stream("CREATE", "S2", max_bytes=400),
            _stream("CREATE", "M1", storage="memory", max_bytes=1001),  # 3001 of 3000: 10028
            _stream("UPDATE", "S2", max_bytes=425),  # grows past what A's S1 left: 10047
        ]),
    ):  # fmt: skip
        nc = await nats.connect(f"nats://{user}:{user}@{HOST}:{client_port}")
        try:
            for subject, body in requests:
                reply = await nc.request(subject, json.dumps(body).encode(), timeout=10)
                answers.append(_essence(subject, json.loads(reply.data)))
        finally:
            await nc.close()
    return answers


async def test_every_accounts_streams_reserve_from_the_nodes_limits(tmp_path: Path) -> None:
    expected, got = await on_both_with_limits(tmp_path, LIMITS, _two_accounts, rest=ACCOUNTS)
    codes = [answer.get("error", {}).get("err_code") for answer in expected]
    assert codes == [None, None, 10047, None, 10028, 10047]
    assert got == expected
