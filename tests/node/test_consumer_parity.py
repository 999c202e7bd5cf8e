"""Consumers side by side with a real nats-server 2.15.1: the same requests to both, the replies compared.

Pause and resume (the PAUSE API, deliveries held, info, advisories), pull request statuses
(no_wait with expires, abandoned requests, Batch Completed), consumer counts, priority groups, what
purges, removals and resets do to consumers and to interest and work-queue retention; and on jetraft alone,
what nats-server's cluster also promises: a pause kept by a new consumer leader, and an update's
answer showing the new config when the stream's or consumer's leader is not the meta leader.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nats
import pytest

from cluster.runtime.workers import node_of
from local.cluster import LocalCluster
from tests.node.cluster_fixtures import local_cluster
from tests.pipeline.servers import NatsServerProcesses

API = "$JS.API."
ZERO_TIME = "0001-01-01T00:00:00Z"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("parity")) as running:
        yield running


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with NatsServerProcesses(1, Path(tmp_path_factory.mktemp("reference"))) as processes:
        yield processes.target().urls[0]


@pytest.fixture
async def both(cluster: LocalCluster, nats_server: str) -> AsyncIterator[dict[str, nats.NATS]]:
    """A connection to each: jetraft (through a node that is not necessarily any leader) and nats-server."""
    clients = {"jetraft": await nats.connect(cluster.client_urls[1]), "nats-server": await nats.connect(nats_server)}
    yield clients
    for nc in clients.values():
        await nc.close()


async def request(nc: nats.NATS, subject: str, body: Any = b"", timeout: float = 10.0) -> dict[str, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    reply = await nc.request(subject, data, timeout=timeout)
    return json.loads(reply.data)


async def make_stream(nc: nats.NATS, name: str, replicas: int) -> None:
    config = {"name": name, "subjects": [f"{name.lower()}.>"], "num_replicas": replicas}
    assert "error" not in await request(nc, f"{API}STREAM.CREATE.{name}", config)


async def make_consumer(nc: nats.NATS, stream: str, name: str, **config: Any) -> dict[str, Any]:
    body = {"stream_name": stream, "config": {"durable_name": name, "ack_policy": "explicit", **config}}
    return await request(nc, f"{API}CONSUMER.DURABLE.CREATE.{stream}.{name}", body)


def replicas_for(kind: str) -> int:
    return 3 if kind == "jetraft" else 1


def rfc3339(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def shape(value: Any) -> Any:
    """A reply with what differs from call to call (times, durations, ids) replaced by its kind."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in ("pause_until", "timestamp", "ts", "created") and item != ZERO_TIME:
                out[key] = "<time>"
            elif key in ("pause_remaining",):
                out[key] = "<ns>" if isinstance(item, int) and item > 0 else item
            elif key == "id":
                out[key] = "<id>"
            else:
                out[key] = shape(item)
        return out
    if isinstance(value, list):
        return [shape(v) for v in value]
    return value


class Pull:
    """Raw MSG.NEXT requests on an inbox of their own: what comes back, and when."""

    def __init__(self, nc: nats.NATS, stream: str, consumer: str) -> None:
        self.nc, self.subject = nc, f"{API}CONSUMER.MSG.NEXT.{stream}.{consumer}"

    async def __call__(self, body: dict[str, Any], wait: float = 1.5, messages: int = 0) -> list[tuple]:
        """Replies until a status other than a heartbeat, `messages` messages (when > 0), or `wait`
        seconds of silence: (status, description, pending headers, payload, wall clock, Nats-Pin-Id)
        each."""
        inbox = self.nc.new_inbox()
        sub = await self.nc.subscribe(inbox)
        await self.nc.publish(self.subject, json.dumps(body).encode(), reply=inbox)
        out: list[tuple] = []
        try:
            while True:
                try:
                    msg = await sub.next_msg(timeout=wait)
                except nats.errors.TimeoutError:
                    break
                headers = msg.headers or {}
                status = headers.get("Status")
                pending = {k: v for k, v in headers.items() if k.startswith("Nats-Pending")}
                pin = headers.get("Nats-Pin-Id")
                out.append((status, headers.get("Description"), pending, msg.data, time.time(), pin))
                if status is not None and status != "100":
                    break
                if messages and sum(1 for r in out if r[0] is None) >= messages:
                    break
        finally:
            await sub.unsubscribe()
        return out


def without_times(replies: list[tuple]) -> list[tuple]:
    return [r[:4] for r in replies]


