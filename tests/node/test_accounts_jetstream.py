"""JetStream in every account that enables it: accounts A and B each have a stream ORDERS on `orders.>`, a
pull consumer and a KV bucket `cfg`, and each sees only its own. The same file and the same requests on
nats-server 2.15.1, on one jetraft node and on three (R3): the same answers."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig, StreamConfig, StreamSource

from cluster.node.account_jetstream import HOME_ACCOUNT_FILE, HomeAccountChangedError, claim_home_account
from local.cluster import LocalCluster, plan_free_nodes
from local.ports import HOST, free_port_base
from tests.chaos.node_metrics import scrape
from tests.node.config_file_node import node_from_config
from tests.node.reference_server import nats_server_from_config, on_both_with_jetstream
from tests.node.test_accounts import ADR_19_ACCOUNTS, across_accounts

TWO_ACCOUNTS = """
accounts: {
    A: { users: [ {user: a, password: a} ], jetstream: enabled }
    B: { users: [ {user: b, password: b} ], jetstream: { max_streams: 5 } }
}
"""


def _account_info(info: dict[str, Any]) -> dict[str, Any]:
    return {key: info[key] for key in ("memory", "storage", "streams", "consumers")} | {
        "max_streams": info["limits"]["max_streams"]
    }


async def _two_accounts(port: int, replicas: int = 1) -> dict[str, Any]:
    """The same steps in A and B, interleaved, with each account's own payloads: what each saw."""
    seen: dict[str, Any] = {}
    clients = {user: await nats.connect(f"nats://{user}:{user}@{HOST}:{port}") for user in ("a", "b")}
    try:
        for nc in clients.values():
            js = nc.jetstream(timeout=30)
            await js.add_stream(
                StreamConfig(name="ORDERS", subjects=["orders.>"], allow_direct=True, num_replicas=replicas)
            )
        for user, nc in clients.items():
            js = nc.jetstream(timeout=30)
            count = 3 if user == "a" else 2
            acks = [await js.publish(f"orders.{n}", f"{user}-{n}".encode()) for n in range(1, count + 1)]
            seen[f"{user}.acks"] = [(ack.stream, ack.seq) for ack in acks]
        for user, nc in clients.items():
            js = nc.jetstream(timeout=30)
            info = await js.stream_info("ORDERS")
            seen[f"{user}.state"] = (info.state.messages, info.state.first_seq, info.state.last_seq)
            seen[f"{user}.names"] = json.loads(
                (await nc.request("$JS.API.STREAM.NAMES", b"", timeout=10)).data
            )["streams"]
            msg = await js.get_msg("ORDERS", seq=2)
            seen[f"{user}.msg_get"] = (msg.subject, msg.data)
            direct = await js.get_last_msg("ORDERS", "orders.1", direct=True)
            seen[f"{user}.direct_get"] = (direct.subject, direct.seq, direct.data)
            sub = await js.pull_subscribe("orders.>", durable="worker", stream="ORDERS")
            fetched = await sub.fetch(5, timeout=5)
            for received in fetched:
                await received.ack_sync()
            seen[f"{user}.fetched"] = [(received.subject, received.data) for received in fetched]
            consumer = await js.consumer_info("ORDERS", "worker")
            seen[f"{user}.consumer"] = (consumer.num_pending, consumer.num_ack_pending, consumer.delivered.stream_seq)
            pushed = await js.subscribe("orders.>", stream="ORDERS", durable="pusher", manual_ack=True)
            received_pushed = [await pushed.next_msg(timeout=10) for _ in fetched]
            for received in received_pushed:
                await received.ack()
            seen[f"{user}.pushed"] = [(received.subject, received.data) for received in received_pushed]
        for user, nc in clients.items():
            js = nc.jetstream(timeout=30)
            kv = await js.create_key_value(bucket="cfg", replicas=replicas)
            await kv.put("colour", f"{user}-blue".encode())
        for user, nc in clients.items():
            js = nc.jetstream(timeout=30)
            kv = await js.key_value("cfg")
            entry = await kv.get("colour")
            seen[f"{user}.kv"] = (entry.key, entry.value, entry.revision)
            info = json.loads((await nc.request("$JS.API.INFO", b"", timeout=10)).data)
            seen[f"{user}.account"] = _account_info(info)
            # an object store bucket of the same name in each account, holding each its own object
            store = await js.create_object_store("files")
            await store.put("doc", f"{user}-document".encode() * 100)
            seen[f"{user}.object"] = (await store.get("doc")).data
            # a mirror in the account copies the account's own ORDERS: read through a pull consumer, whose
            # fetch waits for the copies to arrive
            await js.add_stream(StreamConfig(name="COPY", mirror=StreamSource(name="ORDERS"), num_replicas=replicas))
            await js.add_consumer("COPY", ConsumerConfig(durable_name="reader", ack_policy=AckPolicy.EXPLICIT))
            reader = await js.pull_subscribe_bind("reader", stream="COPY")
            wanted = len(seen[f"{user}.fetched"])
            copied = []
            for _ in range(wanted):  # bounded: at most one fetch per message, each waiting up to 10 s
                copied += await reader.fetch(wanted - len(copied), timeout=10)
                if len(copied) == wanted:
                    break
            seen[f"{user}.mirrored"] = [(received.subject, received.data) for received in copied]
    finally:
        for nc in clients.values():
            await nc.close()
    return seen


