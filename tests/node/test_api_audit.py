"""The API audit advisory ($JS.EVENT.ADVISORY.API), side by side with a 3-node nats-server 2.15.1: the same
requests from one client give the same audits, field by field, less what differs by nature (ids, times,
the client's rtt and start, ports, server names, the cluster's name, the responses' own volatile fields)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import nats
import nats.js.errors
import pytest

from local.cluster import LocalCluster, node_available
from local.ports import HOST
from tests.node.cluster_fixtures import connect_to_member, local_cluster, publish_when_served
from tests.node.config_file_node import node_from_config
from tests.node.reference_server import nats_server_from_config
from tests.pipeline.servers import NATS_SERVER, NatsServerProcesses

pytestmark = pytest.mark.skipif(
    not (node_available() and NATS_SERVER.exists()), reason="needs `jetraft node` and nats-server"
)

AUDIT = "$JS.EVENT.ADVISORY.API"
# a client claiming to be another: the server that takes its request names the real one
FORGED = {"Nats-Request-Info": '{"acc":"evil","name":"forged","server":"elsewhere","kind":"JetStream"}'}
# (subject, body): a create, infos (one with a forged client), a bad request answered with an error, a
# consumer create, reads with a body, a message found (no audit) and one not found (an audit), deletes
REQUESTS: list[tuple[str, bytes] | tuple[str, bytes, dict[str, str]]] = [
    ("$JS.API.STREAM.CREATE.AUD", b'{"name":"AUD","subjects":["aud.>"],"num_replicas":3}'),
    ("$JS.API.STREAM.INFO.AUD", b""),
    ("$JS.API.STREAM.INFO.AUD", b'{"subjects_filter":">"}'),
    ("$JS.API.STREAM.INFO.AUD", b"", FORGED),
    ("$JS.API.STREAM.CREATE.BAD", b'{"name":"X"}'),
    ("$JS.API.STREAM.INFO.NOPE", b""),
    ("$JS.API.STREAM.NAMES", b'{"offset":0}'),
    ("$JS.API.STREAM.MSG.GET.AUD", b'{"seq":1}'),
    ("$JS.API.STREAM.MSG.GET.AUD", b'{"seq":9}'),
    ("$JS.API.CONSUMER.CREATE.AUD.C1", b'{"stream_name":"AUD","config":{"durable_name":"C1","ack_policy":"explicit"}}'),
    ("$JS.API.CONSUMER.CREATE.AUD.C2", b'{"stream_name":"AUD","config":{"durable_name":"C3"}}'),
    ("$JS.API.CONSUMER.INFO.AUD.C1", b""),
    ("$JS.API.CONSUMER.DELETE.AUD.C1", b""),
    ("$JS.API.STREAM.PURGE.AUD", b'{"filter":"aud.a"}'),
    ("$JS.API.STREAM.DELETE.AUD", b""),
    ("$JS.API.STREAM.DELETE.NOPE", b""),
]
_VOLATILE_CLIENT = {"start", "rtt", "server", "cluster", "id"}
# what a response holds that differs between any two runs or servers
_VOLATILE_RESPONSE = {"created", "ts", "cluster", "leader_since", "metadata", "first_ts", "last_ts", "time"}


@pytest.fixture(scope="module")
def jetraft(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("audit"), nodes=3) as running:
        yield running


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    with NatsServerProcesses(3, Path(tmp_path_factory.mktemp("audit-nats-server"))) as servers:
        yield servers.target().urls


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in _VOLATILE_RESPONSE}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _comparable(audit: dict[str, Any], servers: set[str]) -> dict[str, Any]:
    assert audit["server"] in servers, audit
    assert audit["client"]["server"] in servers, audit
    assert audit["id"] and audit["timestamp"] and audit["client"]["start"], audit
    response = json.loads(audit["response"])
    # the config's defaults and state are compared elsewhere (tests/api): here, which response it is
    kept = {k: v for k, v in response.items() if k in ("type", "error", "success", "did_create", "purged")}
    return {
        "type": audit["type"],
        "client": {k: v for k, v in audit["client"].items() if k not in _VOLATILE_CLIENT},
        "subject": audit["subject"],
        "request": audit.get("request"),
        "response": _strip(kept),
        "keys": sorted(audit),
        "client_keys": sorted(audit["client"]),
    }


async def _interest_reached_every_server(
    servers: list[Callable[[], Awaitable[nats.NATS]]], probes: asyncio.Queue[str]
) -> None:
    """The listener's interest travels to the other servers after its SUB (nats-server's routes, jetraft's
    mesh alike), and a server publishes an audit only where it knows of interest: a probe published on
    each server (each worker of a several-worker node: `servers` connects to each) until the listener
    gets it (bounded)."""
    for index, connect in enumerate(servers):
        nc = await connect()
        where = f"server {index} ({nc._server_info.get('server_name')})"
        try:
            for _ in range(100):
                await nc.publish(AUDIT, json.dumps({"probe": where}).encode())
                try:
                    if await asyncio.wait_for(probes.get(), 0.1) == where:
                        break
                except TimeoutError:
                    continue
            else:
                raise AssertionError(f"the listener's interest never reached {where}")
        finally:
            await nc.close()
        while not probes.empty():
            probes.get_nowait()


def _each_server(urls: list[str]) -> list[Callable[[], Awaitable[nats.NATS]]]:
    """A way to connect to each of the servers at `urls` (nats-server's: one process each)."""
    return [lambda url=url: nats.connect(url) for url in urls]


def _each_member(cluster: LocalCluster) -> list[Callable[[], Awaitable[nats.NATS]]]:
    """A way to connect to each member of `cluster`: with several workers a node's client port is
    shared by its workers, each a server of its own that must hear of the listener."""
    return [
        lambda member=member: connect_to_member(cluster, member)
        for spec in cluster.specs
        for member in spec.members
    ]


async def _audits(
    urls: list[str], servers: list[Callable[[], Awaitable[nats.NATS]]], names: set[str]
) -> list[dict[str, Any]]:
    """The audits a listener on another node sees while one client makes `REQUESTS` (each awaited);
    `servers` connects to each server (to see that the listener's interest reached it), `names` are
    the server names an audit may give."""
    spy = await nats.connect(urls[1])
    seen: list[dict[str, Any]] = []
    expected_all = asyncio.Event()

    probes: asyncio.Queue[str] = asyncio.Queue()

    async def note(msg: nats.aio.msg.Msg) -> None:
        data = json.loads(msg.data)
        if "probe" in data:
            probes.put_nowait(data["probe"])
            return
        seen.append(data)
        if len(seen) == len(REQUESTS) - 1:  # a message found gets none
            expected_all.set()

    await spy.subscribe(AUDIT, cb=note)
    await spy.flush()
    await _interest_reached_every_server(servers, probes)
    nc = await nats.connect(urls[0], name="auditor")
    try:
        for subject, body, *headers in REQUESTS:
            if subject == "$JS.API.STREAM.MSG.GET.AUD" and body == b'{"seq":1}':
                await publish_when_served(nc.jetstream(timeout=10), "aud.a", b"x")
            await nc.request(subject, body, timeout=10, headers=headers[0] if headers else None)
        await asyncio.wait_for(expected_all.wait(), 10)
        await asyncio.sleep(0.3)  # an audit too many would arrive by now (no event marks its absence)
    finally:
        await nc.close()
        await spy.close()
    return [_comparable(audit, names) for audit in seen]


async def test_the_same_requests_give_the_same_audits_as_nats_server(
    jetraft: LocalCluster, reference: list[str]
) -> None:
    theirs = await _audits(reference, _each_server(reference), {"n1", "n2", "n3"})
    members = {member for spec in jetraft.specs for member in spec.members}
    ours = await _audits(jetraft.client_urls, _each_member(jetraft), members)
    # audits from different nodes may cross on their way to the listener (on nats-server too): compared
    # as sets of requests, each with its own audit
    def by_request(audits: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(audits, key=lambda audit: json.dumps(audit, sort_keys=True))

    # apart, so that a failure says which side saw an audit too many or too few, and which
    expected = len(REQUESTS) - 1
    assert len(theirs) == expected, ("nats-server", [audit["subject"] for audit in theirs])
    assert len(ours) == expected, ("jetraft", [audit["subject"] for audit in ours])
    assert {audit["client"].get("name") for audit in ours} == {"auditor"}
    for mine, real in zip(by_request(ours), by_request(theirs), strict=True):
        assert mine == real


# an API subject nobody answers, on either server
PROBE = "$JS.API.PROBE"


async def _what_a_spy_on_the_api_sees(urls: list[str]) -> list[tuple[str, dict[str, str] | None]]:
    """A `$JS.API.>` subscriber on every node while a client asks for account info twice, once with a
    header of its own: the subjects and headers the subscribers got."""
    spies = [await nats.connect(url) for url in urls]
    seen: asyncio.Queue[tuple[str, dict[str, str] | None]] = asyncio.Queue()

    probed = [asyncio.Event() for _ in spies]

    def noter(index: int) -> Callable[[nats.aio.msg.Msg], Awaitable[None]]:
        async def note(msg: nats.aio.msg.Msg) -> None:
            if msg.subject == PROBE:
                probed[index].set()
            else:
                seen.put_nowait((msg.subject, msg.headers))

        return note

    for index, spy in enumerate(spies):
        await spy.subscribe("$JS.API.>", cb=noter(index))
        await spy.flush()
    nc = await nats.connect(urls[0])
    # someone listens for audits on the requester's own server: requests are stamped there
    await nc.subscribe(AUDIT)
    await nc.flush()
    try:
        # the spies' interest reaches the requester's server after their SUBs (routes, the mesh): a probe
        # until every spy got one (bounded), as no event tells
        for _ in range(100):
            await nc.publish(PROBE, b"")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*(event.wait() for event in probed)), 0.1)
            if all(event.is_set() for event in probed):
                break
        else:
            raise AssertionError("the spies' interest never reached the requester's server")
        await nc.request("$JS.API.INFO", b"", timeout=10)
        await nc.request("$JS.API.INFO", b"", timeout=10, headers={"X-Mine": "1"})
        got = [await asyncio.wait_for(seen.get(), 10) for _ in range(2 * len(spies))]
    finally:
        await nc.close()
        for spy in spies:
            await spy.close()
    return sorted(got, key=repr)