async def test_pause_and_resume_as_nats_server_does(both: dict[str, nats.NATS]) -> None:
    seen: dict[str, dict[str, Any]] = {}
    for kind, nc in both.items():
        stream = "PAUSED"
        await make_stream(nc, stream, replicas_for(kind))
        advisories: list[dict[str, Any]] = []

        async def on_advisory(msg: Any, into: list[dict[str, Any]] = advisories) -> None:
            into.append(json.loads(msg.data))

        await nc.subscribe(f"$JS.EVENT.ADVISORY.CONSUMER.PAUSE.{stream}.*", cb=on_advisory)
        await nc.flush()
        await make_consumer(nc, stream, "worker")
        await nc.request("paused.job", b"first", timeout=5)  # a PubAck: stored
        until = time.time() + 1.5
        paused = await request(nc, f"{API}CONSUMER.PAUSE.{stream}.worker", {"pause_until": rfc3339(until)})
        info = await request(nc, f"{API}CONSUMER.INFO.{stream}.worker")
        pull = Pull(nc, stream, "worker")
        asked = time.time()
        held = await pull({"batch": 1, "no_wait": True, "expires": 300_000_000})
        waited = await pull({"batch": 1, "expires": 5_000_000_000}, wait=5.0, messages=1)
        errors = {
            "array": await request(nc, f"{API}CONSUMER.PAUSE.{stream}.worker", b"[]"),
            "no consumer": await request(nc, f"{API}CONSUMER.PAUSE.{stream}.nobody", b""),
            "no stream": await request(nc, f"{API}CONSUMER.PAUSE.NOSTREAM.worker", b""),
        }
        past = await request(nc, f"{API}CONSUMER.PAUSE.{stream}.worker", {"pause_until": rfc3339(time.time() - 5)})
        resumed = await request(nc, f"{API}CONSUMER.PAUSE.{stream}.worker", b"")
        again = await request(nc, f"{API}CONSUMER.PAUSE.{stream}.worker", b"not json: ignored, resumes")
        await nc.flush()
        await asyncio.sleep(0.2)  # advisories are not answers: give the last ones time to arrive
        seen[kind] = {
            "paused": shape(paused),
            "info": shape({k: info.get(k) for k in ("paused", "pause_remaining")}),
            "config pause": shape({"pause_until": info["config"].get("pause_until")}),
            "req level": info["config"]["metadata"]["_nats.req.level"],
            "held": without_times(held),
            "waited": without_times(waited),
            "errors": errors,
            "past": shape(past),
            "resumed": resumed,
            "again": again,
            "advisories": [(a["paused"], a["pause_until"] != ZERO_TIME) for a in advisories],
        }
        assert paused["paused"] and 1_000_000_000 < paused["pause_remaining"] <= 1_500_000_000, kind
        assert held[-1][4] - asked >= 0.25, kind  # a held no_wait request waits for its expiry
        # the message comes when the pause ends, to the request that waited for it
        assert waited and waited[0][3] == b"first", kind
        assert until - 0.05 <= waited[0][4] < until + 1.0, kind
        await request(nc, f"{API}STREAM.DELETE.{stream}")
    jetraft, reference = seen["jetraft"], seen["nats-server"]
    assert jetraft == reference
    assert reference["advisories"] == [(True, True), (False, True), (False, True), (False, False)]
    assert reference["held"] == [("408", "Request Timeout", {"Nats-Pending-Messages": "1", "Nats-Pending-Bytes": "0"}, b"")]


async def test_a_new_consumer_leader_keeps_the_pause(cluster: LocalCluster) -> None:
    nc = await nats.connect(cluster.client_urls[0])
    try:
        await make_stream(nc, "KEEP", 3)
        await make_consumer(nc, "KEEP", "worker")
        await nc.request("keep.job", b"held", timeout=5)
        await request(nc, f"{API}CONSUMER.PAUSE.KEEP.worker", {"pause_until": rfc3339(time.time() + 60)})
        before = (await request(nc, f"{API}CONSUMER.INFO.KEEP.worker"))["cluster"]["leader"]
        await request(nc, f"{API}CONSUMER.LEADER.STEPDOWN.KEEP.worker")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while True:
            info = await request(nc, f"{API}CONSUMER.INFO.KEEP.worker")
            if "error" not in info and info["cluster"].get("leader") not in (None, before):
                break
            assert loop.time() < deadline, "no new consumer leader"
            await asyncio.sleep(0.1)
        assert info["paused"] and info["pause_remaining"] > 50_000_000_000
        pull = Pull(nc, "KEEP", "worker")
        assert without_times(await pull({"batch": 1, "expires": 500_000_000})) == [
            ("408", "Request Timeout", {"Nats-Pending-Messages": "1", "Nats-Pending-Bytes": "0"}, b"")
        ]
        await request(nc, f"{API}CONSUMER.PAUSE.KEEP.worker", b"")
        got = await pull({"batch": 1, "expires": 5_000_000_000}, messages=1)
        assert [r[3] for r in got] == [b"held"]
        await request(nc, f"{API}STREAM.DELETE.KEEP")
    finally:
        await nc.close()


async def test_pull_requests_answered_as_nats_server_answers_them(both: dict[str, nats.NATS]) -> None:
    seen: dict[str, dict[str, Any]] = {}
    for kind, nc in both.items():
        stream = "PULLS"
        await make_stream(nc, stream, replicas_for(kind))
        await make_consumer(nc, stream, "d")
        pull = Pull(nc, stream, "d")
        out: dict[str, Any] = {}
        asked = time.time()
        empty = await pull({"batch": 1, "no_wait": True, "expires": 300_000_000})
        out["empty, no_wait with expires"] = without_times(empty)
        assert 0.25 <= empty[-1][4] - asked < 1.0, (kind, empty)  # at its expiry, not at once nor later
        out["empty, no_wait"] = without_times(await pull({"batch": 1, "no_wait": True}))
        for i in range(3):
            await nc.request("pulls.a", b"m%d" % i, timeout=5)
        out["no_wait with expires, some"] = without_times(
            await pull({"batch": 5, "no_wait": True, "expires": 500_000_000})
        )
        for i in range(3):
            await nc.request("pulls.a", b"o%d" % i, timeout=5)
        out["max_bytes left over"] = without_times(await pull({"batch": 2, "max_bytes": 1000, "expires": 500_000_000}))
        out["the rest"] = without_times(await pull({"batch": 5, "no_wait": True}))
        # a request waiting (its inbox still subscribed), then a no_wait one: nothing left for it
        inbox = nc.new_inbox()
        waiting = await nc.subscribe(inbox)
        await nc.publish(f"{API}CONSUMER.MSG.NEXT.{stream}.d", b'{"batch": 10, "expires": 3000000000}', reply=inbox)
        await nc.flush()
        out["no_wait behind a waiting one"] = without_times(await pull({"batch": 5, "no_wait": True}))
        info = await request(nc, f"{API}CONSUMER.INFO.{stream}.d")
        out["waiting"] = info["num_waiting"]
        await waiting.unsubscribe()
        # a request whose client left: never served, not counted as delivered nor waiting
        await nc.request("pulls.b", b"kept", timeout=5)
        await nc.publish(f"{API}CONSUMER.MSG.NEXT.{stream}.d", b'{"batch": 1, "expires": 2000000000}', reply="_INBOX.nobody")
        await nc.flush()
        await asyncio.sleep(0.3)  # nothing to wait for: this is about what did not happen
        info = await request(nc, f"{API}CONSUMER.INFO.{stream}.d")
        out["abandoned"] = (info["delivered"]["stream_seq"], info["num_ack_pending"], info["num_waiting"], info["num_pending"])
        got = await pull({"batch": 1, "no_wait": True})
        out["kept for the next"] = [(r[3], r[0]) for r in got]
        seen[kind] = out
        await request(nc, f"{API}STREAM.DELETE.{stream}")
    assert seen["jetraft"] == seen["nats-server"]
    assert seen["nats-server"]["abandoned"] == (6, 6, 0, 1)