async def _read_back(port: int) -> dict[str, Any]:
    """Each account's ORDERS, its second message, its key and its pull consumer's pending count."""
    found = {}
    for user in ("a", "b"):
        nc = await nats.connect(f"nats://{user}:{user}@{HOST}:{port}")
        try:
            js = nc.jetstream(timeout=30)
            info = await js.stream_info("ORDERS")
            msg = await js.get_msg("ORDERS", seq=2)
            entry = await (await js.key_value("cfg")).get("colour")
            consumer = await js.consumer_info("ORDERS", "worker")
            state = (info.state.messages, info.state.first_seq, info.state.last_seq)
            found[user] = (state, (msg.subject, msg.data), entry.value, consumer.num_pending)
        finally:
            await nc.close()
    return found


def _check_isolated(seen: dict[str, Any]) -> None:
    """What every server must answer, whoever it is: each account its own data and nothing of the other's."""
    assert seen["a.acks"] == [("ORDERS", 1), ("ORDERS", 2), ("ORDERS", 3)]
    assert seen["b.acks"] == [("ORDERS", 1), ("ORDERS", 2)]
    assert seen["a.state"] == (3, 1, 3)
    assert seen["b.state"] == (2, 1, 2)
    assert seen["a.msg_get"] == ("orders.2", b"a-2")
    assert seen["b.msg_get"] == ("orders.2", b"b-2")
    assert seen["b.direct_get"] == ("orders.1", 1, b"b-1")
    assert seen["a.fetched"] == [(f"orders.{n}", f"a-{n}".encode()) for n in (1, 2, 3)]
    assert seen["b.fetched"] == [(f"orders.{n}", f"b-{n}".encode()) for n in (1, 2)]
    assert seen["a.pushed"] == seen["a.fetched"] and seen["b.pushed"] == seen["b.fetched"]
    assert seen["a.mirrored"] == seen["a.fetched"] and seen["b.mirrored"] == seen["b.fetched"]
    assert seen["a.object"] == b"a-document" * 100 and seen["b.object"] == b"b-document" * 100
    assert seen["a.kv"] == ("colour", b"a-blue", 1)
    assert seen["b.kv"] == ("colour", b"b-blue", 1)
    assert seen["a.account"]["streams"] == seen["b.account"]["streams"] == 2  # ORDERS and KV_cfg
    assert seen["a.account"]["consumers"] == seen["b.account"]["consumers"] == 2  # worker and pusher
    assert seen["b.account"]["max_streams"] == 5
    assert seen["a.account"]["max_streams"] == -1


async def test_two_jetstream_accounts_answer_as_nats_server(tmp_path: Path) -> None:
    expected, got = await on_both_with_jetstream(tmp_path, TWO_ACCOUNTS, _two_accounts)
    _check_isolated(expected)
    assert got == expected


