"""An account's JetStream limits from the config file: the same file given to nats-server 2.15.1 and to a
jetraft node, the same requests, the same answers (errors whole, successes by the fields the limits set).

A single nats-server checks a create against the account's limits before the stream config's own checks;
a clustered one, whose meta leader decides as jetraft's does, checks the config first. The scenario keeps
to requests both orders answer alike."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path
from typing import Any

import nats

from local.ports import HOST, free_port_base
from tests.node.config_file_node import node_from_config
from tests.node.reference_server import nats_server_from_config, on_both_with_jetstream

LIMITS_CONF = """
accounts: {
    A: {
        users: [ {user: a, password: a} ]
        jetstream: {
            max_mem: 3000, max_file: 10000, max_streams: 4, max_consumers: 3, max_ack_pending: 100,
            memory_max_stream_bytes: 2048, store_max_stream_bytes: 6000, max_bytes_required: true
        }
    }
}
"""


def _stream(name: str, **config: Any) -> tuple[str, dict[str, Any]]:
    return f"$JS.API.STREAM.CREATE.{name}", {"name": name, "subjects": [f"{name.lower()}.>"], **config}


def _update(name: str, **config: Any) -> tuple[str, dict[str, Any]]:
    return f"$JS.API.STREAM.UPDATE.{name}", {"name": name, "subjects": [f"{name.lower()}.>"], **config}


def _consumer(stream: str, name: str, **config: Any) -> tuple[str, dict[str, Any]]:
    body = {"stream_name": stream, "config": {"durable_name": name, "ack_policy": "explicit", **config}}
    return f"$JS.API.CONSUMER.CREATE.{stream}.{name}", body


SCENARIO = [
    _stream("S0"),  # max_bytes required: 10113
    _stream("S1", max_bytes=6001),  # over store_max_stream_bytes: 10122
    _stream("M0", max_bytes=2049, storage="memory"),  # over memory_max_stream_bytes: 10122
    _stream("S1", max_bytes=4096, max_consumers=4),  # a stream may not allow more consumers than the account
    _stream("S1", max_bytes=4096),
    _stream("S1", max_bytes=4096),  # the same again: no second stream
    _stream("M1", max_bytes=2048, storage="memory"),
    _stream("M2", max_bytes=2048, storage="memory"),  # 4096 reserved of max_mem 3000: 10028
    _stream("S2", max_bytes=4096),
    _stream("S3", max_bytes=4096),  # 12288 reserved of max_file 10000: 10047
    _stream("S3", max_bytes=100),
    _stream("S4", max_bytes=10),  # a fifth stream: 10027
    _update("S1", max_bytes=6001),  # 10122 on update too
    _update("S2", max_bytes=6000),  # 4096 + 100 + 6000 reserved: 10047
    _update("S2", max_bytes=5000),
    _update("S1", max_bytes=4096, max_consumers=4),  # 10026 on update too
    _consumer("S1", "C1"),  # max_ack_pending defaults to the account's 100
    _consumer("S1", "C2", max_ack_pending=101),  # 10121
    _consumer("S1", "C2", max_ack_pending=50),
    _consumer("S1", "C3"),
    _consumer("S1", "C4"),  # a fourth consumer on the stream: 10026
    _consumer("S1", "C3", max_ack_pending=60),  # an update of one that exists is not counted
    _consumer("S2", "C1"),  # the account's max_consumers caps each stream, as nats-server
    ("$JS.API.INFO", {}),
]


def _essence(subject: str, reply: dict[str, Any]) -> dict[str, Any]:
    """What the limits decide: an error whole, else the fields they touch."""
    if "error" in reply:
        return {"type": reply["type"], "error": reply["error"]}
    if subject == "$JS.API.INFO":
        keep = ("memory", "storage", "reserved_memory", "reserved_storage", "streams", "consumers", "limits")
        api = {"total": reply["api"]["total"], "errors": reply["api"]["errors"]}
        return {**{key: reply[key] for key in keep}, "api": api}
    config = reply["config"]
    keys = ("max_bytes", "max_consumers", "storage") if "STREAM" in subject else ("max_ack_pending",)
    return {"type": reply["type"], **{key: config.get(key) for key in keys}}


async def _answers(port: int) -> list[dict[str, Any]]:
    nc = await nats.connect(f"nats://a:a@{HOST}:{port}")
    answers = []
    try:
        for subject, body in SCENARIO:
            reply = await nc.request(subject, json.dumps(body).encode() if body else b"", timeout=10)
            answers.append(_essence(subject, json.loads(reply.data)))
    finally:
        await nc.close()
    return answers


async def test_account_limits_answer_as_nats_server(tmp_path: Path) -> None:
    expected, got = await on_both_with_jetstream(tmp_path, LIMITS_CONF, _answers)
    codes = [answer.get("error", {}).get("err_code") for answer in expected]
    assert codes == [10113, 10122, 10122, 10026, None, None, None, 10028, None, 10047, None, 10027,
                     10122, 10047, None, 10026, None, 10121, None, None, 10026, None, None, None]  # fmt: skip
    assert expected[-1]["limits"]["max_streams"] == 4
    assert expected[-1]["api"] == {"total": 23, "errors": 12}  # every answer before INFO's own
    for (subject, _), want, have in zip(SCENARIO, expected, got, strict=True):
        assert (subject, have) == (subject, want)


PUBLISH_CONF = """
accounts: { A: { users: [ {user: a, password: a} ], jetstream: { max_file: 300 } } }
"""


async def _publish_answers(port: int) -> list[Any]:
    """Two file streams share max_file 300: 71 bytes a message (`s` and 40 bytes), so the fifth is refused, and
    then every publish to the other stream too."""
    nc = await nats.connect(f"nats://a:a@{HOST}:{port}")
    answers: list[Any] = []
    try:
        for name in ("S", "T"):
            body = {"name": name, "subjects": [name.lower()]}
            reply = await nc.request(f"$JS.API.STREAM.CREATE.{name}", json.dumps(body).encode(), timeout=10)
            answers.append(json.loads(reply.data).get("error"))
        for subject in ["s"] * 5 + ["t"] * 2:
            reply = await nc.request(subject, b"x" * 40, timeout=10)
            answers.append(json.loads(reply.data))
        # a message of an atomic batch is checked as it comes, before it is staged
        body = {"name": "B", "subjects": ["b"], "allow_atomic": True}
        reply = await nc.request("$JS.API.STREAM.CREATE.B", json.dumps(body).encode(), timeout=10)
        answers.append(json.loads(reply.data).get("error"))
        batch = {"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "1"}
        reply = await nc.request("b", b"x", timeout=10, headers=batch)
        answers.append(json.loads(reply.data))
        info = json.loads((await nc.request("$JS.API.INFO", b"", timeout=10)).data)
        answers.append({key: info[key] for key in ("storage", "reserved_storage", "limits")})
        answers.append({"total": info["api"]["total"], "errors": info["api"]["errors"]})
    finally:
        await nc.close()
    return answers


async def test_a_publish_past_the_accounts_storage_is_refused_as_by_nats_server(tmp_path: Path) -> None:
    expected, got = await on_both_with_jetstream(tmp_path, PUBLISH_CONF, _publish_answers)
    assert [answer.get("error", {}).get("err_code") for answer in expected[6:9]] == [10002, 10002, 10002]
    assert expected[9] is None and expected[10]["error"]["err_code"] == 10002
    assert expected[-2]["storage"] == 284
    assert expected[-1] == {"total": 3, "errors": 0}
    assert got == expected


JSZ_CONF = """
accounts: { A: { users: [ {user: a, password: a} ], jetstream: { max_file: 30000, max_streams: 5 } } }
"""
JSZ_KEYS = ("memory", "storage", "reserved_memory", "reserved_storage", "accounts", "streams", "messages", "bytes")


async def _jsz(client_port: int, http_port: int) -> dict[str, Any]:
    nc = await nats.connect(f"nats://a:a@{HOST}:{client_port}")
    try:
        body = {"name": "S", "subjects": ["s"], "max_bytes": 1000}
        await nc.request("$JS.API.STREAM.CREATE.S", json.dumps(body).encode(), timeout=10)
        await nc.request("s", b"x", timeout=10)
    finally:
        await nc.close()
    jsz = json.loads(await asyncio.to_thread(_get, f"http://{HOST}:{http_port}/jsz?accounts=1"))
    return {**{key: jsz[key] for key in JSZ_KEYS}, "account_details": jsz["account_details"]}


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:
        body: bytes = response.read()
        return body


async def test_jsz_shows_the_accounts_limits_and_reservations_as_nats_server(tmp_path: Path) -> None:
    reference, ours = tmp_path / "ref", tmp_path / "jetraft"
    reference.mkdir()
    ours.mkdir()
    http_port = free_port_base(1)
    store = f"jetstream {{ store_dir: '{reference / 'js'}' }}\n"
    async with nats_server_from_config(reference, f"http: {HOST}:{http_port}\n{store}{JSZ_CONF}") as port:
        expected = await _jsz(port, http_port)
    assert expected["reserved_storage"] == 1000  # what the streams set aside
    assert expected["account_details"][0]["reserved_storage"] == 30000  # what the account may hold
    assert expected["account_details"][0]["reserved_memory"] == 2**64 - 1  # no limit
    async with node_from_config(ours, "jetstream: enabled\n" + JSZ_CONF) as node:
        assert await _jsz(node.client_port, node.http_port) == expected


SOURCE_CONF = """
accounts: { A: { users: [ {user: a, password: a} ], jetstream: { max_file: 400 } } }
"""


async def _sourced_messages(port: int) -> list[int]:
    """A stream sourcing three messages (213 bytes) into an account of 400 bytes: the first copy fits, the
    second does not, and the source stays there. What the sourcing stream holds once it has its first copy,
    then over the next second (how long a copy that should not be made has to show up)."""
    nc = await nats.connect(f"nats://a:a@{HOST}:{port}")
    try:
        await nc.request("$JS.API.STREAM.CREATE.S", json.dumps({"name": "S", "subjects": ["s"]}).encode(), timeout=10)
        for _ in range(3):
            await nc.request("s", b"x" * 40, timeout=10)
        body = {"name": "X", "sources": [{"name": "S"}]}
        await nc.request("$JS.API.STREAM.CREATE.X", json.dumps(body).encode(), timeout=10)

        async def held() -> int:
            info = json.loads((await nc.request("$JS.API.STREAM.INFO.X", b"", timeout=10)).data)
            count: int = info["state"]["messages"]
            return count

        async with asyncio.timeout(20):
            while (first := await held()) == 0:
                await asyncio.sleep(0.05)
        later = []
        for _ in range(4):
            await asyncio.sleep(0.25)
            later.append(await held())
        return [first, *later]
    finally:
        await nc.close()


async def test_a_source_stops_copying_at_the_accounts_storage_as_in_nats_server(tmp_path: Path) -> None:
    expected, got = await on_both_with_jetstream(tmp_path, SOURCE_CONF, _sourced_messages)
    assert expected == [1, 1, 1, 1, 1]
    assert got == expected