async def test_consumer_counts_as_nats_server_counts_them(both: dict[str, nats.NATS]) -> None:
    seen: dict[str, list[tuple[int, int]]] = {}
    for kind, nc in both.items():
        counts = []
        base = (await request(nc, f"{API}INFO"))["consumers"]

        async def count(nc: nats.NATS = nc, base: int = base) -> tuple[int, int]:
            stream_info = await request(nc, f"{API}STREAM.INFO.COUNTED")
            return stream_info["state"]["consumer_count"], (await request(nc, f"{API}INFO"))["consumers"] - base

        await make_stream(nc, "COUNTED", replicas_for(kind))
        counts.append(await count())
        assert "error" not in await make_consumer(nc, "COUNTED", "a")
        counts.append(await count())
        assert "error" not in await make_consumer(nc, "COUNTED", "b", deliver_subject="deliver.counted.b")
        counts.append(await count())
        listed = await request(nc, f"{API}STREAM.LIST")
        counts.append(next(s["state"]["consumer_count"] for s in listed["streams"] if s["config"]["name"] == "COUNTED"))
        await request(nc, f"{API}CONSUMER.DELETE.COUNTED.a")
        counts.append(await count())
        await request(nc, f"{API}STREAM.DELETE.COUNTED")
        counts.append((0, (await request(nc, f"{API}INFO"))["consumers"] - base))
        seen[kind] = counts
    assert seen["jetraft"] == seen["nats-server"] == [(0, 0), (1, 1), (2, 2), 2, (1, 1), (0, 0)]


async def lead_elsewhere(nc: nats.NATS, info_subject: str, stepdown_subject: str, avoid: str) -> str:
    """Step the group's leader down until it is not on `avoid` (the meta leader); its name."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while True:
        info = await request(nc, info_subject)
        leader = info.get("cluster", {}).get("leader") if "error" not in info else None
        if leader is not None and node_of(leader) != avoid:
            return str(leader)
        assert loop.time() < deadline, f"the leader stays on {avoid}"
        if leader is not None:
            await request(nc, stepdown_subject)
        await asyncio.sleep(0.2)


async def test_a_consumer_update_answers_with_the_new_config_from_a_leader_elsewhere(cluster: LocalCluster) -> None:
    meta = cluster.meta_leader()
    assert meta is not None
    nc = await nats.connect(cluster.client_urls[0])
    try:
        await make_stream(nc, "UPDATED_C", 3)
        await make_consumer(nc, "UPDATED_C", "d")
        await lead_elsewhere(
            nc, f"{API}CONSUMER.INFO.UPDATED_C.d", f"{API}CONSUMER.LEADER.STEPDOWN.UPDATED_C.d", meta
        )
        for round_ in range(5):
            reply = await make_consumer(nc, "UPDATED_C", "d", description=f"v{round_}")
            assert reply["config"].get("description") == f"v{round_}", reply
        await request(nc, f"{API}STREAM.DELETE.UPDATED_C")
    finally:
        await nc.close()


async def test_a_stream_update_answers_with_the_new_config_from_a_leader_elsewhere(cluster: LocalCluster) -> None:
    meta = cluster.meta_leader()
    assert meta is not None
    nc = await nats.connect(cluster.client_urls[0])
    try:
        await make_stream(nc, "UPDATED_S", 3)
        await lead_elsewhere(nc, f"{API}STREAM.INFO.UPDATED_S", f"{API}STREAM.LEADER.STEPDOWN.UPDATED_S", meta)
        for round_ in range(5):
            config = {"name": "UPDATED_S", "subjects": ["updated_s.>"], "num_replicas": 3, "description": f"v{round_}"}
            reply = await request(nc, f"{API}STREAM.UPDATE.UPDATED_S", config)
            assert reply["config"].get("description") == f"v{round_}", reply
        await request(nc, f"{API}STREAM.DELETE.UPDATED_S")
    finally:
        await nc.close()


async def test_a_push_consumer_created_before_its_subscriber_delivers_at_once(both: dict[str, nats.NATS]) -> None:
    """A subscriber on another node than the consumer's leader: the delivery follows its interest."""
    for kind, nc in both.items():
        await make_stream(nc, "PUSHED", replicas_for(kind))
        await nc.request("pushed.a", b"waiting", timeout=5)
        created = await make_consumer(nc, "PUSHED", "p", deliver_subject="deliver.pushed")
        assert "error" not in created, created
        sub = await nc.subscribe("deliver.pushed")
        msg = await sub.next_msg(timeout=5)
        assert msg.data == b"waiting", kind
        await sub.unsubscribe()
        await request(nc, f"{API}STREAM.DELETE.PUSHED")


# last: it kills and restarts a node
async def test_info_is_not_held_up_after_the_meta_leader_changes(cluster: LocalCluster) -> None:
    """A new meta leader's first entry changes no assignment: nodes must not wait for a reconcile of
    it before answering what the meta leader passes on (every INFO stalled 5 s, past clients' timeouts)."""
    meta = cluster.meta_leader()
    assert meta is not None
    survivor = next(spec for spec in cluster.specs if spec.name != meta)
    nc = await nats.connect(survivor.client_url)
    try:
        await make_stream(nc, "AFTER_META", 3)
        cluster.kill_node(meta)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while True:  # until the survivors have a meta leader again
            try:
                info = await request(nc, f"{API}STREAM.INFO.AFTER_META", timeout=2)
                if "error" not in info:
                    break
            except nats.errors.TimeoutError:
                pass
            assert loop.time() < deadline, "INFO never answered within 2 s after the meta leader died"
            await asyncio.sleep(0.1)
        started = loop.time()
        for _ in range(3):
            assert "error" not in await request(nc, f"{API}STREAM.INFO.AFTER_META", timeout=2)
        assert loop.time() - started < 2.0
        await request(nc, f"{API}STREAM.DELETE.AFTER_META")
    finally:
        await nc.close()
        cluster.restart_node(meta)
        cluster.wait_ready(names=[meta])