async def test_two_jetstream_accounts_on_three_nodes(tmp_path: Path) -> None:
    conf = tmp_path / "accounts.conf"
    conf.write_text(TWO_ACCOUNTS)
    specs = plan_free_nodes(3, 0)
    cluster = LocalCluster(specs, tmp_path / "data", extra_args=["--config", str(conf)])
    cluster.start(timeout=60)
    try:
        seen = await _two_accounts(specs[1].client_port, replicas=3)
        _check_isolated(seen)
        # each account's ORDERS is its own series in /metrics: B's named after its account's tag
        samples = await asyncio.to_thread(scrape, specs[0].http_url)
        last_seqs = {
            labels["stream"]: value for name, labels, value in samples if name == "jetraft_stream_last_seq"
        }
        assert (last_seqs["ORDERS"], last_seqs["B/ORDERS"]) == (3, 2)
        # every node down, then up again: each account's streams, consumers and keys come back from disk
        for spec in specs:
            cluster.stop_node(spec.name)
        for spec in specs:
            cluster.start_node(spec.name)
        cluster.wait_ready(timeout=60)
        assert await _read_back(specs[2].client_port) == {
            user: (seen[f"{user}.state"], seen[f"{user}.msg_get"], seen[f"{user}.kv"][1], 0) for user in ("a", "b")
        }
    finally:
        cluster.stop()


async def _through_the_domain(port: int) -> dict[str, Any]:
    """`$JS.hub.API` in each account reaches that account's JetStream."""
    answers: dict[str, Any] = {}
    for user in ("a", "b"):
        nc = await nats.connect(f"nats://{user}:{user}@{HOST}:{port}")
        try:
            js = nc.jetstream(domain="hub", timeout=30)
            await js.add_stream(StreamConfig(name=f"ONLY_{user.upper()}", subjects=[f"{user}.>"]))
            names = json.loads((await nc.request("$JS.hub.API.STREAM.NAMES", b"", timeout=10)).data)
            info = json.loads((await nc.request("$JS.hub.API.INFO", b"", timeout=10)).data)
            answers[user] = (names["streams"], info["streams"], info["domain"])
        finally:
            await nc.close()
    return answers


async def test_each_account_answers_under_the_domain_as_nats_server(tmp_path: Path) -> None:
    (tmp_path / "ref").mkdir()
    (tmp_path / "jetraft").mkdir()
    domain = "jetstream { store_dir: '%s', domain: hub }\n"
    async with nats_server_from_config(tmp_path / "ref", domain % (tmp_path / "ref" / "js") + TWO_ACCOUNTS) as port:
        expected = await _through_the_domain(port)
    async with node_from_config(tmp_path / "jetraft", domain % (tmp_path / "jetraft" / "js") + TWO_ACCOUNTS) as node:
        got = await _through_the_domain(node.client_port)
    assert expected == {"a": (["ONLY_A"], 1, "hub"), "b": (["ONLY_B"], 1, "hub")}
    assert got == expected


def test_a_node_refuses_to_give_one_accounts_untagged_data_to_another(tmp_path: Path) -> None:
    data = tmp_path / "n1"
    claim_home_account(data, "B")  # a fresh directory: B's
    claim_home_account(data, "B")  # and again, as every start
    # a config that adds account A with JetStream makes A home: it would take over B's streams
    with pytest.raises(HomeAccountChangedError, match=r"account 'B'.*makes 'A' the home account"):
        claim_home_account(data, "A")
    assert (data / HOME_ACCOUNT_FILE).read_text() == "B\n"


LIMITS_IN_B = """
accounts: {
    A: { users: [ {user: a, password: a} ], jetstream: enabled }
    B: { users: [ {user: b, password: b} ], jetstream: { max_streams: 2, max_file: 300 } }
}
"""


async def _each_accounts_limits(port: int) -> dict[str, list[Any]]:
    """The same creates and publishes in A (no limits) and B (two streams, 300 bytes of file storage)."""
    answers: dict[str, list[Any]] = {}
    for user in ("b", "a"):
        nc = await nats.connect(f"nats://{user}:{user}@{HOST}:{port}")
        try:
            seen: list[Any] = []
            for name in ("S", "T", "U"):
                body = json.dumps({"name": name, "subjects": [name.lower()]}).encode()
                reply = await nc.request(f"$JS.API.STREAM.CREATE.{name}", body, timeout=10)
                seen.append(json.loads(reply.data).get("error"))
            for _ in range(5):  # 71 bytes each (`s` and 40 bytes): the fifth is past B's 300
                reply = await nc.request("s", b"x" * 40, timeout=10)
                seen.append(json.loads(reply.data))
            info = json.loads((await nc.request("$JS.API.INFO", b"", timeout=10)).data)
            seen.append({key: info[key] for key in ("storage", "streams", "limits")})
            answers[user] = seen
        finally:
            await nc.close()
    return answers