async def test_a_client_watching_the_api_sees_requests_as_their_client_sent_them(
    jetraft: LocalCluster, reference: list[str]
) -> None:
    ours = await _what_a_spy_on_the_api_sees(jetraft.client_urls)
    assert ours == await _what_a_spy_on_the_api_sees(reference)
    assert ("$JS.API.INFO", None) in ours and ("$JS.API.INFO", {"X-Mine": "1"}) in ours


# account B has no JetStream: its API requests are answered with 10039, and audited in B
TWO_ACCOUNTS = """
jetstream: enabled
accounts: {
    A: { users: [ {user: a, password: a} ], jetstream: enabled }
    B: { users: [ {user: b, password: b} ] }
}
"""
WITHOUT_JETSTREAM = [
    ("$JS.API.INFO", b""),
    ("$JS.API.STREAM.INFO.X", b""),
    ("$JS.API.STREAM.CREATE.X", b'{"name":"X"}'),
]


async def _audits_without_jetstream(port: int) -> tuple[list[dict[str, Any]], int]:
    """The audits B's listener sees while a B client asks B's API, and how many A's listener saw."""
    in_a = await nats.connect(f"nats://a:a@{HOST}:{port}")
    in_b = await nats.connect(f"nats://b:b@{HOST}:{port}")
    seen_in_a: list[bytes] = []
    seen_in_b: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def note_a(msg: nats.aio.msg.Msg) -> None:
        seen_in_a.append(msg.data)

    async def note_b(msg: nats.aio.msg.Msg) -> None:
        seen_in_b.put_nowait(json.loads(msg.data))

    await in_a.subscribe(AUDIT, cb=note_a)
    await in_b.subscribe(AUDIT, cb=note_b)
    await in_a.flush()
    await in_b.flush()
    nc = await nats.connect(f"nats://b:b@{HOST}:{port}", name="bee")
    try:
        for subject, body in WITHOUT_JETSTREAM:
            await nc.request(subject, body, timeout=10)
        audits = [await asyncio.wait_for(seen_in_b.get(), 10) for _ in WITHOUT_JETSTREAM]
        await in_a.flush()
    finally:
        await nc.close()
        await in_a.close()
        await in_b.close()
    for audit in audits:
        # a single server here: names of servers and a cluster differ by nature
        audit["server"] = audit["client"]["server"] = "server"
        audit["client"].pop("cluster", None)
    return [_comparable(audit, {"server"}) for audit in audits], len(seen_in_a)