def _collector(into: list[str]) -> Any:
    async def take(msg: Any) -> None:
        if msg.data:  # status frames (408 at expiry) carry no payload
            into.append(msg.data.decode())

    return take


async def _who_got_what(nc: nats.NATS, stream: str, consumer: str, pulls: list[tuple[str, bytes]], count: int) -> dict[str, list[str]]:
    """The pull requests (name, body) wait on an empty stream, in order; `count` messages m1, m2, ...
    arrive one by one on `<stream>.x`: which request got which."""
    got: dict[str, list[str]] = {}
    subs = []
    for name, body in pulls:
        inbox = nc.new_inbox()
        got[name] = []
        subs.append(await nc.subscribe(inbox, cb=_collector(got[name])))
        await nc.publish(f"{API}CONSUMER.MSG.NEXT.{stream}.{consumer}", body, reply=inbox)
        await nc.flush()
    for n in range(count):
        await nc.request(f"{stream.lower()}.x", f"m{n + 1}".encode(), timeout=10)
    for _ in range(100):  # bounded: until all are in
        if sum(len(v) for v in got.values()) == count:
            break
        await asyncio.sleep(0.05)
    for sub in subs:
        await sub.unsubscribe()
    return got


async def _spread_over_waiting_pulls(nc: nats.NATS, kind: str) -> dict[str, list[str]]:
    """Three pull requests wait on an empty stream; six messages arrive one by one: which got which."""
    await make_stream(nc, "RR", replicas_for(kind))
    await make_consumer(nc, "RR", "rr")
    pull = json.dumps({"batch": 5, "expires": 5_000_000_000}).encode()
    return await _who_got_what(nc, "RR", "rr", [(name, pull) for name in ("first", "second", "third")], 6)


async def test_waiting_pull_requests_take_turns_as_on_nats_server(both: dict[str, nats.NATS]) -> None:
    seen = {kind: await _spread_over_waiting_pulls(nc, kind) for kind, nc in both.items()}
    assert seen["nats-server"] == {"first": ["m1", "m4"], "second": ["m2", "m5"], "third": ["m3", "m6"]}
    assert seen["jetraft"] == seen["nats-server"]


# -- ADR-42 priority groups: the overflow and prioritized policies --------------------------------

PRIORITY_CONFIGS = [
    {"priority_policy": "overflow"},  # 10159: a policy needs a group
    {"priority_groups": ["g"]},  # 10196: groups need a policy
    {"priority_timeout": 1_000_000_000},  # 10197: a pin's timeout needs a policy
    {"priority_policy": "overflow", "priority_groups": [""]},  # 10161
    {"priority_policy": "overflow", "priority_groups": ["no spaces"]},  # 10162
    {"priority_policy": "overflow", "priority_groups": ["g"], "deliver_subject": "pg.out"},  # 10178
    {"priority_policy": "bogus", "priority_groups": ["g"]},  # 10025, from the decoder
    {"priority_policy": "none"},  # none is left out of the config shown
    {"priority_policy": "overflow", "priority_groups": ["g", "h"], "priority_timeout": -5},
    {"priority_policy": "prioritized", "priority_groups": ["g"]},
]


async def test_priority_group_configs_checked_as_nats_server_checks_them(both: dict[str, nats.NATS]) -> None:
    seen: dict[str, list[Any]] = {}
    for kind, nc in both.items():
        await make_stream(nc, "PGC", replicas_for(kind))
        out: list[Any] = []
        for n, config in enumerate(PRIORITY_CONFIGS):
            answer = await make_consumer(nc, "PGC", f"c{n}", **config)
            if "error" in answer:
                out.append(answer["error"])
                continue
            shown = answer["config"]
            out.append(({k: v for k, v in shown.items() if k.startswith("priority")}, shown["metadata"], answer.get("priority_groups")))
            await request(nc, f"{API}CONSUMER.DELETE.PGC.c{n}")
        seen[kind] = out
        await request(nc, f"{API}STREAM.DELETE.PGC")
    assert seen["jetraft"] == seen["nats-server"]
    assert [a.get("err_code") if isinstance(a, dict) else None for a in seen["nats-server"]] == [
        10159, 10196, 10197, 10161, 10162, 10178, 10025, None, None, None
    ]


async def _overflow(nc: nats.NATS, kind: str) -> dict[str, Any]:
    await make_stream(nc, "OVF", replicas_for(kind))
    await make_consumer(nc, "OVF", "o", priority_policy="overflow", priority_groups=["jobs"])
    await make_consumer(nc, "OVF", "plain")
    for i in range(3):
        await nc.request("ovf.x", b"m%d" % i, timeout=10)
    pull, plain = Pull(nc, "OVF", "o"), Pull(nc, "OVF", "plain")
    out: dict[str, Any] = {}
    for name, body in [
        ("no group", {"batch": 1, "no_wait": True}),
        ("another group", {"batch": 1, "group": "other"}),
        ("a pin id", {"batch": 1, "group": "jobs", "id": "x"}),
        ("priority 10", {"batch": 1, "group": "jobs", "priority": 10}),
        ("3 pending, 10 wanted", {"batch": 1, "group": "jobs", "min_pending": 10, "expires": 400_000_000}),
        ("3 pending, 2 wanted", {"batch": 1, "group": "jobs", "min_pending": 2, "expires": 2_000_000_000}),
        ("1 unacked, 2 wanted", {"batch": 1, "group": "jobs", "min_ack_pending": 2, "expires": 400_000_000}),
        ("1 unacked, 1 wanted", {"batch": 1, "group": "jobs", "min_ack_pending": 1, "expires": 2_000_000_000}),
        ("no minimum", {"batch": 1, "group": "jobs", "expires": 2_000_000_000}),
    ]:
        out[name] = without_times(await pull(body, messages=1))
    out["a minimum, no policy"] = without_times(await plain({"batch": 1, "min_pending": 1}))
    info = await request(nc, f"{API}CONSUMER.INFO.OVF.o")
    out["info"] = (info["priority_groups"], info["num_ack_pending"], info["num_pending"])
    advisories = await nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.UNPINNED.OVF.>")
    out["unpin"] = await request(nc, f"{API}CONSUMER.UNPIN.OVF.o", {"group": "jobs"})
    out["unpin another"] = await request(nc, f"{API}CONSUMER.UNPIN.OVF.o", {"group": "other"})
    advisory = json.loads((await advisories.next_msg(timeout=5)).data)
    out["advisory"] = shape({k: v for k, v in advisory.items() if k != "account"})
    await advisories.unsubscribe()
    await request(nc, f"{API}STREAM.DELETE.OVF")
    return out