async def test_each_accounts_limits_apply_to_its_own_streams_as_on_nats_server(tmp_path: Path) -> None:
    expected, got = await on_both_with_jetstream(tmp_path, LIMITS_IN_B, _each_accounts_limits)
    assert expected["b"][2]["err_code"] == 10027  # B's third stream
    assert expected["b"][7]["error"]["err_code"] == 10002  # B's fifth message
    assert expected["a"][2] is None and expected["a"][7] == {"stream": "S", "seq": 5}
    assert expected["b"][-1]["streams"] == 2 and expected["a"][-1]["streams"] == 3
    assert got == expected


HOME_IMPORTS_B = """
accounts: {
    A: {
        users: [ {user: a, password: a} ]
        jetstream: enabled
        imports: [ {service: {account: B, subject: '$JS.API.>'}, to: 'fromB.>'} ]
    }
    B: { users: [ {user: b, password: b} ], jetstream: enabled, exports: [ {service: '$JS.API.>'} ] }
}
"""


async def _through_an_import(port: int) -> list[Any]:
    """A client of A (the home account) manages B's JetStream through A's import of B's API."""
    nc = await nats.connect(f"nats://a:a@{HOST}:{port}")
    try:
        answers: list[Any] = []
        body = json.dumps({"name": "IN_B", "subjects": ["in_b.>"]}).encode()
        created = json.loads((await nc.request("fromB.STREAM.CREATE.IN_B", body, timeout=10)).data)
        answers.append((created["type"], created["config"]["name"]))
        for subject in ("fromB.STREAM.NAMES", "$JS.API.STREAM.NAMES"):  # B's streams, then A's own
            answers.append(json.loads((await nc.request(subject, b"", timeout=10)).data)["streams"])
        info = json.loads((await nc.request("fromB.INFO", b"", timeout=10)).data)
        answers.append((info["streams"], info["consumers"]))
        return answers
    finally:
        await nc.close()


async def test_the_home_account_reaches_another_accounts_jetstream_through_an_import(tmp_path: Path) -> None:
    expected, got = await on_both_with_jetstream(tmp_path, HOME_IMPORTS_B, _through_an_import)
    assert expected == [("io.nats.jetstream.api.v1.stream_create_response", "IN_B"), ["IN_B"], None, (1, 0)]
    assert got == expected


async def _jsz_of_two_accounts(client_port: int, http_port: int) -> dict[str, Any]:
    """/jsz?accounts=1&streams=1 after A creates ORDERS and B creates ORDERS and X, one message each."""
    for user in ("a", "b"):
        nc = await nats.connect(f"nats://{user}:{user}@{HOST}:{client_port}")
        try:
            js = nc.jetstream(timeout=30)
            for name in ("ORDERS", "X") if user == "b" else ("ORDERS",):
                await js.add_stream(StreamConfig(name=name, subjects=[f"{name.lower()}.>"]))
            await js.publish("orders.1", user.encode() * 10)
        finally:
            await nc.close()
    url = f"http://{HOST}:{http_port}/jsz?accounts=1&streams=1"
    jsz = json.loads(await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=10).read()))
    keys = ("memory", "storage", "accounts", "streams", "consumers", "messages", "bytes", "total")
    return {
        **{key: jsz[key] for key in keys},
        "api_total": jsz["api"]["total"],
        "account_details": [
            {
                **{key: account[key] for key in ("name", "storage", "reserved_memory", "reserved_storage")},
                "api_total": account["api"]["total"],
                "streams": sorted(stream["name"] for stream in account["stream_detail"]),
            }
            for account in jsz["account_details"]
        ],
    }


async def test_jsz_shows_every_jetstream_account_as_nats_server(tmp_path: Path) -> None:
    (tmp_path / "ref").mkdir()
    (tmp_path / "jetraft").mkdir()
    http_port = free_port_base(1)
    reference = f"http: {HOST}:{http_port}\njetstream {{ store_dir: '{tmp_path / 'ref' / 'js'}' }}\n"
    async with nats_server_from_config(tmp_path / "ref", reference + TWO_ACCOUNTS) as port:
        expected = await _jsz_of_two_accounts(port, http_port)
    async with node_from_config(tmp_path / "jetraft", "jetstream: enabled\n" + TWO_ACCOUNTS) as node:
        got = await _jsz_of_two_accounts(node.client_port, node.http_port)
    assert [account["streams"] for account in expected["account_details"]] == [["ORDERS"], ["ORDERS", "X"]]
    assert (expected["accounts"], expected["streams"], expected["total"]) == (2, 3, 2)
    assert got == expected


