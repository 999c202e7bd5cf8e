"""Accounts from ADR-19's testing configuration (../shared/spec/adr-19-api-prefixes.txt), taken verbatim:
account I reaches JetStream, KV and pull consumers in account A through the import prefix `fromA`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import nats
import pytest
from nats.js.api import StreamConfig

from local.ports import HOST
from tests.node.config_file_node import node_from_config
from tests.node.raw_client import RawClient
from tests.node.reference_server import nats_server_from_config

# As in ADR-19's "Testing" section.
ADR_19_ACCOUNTS = """
jetstream: enabled
accounts: {
    A: {
        users: [ {user: a, password: a} ]
        jetstream: enabled
        exports: [
            {service: '$JS.API.>' }
            {service: '$KV.>'}
            {stream: 'forI.>' }
        ]
    },
    I: {
        users: [ {user: i, password: i} ]
        imports: [
            {service: {account: A, subject: '$JS.API.>'}, to: 'fromA.>' }
            {service: {account: A, subject: '$KV.>'}, to: 'fromA.$KV.>' }
            {stream: { subject: 'forI.>', account: 'A' } }
        ]
    }
}
"""


@pytest.fixture
async def node(tmp_path: Path):  # type: ignore[no-untyped-def]
    # jetraft's test node: ports, store and then ADR-19's lines as they are
    async with node_from_config(tmp_path, ADR_19_ACCOUNTS) as started:
        yield started


async def test_accounts_are_isolated_subject_spaces(node) -> None:  # type: ignore[no-untyped-def]
    a = await RawClient.connect(HOST, node.client_port, user="a", **{"pass": "a"})
    i = await RawClient.connect(HOST, node.client_port, user="i", **{"pass": "i"})
    try:
        assert await a.exchange("SUB > 1\r\nSUB shared 2\r\n") == []
        assert await i.exchange("SUB shared 3\r\nPUB shared 4\r\nfrom\r\n") == ["MSG shared 3 4", "from"]
        # A's wildcard saw nothing of I's message; A's own publish reaches only A.
        assert sorted(await a.exchange("PUB shared 1\r\na\r\n")) == ["MSG shared 1 1", "MSG shared 2 1", "a", "a"]
        assert await i.exchange() == []
        # A stream export: A's messages on forI.> reach I's subscribers.
        assert await i.exchange("SUB forI.> 5\r\n") == []
        await a.exchange("PUB forI.x 2\r\nhi\r\n")
        assert await i.exchange() == ["MSG forI.x 5 2", "hi"]
    finally:
        await a.close()
        await i.close()


async def across_accounts(port: int) -> list[object]:
    """What account I sees of A's JetStream through the import prefix, as a list to compare."""
    seen: list[object] = []
    i = await nats.connect(f"nats://i:i@{HOST}:{port}", inbox_prefix=b"forI")
    a = await nats.connect(f"nats://a:a@{HOST}:{port}")
    try:
        # I has no JetStream of its own.
        seen.append(json.loads((await i.request("$JS.API.INFO", b"", timeout=5)).data)["error"]["err_code"])
        js = i.jetstream(prefix="fromA")
        info = await js.add_stream(StreamConfig(name="ORDERS", subjects=["orders.>"]))
        seen.append(info.config.name)
        # The stream is A's: A sees it on its own API, and A's publishes land in it.
        seen.append((await a.jetstream().stream_info("ORDERS")).config.name)
        await a.jetstream().publish("orders.1", b"one")
        await a.jetstream().publish("orders.2", b"two")
        sub = await js.pull_subscribe("orders.>", durable="worker", stream="ORDERS")
        for _ in range(2):
            (msg,) = await sub.fetch(1, timeout=10)
            seen.append((msg.subject, msg.data, msg.reply.split(".")[:4] if msg.reply else None))
            await msg.ack()
        await i.flush()
        # The acks reach A only where A exports $JS.ACK.> and I imports it (ACKS_IMPORTED).
        consumer = await a.jetstream().consumer_info("ORDERS", "worker")
        seen.append(("ack floor", consumer.ack_floor.stream_seq, "pending", consumer.num_ack_pending))

        # KV: the bucket through the API import, its writes through the $KV import (nats-py's KV
        # writes on $KV.<bucket> whatever the API prefix, so I writes on the import's subject itself).
        await js.create_key_value(bucket="map")
        ack = await js.publish("fromA.$KV.map.greeting", b"hello world")
        seen.append((ack.stream, ack.seq))
        kv = await js.key_value("map")
        seen.append((await kv.get("greeting")).value)
        seen.append((await (await a.jetstream().key_value("map")).get("greeting")).value)
    finally:
        await i.close()
        await a.close()
    return seen