async def test_an_overflow_consumer_serves_as_nats_server_does(both: dict[str, nats.NATS]) -> None:
    seen = {kind: await _overflow(nc, kind) for kind, nc in both.items()}
    assert seen["jetraft"] == seen["nats-server"]
    theirs = seen["nats-server"]
    assert theirs["3 pending, 10 wanted"][0][0] == "408" and theirs["3 pending, 2 wanted"][0][3] == b"m0"
    assert theirs["1 unacked, 2 wanted"][0][0] == "408" and theirs["1 unacked, 1 wanted"][0][3] == b"m1"


async def _by_priority(nc: nats.NATS, kind: str) -> dict[str, list[str]]:
    """Requests of priority 5, then 1, then a plain one wait on an empty stream; four messages come."""
    await make_stream(nc, "PRI", replicas_for(kind))
    await make_consumer(nc, "PRI", "p", priority_policy="prioritized", priority_groups=["g"])

    def body(priority: int) -> bytes:
        return json.dumps({"group": "g", "priority": priority, "batch": 2, "expires": 5_000_000_000}).encode()

    got = await _who_got_what(nc, "PRI", "p", [("five", body(5)), ("one", body(1)), ("plain", b"2")], 4)
    await request(nc, f"{API}STREAM.DELETE.PRI")
    return got


async def test_a_prioritized_consumer_serves_the_lowest_number_first(both: dict[str, nats.NATS]) -> None:
    seen = {kind: await _by_priority(nc, kind) for kind, nc in both.items()}
    assert seen["jetraft"] == seen["nats-server"]
    assert seen["nats-server"]["one"] == ["m1", "m2"]


def _pin_shape(replies: list[tuple], pins: dict[str, str]) -> list[tuple]:
    """Pull replies with each pin id named by the order it was first seen (pin-1, pin-2, ...)."""
    out = []
    for status, description, pending, data, _at, pin in replies:
        if pin is not None:
            pin = pins.setdefault(pin, f"pin-{len(pins) + 1}")
        out.append((status, description, pending, data, pin))
    return out


async def _pinned(nc: nats.NATS, kind: str) -> dict[str, Any]:
    await make_stream(nc, "PIN", replicas_for(kind))
    created = await make_consumer(nc, "PIN", "p", priority_policy="pinned_client", priority_groups=["g"])
    advisories: list[dict[str, Any]] = []

    async def advised(msg: Any) -> None:
        advisories.append(json.loads(msg.data))

    watches = [
        await nc.subscribe(f"$JS.EVENT.ADVISORY.CONSUMER.{event}.PIN.p", cb=advised) for event in ("PINNED", "UNPINNED")
    ]
    for i in range(4):
        await nc.request("pin.x", b"m%d" % i, timeout=10)
    pull, pins = Pull(nc, "PIN", "p"), {}
    out: dict[str, Any] = {"config": {k: v for k, v in created["config"].items() if k.startswith("priority")}}
    first = await pull({"batch": 1, "group": "g", "expires": 2_000_000_000}, messages=1)
    pin = first[0][5]
    out["first pins its client"] = _pin_shape(first, pins)
    info = await request(nc, f"{API}CONSUMER.INFO.PIN.p")
    group = info["priority_groups"][0]
    out["info"] = (group["group"], pins.get(group.get("pinned_client_id", "")), group["pinned_ts"] != ZERO_TIME)
    out["another pin"] = _pin_shape(await pull({"batch": 1, "group": "g", "id": "bogus"}), pins)
    out["no pin, while pinned"] = _pin_shape(await pull({"batch": 1, "group": "g", "expires": 500_000_000}), pins)
    out["the pinned client"] = _pin_shape(await pull({"batch": 1, "group": "g", "id": pin, "expires": 2_000_000_000}, messages=1), pins)
    out["unpin"] = await request(nc, f"{API}CONSUMER.UNPIN.PIN.p", {"group": "g"})
    out["the old pin"] = _pin_shape(await pull({"batch": 1, "group": "g", "id": pin, "expires": 2_000_000_000}), pins)
    new_client = await pull({"batch": 1, "group": "g", "expires": 2_000_000_000}, messages=1)
    out["a new client"] = _pin_shape(new_client, pins)
    # what is left of max_bytes says what counted: not the pin's header, on nats-server
    room = {"batch": 1, "group": "g", "id": new_client[0][5], "max_bytes": 1000, "expires": 2_000_000_000}
    out["max_bytes"] = _pin_shape(await pull(room), pins)
    for _ in range(100):  # bounded: the two PINNED and the UNPINNED advisories
        if len(advisories) >= 3:
            break
        await asyncio.sleep(0.05)
    for watch in watches:
        await watch.unsubscribe()
    out["advisories"] = [
        (a["type"].rsplit(".", 1)[-1], a["group"], a.get("reason"), pins.get(a.get("pinned_id", ""))) for a in advisories
    ]
    await request(nc, f"{API}STREAM.DELETE.PIN")
    return out


async def test_a_pinned_client_consumer_serves_as_nats_server_does(both: dict[str, nats.NATS]) -> None:
    seen = {kind: await _pinned(nc, kind) for kind, nc in both.items()}
    assert seen["jetraft"] == seen["nats-server"]
    theirs = seen["nats-server"]
    assert theirs["first pins its client"][0][3:] == (b"m0", "pin-1")
    assert theirs["a new client"][0][3:] == (b"m2", "pin-2")