ONE_ACCOUNT = "accounts: { A: { users: [ {user: a, password: a} ], jetstream: enabled } }\n"
A_SORTS_FIRST_AND_B = TWO_ACCOUNTS
ZERO_SORTS_BEFORE_A = """
accounts: {
    A: { users: [ {user: a, password: a} ], jetstream: enabled }
    0: { users: [ {user: z, password: z} ], jetstream: enabled }
}
"""


async def _stream_names(port: int, user: str) -> list[str] | None:
    nc = await nats.connect(f"nats://{user}:{user}@{HOST}:{port}")
    try:
        return json.loads((await nc.request("$JS.API.STREAM.NAMES", b"", timeout=10)).data)["streams"]
    finally:
        await nc.close()


async def test_one_accounts_data_opens_when_a_second_jetstream_account_is_added(tmp_path: Path) -> None:
    async with node_from_config(tmp_path, "jetstream: enabled\n" + ONE_ACCOUNT) as node:
        nc = await nats.connect(f"nats://a:a@{HOST}:{node.client_port}")
        try:
            js = nc.jetstream(timeout=30)
            await js.add_stream(StreamConfig(name="ORDERS", subjects=["orders.>"]))
            await js.publish("orders.1", b"kept")
        finally:
            await nc.close()
    # the same data directory, now with B's JetStream beside A's: A is still home and keeps its stream
    async with node_from_config(tmp_path, "jetstream: enabled\n" + A_SORTS_FIRST_AND_B) as node:
        assert await _stream_names(node.client_port, "b") is None
        nc = await nats.connect(f"nats://a:a@{HOST}:{node.client_port}")
        try:
            msg = await nc.jetstream(timeout=30).get_msg("ORDERS", seq=1)
            assert (msg.subject, msg.data) == ("orders.1", b"kept")
        finally:
            await nc.close()
    # an account sorting before A would become home and take A's streams: the node refuses to start
    with pytest.raises(AssertionError, match="holds the JetStream data of account 'A'"):
        async with node_from_config(tmp_path, "jetstream: enabled\n" + ZERO_SORTS_BEFORE_A):
            pass


async def test_two_jetstream_accounts_on_a_node_of_two_workers(tmp_path: Path) -> None:
    conf = tmp_path / "accounts.conf"
    conf.write_text(TWO_ACCOUNTS)
    specs = plan_free_nodes(1, 0, workers=2)
    cluster = LocalCluster(specs, tmp_path / "data", extra_args=["--config", str(conf)])
    cluster.start(timeout=90)
    try:
        _check_isolated(await _two_accounts(specs[0].client_port, replicas=1))
    finally:
        cluster.stop()


NO_JETSTREAM_ACCOUNT = """
authorization { users: [ {user: g, password: g} ] }
accounts: { A: { users: [ {user: a, password: a} ] } }
"""


async def _api_info_answers(port: int) -> list[Any]:
    answers = []
    for user in ("g", "a"):
        nc = await nats.connect(f"nats://{user}:{user}@{HOST}:{port}")
        try:
            answers.append(json.loads((await nc.request("$JS.API.INFO", b"", timeout=10)).data))
        finally:
            await nc.close()
    return answers


async def test_accounts_without_jetstream_leave_the_global_account_without_it_too(tmp_path: Path) -> None:
    expected, got = await on_both_with_jetstream(tmp_path, NO_JETSTREAM_ACCOUNT, _api_info_answers)
    assert [answer["error"]["err_code"] for answer in expected] == [10039, 10039]
    assert got == expected


# ADR-19's configuration with a JetStream account `0` beside it, which sorts first and so is home: A's
# JetStream, which account I imports, is then one of the other accounts'.
ADR_19_WITH_A_NOT_HOME = ADR_19_ACCOUNTS.replace(
    "accounts: {\n", "accounts: {\n    0: { users: [ {user: z, password: z} ], jetstream: enabled }\n", 1
)


async def test_adr_19_across_accounts_when_the_exporting_account_is_not_home(tmp_path: Path) -> None:
    assert "0: {" in ADR_19_WITH_A_NOT_HOME
    body = ADR_19_WITH_A_NOT_HOME.replace("jetstream: enabled\n", "", 1)  # on_both_with_jetstream turns it on
    expected, got = await on_both_with_jetstream(tmp_path, body, across_accounts)
    assert expected[:3] == [10039, "ORDERS", "ORDERS"] and expected[-2:] == [b"hello world", b"hello world"]
    assert got == expected