async def test_an_account_without_jetstream_gets_its_audits_as_on_nats_server(tmp_path: Path) -> None:
    reference, ours = tmp_path / "reference", tmp_path / "ours"
    reference.mkdir()
    ours.mkdir()
    async with nats_server_from_config(reference, TWO_ACCOUNTS) as port:
        expected = await _audits_without_jetstream(port)
    assert expected[1] == 0 and {audit["client"]["acc"] for audit in expected[0]} == {"B"}
    async with node_from_config(ours, TWO_ACCOUNTS) as node:
        assert await _audits_without_jetstream(node.client_port) == expected


async def _audits_under_a_domain(port: int) -> list[dict[str, Any]]:
    """The audits of two requests sent under the domain's API prefix ($JS.hub.API)."""
    spy = await nats.connect(f"nats://{HOST}:{port}")
    seen: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def note(msg: nats.aio.msg.Msg) -> None:
        seen.put_nowait(json.loads(msg.data))

    await spy.subscribe(AUDIT, cb=note)
    await spy.flush()
    nc = await nats.connect(f"nats://{HOST}:{port}", name="auditor")
    try:
        await nc.request("$JS.hub.API.INFO", b"", timeout=10)
        await nc.request("$JS.hub.API.STREAM.NAMES", b'{"offset":0}', timeout=10)
        audits = [await asyncio.wait_for(seen.get(), 10) for _ in range(2)]
    finally:
        await nc.close()
        await spy.close()
    for audit in audits:
        audit["server"] = audit["client"]["server"] = "server"
        audit["client"].pop("cluster", None)
    return [{**_comparable(audit, {"server"}), "domain": audit.get("domain")} for audit in audits]


async def test_requests_under_the_domains_prefix_are_audited_as_on_nats_server(tmp_path: Path) -> None:
    config = "jetstream: { domain: hub }\n"
    reference, ours = tmp_path / "reference", tmp_path / "ours"
    reference.mkdir()
    ours.mkdir()
    async with nats_server_from_config(reference, config) as port:
        expected = await _audits_under_a_domain(port)
    assert [(audit["subject"], audit["domain"]) for audit in expected] == [
        ("$JS.API.INFO", "hub"),
        ("$JS.API.STREAM.NAMES", "hub"),
    ]
    async with node_from_config(ours, config) as node:
        assert await _audits_under_a_domain(node.client_port) == expected