async def _pin_timeout(nc: nats.NATS, kind: str) -> list[Any]:
    await make_stream(nc, "PTO", replicas_for(kind))
    await make_consumer(nc, "PTO", "p", priority_policy="pinned_client", priority_groups=["g"], priority_timeout=500_000_000)
    unpinned = await nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.UNPINNED.PTO.p")
    await nc.request("pto.x", b"m", timeout=10)
    pull = Pull(nc, "PTO", "p")
    got = await pull({"batch": 1, "group": "g", "expires": 2_000_000_000}, messages=1)
    asked = time.time()
    advisory = json.loads((await unpinned.next_msg(timeout=5)).data)
    waited = time.time() - asked
    info = await request(nc, f"{API}CONSUMER.INFO.PTO.p")
    await unpinned.unsubscribe()
    await request(nc, f"{API}STREAM.DELETE.PTO")
    assert 0.3 < waited < 2.0, (kind, waited)  # at the pin's timeout
    return [got[0][3], advisory["reason"], advisory["group"], info["priority_groups"]]


async def test_a_pin_not_kept_up_is_released_as_on_nats_server(both: dict[str, nats.NATS]) -> None:
    seen = {kind: await _pin_timeout(nc, kind) for kind, nc in both.items()}
    assert seen["jetraft"] == seen["nats-server"]
    assert seen["nats-server"] == [b"m", "timeout", "g", [{"group": "g", "pinned_ts": ZERO_TIME}]]


async def test_a_new_consumer_leader_pins_anew(cluster: LocalCluster) -> None:
    """The pin is the leader's own, as on nats-server: after a leader change the old pin is refused (423)
    and the next request without one is pinned under a new id."""
    nc = await nats.connect(cluster.client_urls[0])
    try:
        await make_stream(nc, "REPIN", 3)
        await make_consumer(nc, "REPIN", "p", priority_policy="pinned_client", priority_groups=["g"])
        for i in range(3):
            await nc.request("repin.x", b"m%d" % i, timeout=10)
        pull = Pull(nc, "REPIN", "p")
        first = await pull({"batch": 1, "group": "g", "expires": 2_000_000_000}, messages=1)
        old_pin = first[0][5]
        before = (await request(nc, f"{API}CONSUMER.INFO.REPIN.p"))["cluster"]["leader"]
        answer = await request(nc, f"{API}CONSUMER.LEADER.STEPDOWN.REPIN.p")
        assert answer.get("success"), answer
        for _ in range(100):  # bounded: until the new leader answers INFO
            info = await request(nc, f"{API}CONSUMER.INFO.REPIN.p")
            if info.get("cluster", {}).get("leader") not in (None, before):
                break
            await asyncio.sleep(0.1)
        assert info["priority_groups"] == [{"group": "g", "pinned_ts": ZERO_TIME}]
        stale = await pull({"batch": 1, "group": "g", "id": old_pin, "expires": 2_000_000_000})
        assert [r[:2] for r in stale] == [("423", "Nats-Wrong-Pin-Id")]
        fresh = await pull({"batch": 1, "group": "g", "expires": 2_000_000_000}, messages=1)
        assert fresh[0][3] == b"m1" and fresh[0][5] not in (None, "", old_pin)
        await request(nc, f"{API}STREAM.DELETE.REPIN")
    finally:
        await nc.close()


async def settled(ask: Callable[[], Awaitable[Any]], want: Any) -> Any:
    """`ask()`'s answer, asked again until it equals `want` (None: the first answer) for at most five
    seconds: jetraft's consumer and stream leaders act on a purge, a removal or a delete when their
    node applies it, which may come after the request's answer, as nats-server's goroutines do."""
    deadline = asyncio.get_running_loop().time() + 5.0
    while True:
        got = await ask()
        if want is None or got == want or asyncio.get_running_loop().time() > deadline:
            return got
        await asyncio.sleep(0.05)


async def the_same_on_both(
    both: dict[str, nats.NATS], scenario: Callable[[nats.NATS, str, Any], Awaitable[list[Any]]]
) -> list[Any]:
    """`scenario` run on nats-server, then on jetraft told nats-server's answers (its `settled` steps wait
    for them, bounded); asserts that both saw the same, and returns what they saw."""
    theirs = await scenario(both["nats-server"], "nats-server", None)
    ours = await scenario(both["jetraft"], "jetraft", theirs)
    assert ours == theirs
    return theirs


def positions(info: dict[str, Any]) -> list[Any]:
    """What a purge moves: delivered and ack floor (consumer, stream), acks and messages pending."""
    delivered, floor = info["delivered"], info["ack_floor"]
    return [
        [delivered["consumer_seq"], delivered["stream_seq"]],
        [floor["consumer_seq"], floor["stream_seq"]],
        info["num_ack_pending"],
        info["num_pending"],
    ]


async def purges_and_consumers(nc: nats.NATS, kind: str, expected: list[Any] | None) -> list[Any]:
    """Six messages on purgeme.a (odd) and purgeme.b (even), four pull consumers with two out each and
    none acked; then a purge below 4 and a purge of purgeme.b; each consumer's positions after each
    purge (`settled` on `expected`'s, nats-server's)."""
    await make_stream(nc, "PURGEME", replicas_for(kind))
    js = nc.jetstream()
    for i in range(1, 7):
        await js.publish("purgeme.a" if i % 2 else "purgeme.b", b"m%d" % i)
    consumers = {"all": None, "a": "purgeme.a", "b": "purgeme.b", "wide": "purgeme.>"}
    for name, filter_subject in consumers.items():
        config = {"filter_subject": filter_subject} if filter_subject else {}
        assert "error" not in await make_consumer(nc, "PURGEME", name, **config)
        got = await Pull(nc, "PURGEME", name)({"batch": 2, "expires": 2_000_000_000}, messages=2)
        assert sum(1 for reply in got if reply[0] is None) == 2
    seen: list[Any] = []
    for purge in ({"seq": 4}, {"filter": "purgeme.b"}):
        assert (await request(nc, f"{API}STREAM.PURGE.PURGEME", purge))["success"]
        for name in consumers:
            want = expected[len(seen)] if expected is not None else None

            async def ask(name: str = name) -> list[Any]:
                return positions(await request(nc, f"{API}CONSUMER.INFO.PURGEME.{name}"))

            seen.append(await settled(ask, want))
    await request(nc, f"{API}STREAM.DELETE.PURGEME")
    return seen