async def test_jetstream_kv_and_pull_consumers_across_accounts_as_in_nats_server(tmp_path: Path) -> None:
    reference = tmp_path / "ref"
    reference.mkdir()
    ours = tmp_path / "jetraft"
    ours.mkdir()
    config = ADR_19_ACCOUNTS.replace("jetstream: enabled\n", f"jetstream {{ store_dir: '{reference / 'js'}' }}\n", 1)
    async with nats_server_from_config(reference, config) as port:
        expected = await across_accounts(port)
    assert expected == [
        10039,
        "ORDERS",
        "ORDERS",
        ("orders.1", b"one", ["$JS", "ACK", "ORDERS", "worker"]),
        ("orders.2", b"two", ["$JS", "ACK", "ORDERS", "worker"]),
        ("ack floor", 0, "pending", 2),
        ("KV_map", 1),
        b"hello world",
        b"hello world",
    ]
    async with node_from_config(ours, ADR_19_ACCOUNTS) as node:
        assert await across_accounts(node.client_port) == expected


async def test_kv_publishes_through_the_kv_import(node) -> None:  # type: ignore[no-untyped-def]
    # ADR-19's own check: a subscriber in A on $KV.map.> gets what I publishes on fromA.$KV.map.put.
    a = await nats.connect(f"nats://a:a@{HOST}:{node.client_port}")
    i = await nats.connect(f"nats://i:i@{HOST}:{node.client_port}")
    try:
        received: asyncio.Queue[nats.aio.msg.Msg] = asyncio.Queue()
        await a.subscribe("$KV.map.>", cb=received.put)
        await a.flush()
        await i.publish("fromA.$KV.map.put", b"hello world")
        msg = await asyncio.wait_for(received.get(), 10)
        assert (msg.subject, msg.data) == ("$KV.map.put", b"hello world")
    finally:
        await a.close()
        await i.close()


OWN_API = [
    "$JS.API.INFO", "$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST", "$JS.API.STREAM.CREATE.X",
    "$JS.API.STREAM.INFO.X", "$JS.API.STREAM.UPDATE.X", "$JS.API.STREAM.DELETE.X", "$JS.API.STREAM.PURGE.X",
    "$JS.API.STREAM.MSG.GET.X", "$JS.API.STREAM.MSG.DELETE.X", "$JS.API.CONSUMER.CREATE.X",
    "$JS.API.CONSUMER.CREATE.X.C", "$JS.API.CONSUMER.DURABLE.CREATE.X.C", "$JS.API.CONSUMER.NAMES.X",
    "$JS.API.CONSUMER.LIST.X", "$JS.API.CONSUMER.INFO.X.C", "$JS.API.CONSUMER.DELETE.X.C",
    "$JS.API.CONSUMER.PAUSE.X.C", "$JS.API.CONSUMER.MSG.NEXT.X.C", "$JS.API.DIRECT.GET.X", "$JS.API.NOPE",
]  # fmt: skip


async def own_api_answers(port: int) -> dict[str, object]:
    i = await nats.connect(f"nats://i:i@{HOST}:{port}")
    answers: dict[str, object] = {}
    try:
        for subject in OWN_API:
            try:
                reply = await i.request(subject, b"", timeout=1)
            except (nats.errors.NoRespondersError, nats.errors.TimeoutError) as exc:
                answers[subject] = type(exc).__name__
            else:
                answers[subject] = json.loads(reply.data)
    finally:
        await i.close()
    return answers


async def test_an_account_without_jetstream_gets_nats_servers_answers(tmp_path: Path) -> None:
    reference = tmp_path / "ref"
    reference.mkdir()
    ours = tmp_path / "jetraft"
    ours.mkdir()
    config = ADR_19_ACCOUNTS.replace("jetstream: enabled\n", f"jetstream {{ store_dir: '{reference / 'js'}' }}\n", 1)
    async with nats_server_from_config(reference, config) as port:
        expected = await own_api_answers(port)
    assert expected["$JS.API.CONSUMER.MSG.NEXT.X.C"] == "NoRespondersError"
    assert expected["$JS.API.INFO"]["error"]["err_code"] == 10039  # type: ignore[index]
    async with node_from_config(ours, ADR_19_ACCOUNTS) as node:
        assert await own_api_answers(node.client_port) == expected