async def test_a_purge_moves_consumers_as_nats_server_moves_them(both: dict[str, nats.NATS]) -> None:
    theirs = await the_same_on_both(both, purges_and_consumers)
    # below 4: "b" had 2 and 4 out and keeps 4 pending; the others had nothing left at or past 4
    assert theirs[2] == [[2, 4], [1, 3], 1, 1]
    assert theirs[0] == [[2, 3], [2, 3], 0, 3]


async def removals_and_pending(nc: nats.NATS, expected: list[Any] | None) -> tuple[list[Any], list[Any]]:
    """Ten messages on rm.b (odd) and rm.a (even), three kept per subject, and a consumer with three
    out (5, 6, 7); then a pending message deleted (6), one not delivered yet (9), and four publishes, of
    which two trim by the per-subject limit (5 among them). The consumer's positions after each step
    (`settled` on `expected`'s), and the MSG_TERMINATED advisories' reasons and sequences."""
    await request(nc, f"{API}STREAM.CREATE.RM", {"name": "RM", "subjects": ["rm.>"], "max_msgs_per_subject": 3})
    js = nc.jetstream()
    advisories = await nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.RM.C")
    for i in range(1, 11):
        await js.publish(f"rm.{'ab'[i % 2]}", b"m%d" % i)
    assert "error" not in await make_consumer(nc, "RM", "C", max_deliver=3, ack_wait=30_000_000_000)
    pull = Pull(nc, "RM", "C")
    seen: list[Any] = []

    async def ask() -> list[Any]:
        return positions(await request(nc, f"{API}CONSUMER.INFO.RM.C"))

    async def step() -> None:
        seen.append(await settled(ask, expected[len(seen)] if expected is not None else None))

    replies = [r for r in await pull({"batch": 3, "expires": 2_000_000_000}, messages=3) if r[0] is None]
    assert [r[3] for r in replies] == [b"m5", b"m6", b"m7"]
    await step()
    assert (await request(nc, f"{API}STREAM.MSG.DELETE.RM", {"seq": 6}))["success"]  # pending
    await step()
    assert (await request(nc, f"{API}STREAM.MSG.DELETE.RM", {"seq": 9}))["success"]  # not delivered yet
    await step()
    for i in range(11, 15):
        await js.publish(f"rm.{'ab'[i % 2]}", b"m%d" % i)
    await step()
    await request(nc, f"{API}STREAM.DELETE.RM")
    terminated = []
    while True:
        try:
            advisory = json.loads((await advisories.next_msg(timeout=0.5)).data)
        except nats.errors.TimeoutError:
            break
        terminated.append((advisory["stream_seq"], advisory["consumer_seq"], advisory["deliveries"], advisory.get("reason")))
    await advisories.unsubscribe()
    return seen, sorted(terminated)


async def test_a_removed_message_leaves_pending_at_once_as_on_nats_server(both: dict[str, nats.NATS]) -> None:
    theirs, their_terminated = await removals_and_pending(both["nats-server"], None)
    ours, our_terminated = await removals_and_pending(both["jetraft"], theirs)
    assert ours == theirs
    assert our_terminated == their_terminated
    # the deleted pending message (6) leaves at once, the trimmed one (5) too; 7 stays pending
    assert [step[2] for step in theirs] == [3, 2, 2, 1]
    reason = "Unacknowledged message was deleted"
    assert their_terminated == [(5, 1, 1, reason), (6, 2, 1, reason)]


async def interest_after_a_consumer_goes(nc: nats.NATS, kind: str, expected: list[Any] | None) -> list[Any]:
    """An interest stream with two consumers: C1 (everything) acks all six messages, C2 (int.a) acks
    the second of its two deliveries and is deleted. The stream's state after each step (`settled` on
    `expected`'s)."""
    config = {"name": "INT", "subjects": ["int.>"], "retention": "interest", "num_replicas": replicas_for(kind)}
    assert "error" not in await request(nc, f"{API}STREAM.CREATE.INT", config)
    assert "error" not in await make_consumer(nc, "INT", "C1")
    assert "error" not in await make_consumer(nc, "INT", "C2", filter_subject="int.a")
    js = nc.jetstream()
    for i in range(1, 7):
        await js.publish(f"int.{'ab'[i % 2]}", b"m%d" % i)
    seen: list[Any] = []

    async def ask() -> dict[str, Any]:
        state = (await request(nc, f"{API}STREAM.INFO.INT", {"deleted_details": True}))["state"]
        return {k: v for k, v in state.items() if k not in ("first_ts", "last_ts")}

    async def step() -> None:
        seen.append(await settled(ask, expected[len(seen)] if expected is not None else None))

    c1 = await js.pull_subscribe_bind("C1", "INT")
    for msg in await c1.fetch(6, timeout=5):
        await msg.ack_sync()
    await step()
    c2 = await js.pull_subscribe_bind("C2", "INT")
    await (await c2.fetch(2, timeout=5))[1].ack_sync()
    await step()
    assert "error" not in await request(nc, f"{API}CONSUMER.DELETE.INT.C2")
    await step()
    await request(nc, f"{API}STREAM.DELETE.INT")
    return seen


async def test_an_interest_stream_drops_what_only_a_deleted_consumer_wanted(both: dict[str, nats.NATS]) -> None:
    theirs = await the_same_on_both(both, interest_after_a_consumer_goes)
    # C2 still wanted 2 (delivered, not acked) and 6 (not delivered): once it is gone, nothing is left
    assert [state["messages"] for state in theirs] == [3, 2, 0]


async def resets_and_retention(nc: nats.NATS, kind: str, expected: list[Any] | None) -> list[Any]:
    """CONSUMER.RESET on an interest stream (C1 everything, C2 int.a of ten messages on int.b, odd, and
    int.a, even) and on a work queue: each reset's position, and the stream's state after it
    (`settled` on `expected`'s) and after the fetches and acks between them."""
    js = nc.jetstream()
    seen: list[Any] = []

    async def after(stream: str) -> None:
        async def ask() -> dict[str, Any]:
            state = (await request(nc, f"{API}STREAM.INFO.{stream}", {"deleted_details": True}))["state"]
            return {k: v for k, v in state.items() if k not in ("first_ts", "last_ts")}

        seen.append(await settled(ask, expected[len(seen)] if expected is not None else None))

    async def reset(stream: str, consumer: str, seq: int | None) -> None:
        body = b"" if seq is None else {"seq": seq}
        answer = await request(nc, f"{API}CONSUMER.RESET.{stream}.{consumer}", body)
        seen.append([*positions(answer), answer["reset_seq"]])
        await after(stream)

    async def fetch_and_ack(stream: str, consumer: str) -> None:
        sub = await js.pull_subscribe_bind(consumer, stream)
        msgs = await sub.fetch(10, timeout=5)
        seen.append([msg.metadata.sequence.stream for msg in msgs])
        for msg in msgs:
            await msg.ack_sync()
        await after(stream)

    config = {"name": "RINT", "subjects": ["rint.>"], "retention": "interest", "num_replicas": replicas_for(kind)}
    assert "error" not in await request(nc, f"{API}STREAM.CREATE.RINT", config)
    assert "error" not in await make_consumer(nc, "RINT", "C1")
    assert "error" not in await make_consumer(nc, "RINT", "C2", filter_subject="rint.a")
    for i in range(1, 11):
        await js.publish(f"rint.{'ab'[i % 2]}", b"m%d" % i)
    await reset("RINT", "C1", 7)  # past 1-6: C2 still wants the int.a among them
    await reset("RINT", "C2", 5)
    await reset("RINT", "C1", 1)  # back: nothing to drop, what is left comes again
    await fetch_and_ack("RINT", "C1")
    await reset("RINT", "C2", None)
    await request(nc, f"{API}STREAM.DELETE.RINT")

    config = {"name": "RWQ", "subjects": ["rwq.>"], "retention": "workqueue", "num_replicas": replicas_for(kind)}
    assert "error" not in await request(nc, f"{API}STREAM.CREATE.RWQ", config)
    assert "error" not in await make_consumer(nc, "RWQ", "C")
    for i in range(1, 7):
        await js.publish("rwq.x", b"m%d" % i)
    for msg in await (await js.pull_subscribe_bind("C", "RWQ")).fetch(2, timeout=5):
        await msg.ack_sync()
    await reset("RWQ", "C", 5)  # 3 and 4 stay: only an ack removes from a work queue
    await fetch_and_ack("RWQ", "C")
    await reset("RWQ", "C", 1)
    await fetch_and_ack("RWQ", "C")
    await request(nc, f"{API}STREAM.DELETE.RWQ")
    return seen


async def test_a_reset_on_interest_and_work_queue_streams_as_on_nats_server(both: dict[str, nats.NATS]) -> None:
    theirs = await the_same_on_both(both, resets_and_retention)
    # C1's reset past 1-6 dropped the int.b among them (1, 3, 5); C2's past 1-4 the int.a (2, 4)
    assert (theirs[1]["first_seq"], theirs[1]["deleted"]) == (2, [3, 5])
    assert theirs[3]["first_seq"] == 6
    # the work queue kept 3 and 4 through the reset past them, and a reset back delivers them
    assert theirs[-2] == [3, 4]


S = 1_000_000_000
CONSUMER_CONFIGS = [
    {"deliver_subject": "ds.1", "flow_control": True},
    {"deliver_subject": "ds.2", "flow_control": True, "idle_heartbeat": 5 * S},
    {"deliver_subject": "ds.3", "idle_heartbeat": 100_000_000},
    {"rate_limit_bps": 1000},
    {"headers_only": True},
    {"max_expires": 500_000},
    {"ack_policy": "none", "ack_wait": 5 * S},
    {"ack_policy": "explicit", "backoff": [S, 2 * S], "max_deliver": 2},
    {"ack_policy": "explicit", "backoff": [S, S, S], "max_deliver": 2},
    {"ack_policy": "explicit", "backoff": [-1]},
    {"filter_subjects": ["cfg.>", ""]},
    {"filter_subjects": ["cfg.a", "cfg.*"]},
    {"description": "x" * 4097},
    {"inactive_threshold": 1},
    {"deliver_subject": "ds.*"},
    {"deliver_subject": "a..*"},
    {"deliver_subject": "cfg.x"},
    {"ack_policy": "flow_control"},
    {"ack_policy": "flow_control", "deliver_subject": "ds.fc2", "ack_wait": S},
    {"ack_policy": "flow_control", "deliver_subject": "ds.fc3", "max_deliver": 3},
    {"ack_policy": "flow_control", "deliver_subject": "ds.fc4", "max_ack_pending": -1},
]


async def consumer_configs(nc: nats.NATS, kind: str) -> list[Any]:
    await make_stream(nc, "CFG", replicas_for(kind))
    out = []
    for i, config in enumerate(CONSUMER_CONFIGS):
        body = {"stream_name": "CFG", "config": {**config, "durable_name": f"c{i}"}}
        answer = await request(nc, f"{API}CONSUMER.DURABLE.CREATE.CFG.c{i}", body)
        out.append(shape({k: v for k, v in answer.items() if k != "cluster"}))
    await request(nc, f"{API}STREAM.DELETE.CFG")
    return out


async def test_consumer_configs_answered_as_nats_server_answers_them(both: dict[str, nats.NATS]) -> None:
    """Each config's create answer, the defaults filled in or the error, as nats-server 2.15.1's. (An
    `ack_policy: flow_control` that passes nats-server's checks is refused by jetraft: docs/config-fields.md.)"""
    theirs = await consumer_configs(both["nats-server"], "nats-server")
    ours = await consumer_configs(both["jetraft"], "jetraft")
    assert ours == theirs
    errors = [answer.get("error", {}).get("err_code") for answer in theirs]
    assert errors[:4] == [10108, None, None, 10086]  # flow control needs heartbeats; a pull rate limit
    assert theirs[13]["config"]["inactive_threshold"] == 1  # answered, then gone at once
