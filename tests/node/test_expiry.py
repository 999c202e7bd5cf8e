"""Expiry on a real 3-node jetraft cluster, side by side with a 3-node nats-server 2.15.1 cluster.

Each scenario runs the same nats-py calls against both at once and compares what a client sees:
a quiet stream losing its old messages on time, a KV bucket's ttl, per-message `Nats-TTL`
(ADR-43) with `never`, the publish errors for TTLs (10165, 10166), and the subject delete
markers a KV watcher sees. Then what only jetraft needs checking this way: every replica holds
the same markers, and expiry carries on after a leader change and after a restart of the
whole cluster. Waits are bounded polls: the events happen in other processes.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import nats
import pytest
from nats.js.api import KeyValueConfig

from local.cluster import LocalCluster
from tests.node.cluster_fixtures import (
    direct_get_from_every_replica,
    local_cluster,
    publish_when_served,
)
from tests.pipeline.servers import NatsServerProcesses, when_served

T = TypeVar("T")
SECOND = 1_000_000_000
# how long an expiry may take beyond its due time (nats-server's own timer took 0.3 s)
LATE = 5.0


@pytest.fixture(scope="module")
def jetraft(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("expiry")) as running:
        yield running


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    with NatsServerProcesses(3, Path(tmp_path_factory.mktemp("expiry-nats-server"))) as servers:
        yield servers.target().urls


async def _run(kind: str, url: str, scenario: Callable[[nats.NATS], Awaitable[T]]) -> T:
    nc = await nats.connect(url)
    try:
        return await scenario(nc)
    except Exception as exc:  # say which side failed: both run at once
        raise AssertionError(f"{kind} ({url}): {exc!r}") from exc
    finally:
        await nc.close()


async def on_both(
    jetraft: LocalCluster, reference: list[str], scenario: Callable[[nats.NATS], Awaitable[T]]
) -> tuple[T, T]:
    """Run `scenario` against both clusters at once (client on the first node of each)."""
    ours, theirs = await asyncio.gather(
        _run("jetraft", jetraft.client_urls[0], scenario), _run("nats-server", reference[0], scenario)
    )
    return ours, theirs


# both clusters work at once, on a machine that may be running other suites: nats-py's 5 s API timeout
# was seen to pass by for one R3 create (which side was not recorded)
API_TIMEOUT = 10.0


async def api(nc: nats.NATS, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    reply = await nc.request(subject, json.dumps(body).encode() if body is not None else b"", timeout=API_TIMEOUT)
    answer: dict[str, Any] = json.loads(reply.data)
    return answer


async def create_stream(nc: nats.NATS, config: dict[str, Any]) -> None:
    answer = await api(nc, f"$JS.API.STREAM.CREATE.{config['name']}", {"num_replicas": 3, **config})
    assert "error" not in answer, answer


async def state(nc: nats.NATS, stream: str) -> dict[str, Any]:
    body: dict[str, Any] = (await api(nc, f"$JS.API.STREAM.INFO.{stream}"))["state"]
    return body


async def poll(check: Callable[[], Awaitable[bool]], within: float, what: str) -> float:
    """Seconds until `check` holds, asking every 50 ms; fails after `within` seconds."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    while not await check():
        if loop.time() - start > within:
            raise AssertionError(f"{what}: not within {within} s")
        await asyncio.sleep(0.05)
    return loop.time() - start


def comparable(st: dict[str, Any]) -> dict[str, Any]:
    return {k: st.get(k) for k in ("messages", "bytes", "first_seq", "last_seq", "num_subjects", "num_deleted")}


async def test_a_quiet_stream_loses_old_messages_on_time(jetraft: LocalCluster, reference: list[str]) -> None:
    async def scenario(nc: nats.NATS) -> tuple[float, dict[str, Any]]:
        js = nc.jetstream()
        await create_stream(nc, {"name": "QUIET", "subjects": ["quiet.>"], "max_age": 2 * SECOND})
        before = time.time()
        for i in range(3):
            await publish_when_served(js, f"quiet.{i}", b"old")
        after = time.time()
        # nothing more is published: only the server's own timer can remove them
        await poll(lambda: _empty(nc, "QUIET"), after - time.time() + 2 + LATE, "the quiet stream to empty")
        return on_time(before, after, 2), comparable(await state(nc, "QUIET"))

    (ours, our_state), (theirs, their_state) = await on_both(jetraft, reference, scenario)
    assert our_state == their_state == {**their_state, "messages": 0, "first_seq": 4, "last_seq": 3}
    assert ours == theirs == 0.0, "emptied neither early nor late"


def on_time(published_from: float, published_to: float, max_age: float) -> float:
    """0.0 when now is inside the expiry window of messages published between the two times (same
    machine, same clock): not before the first was `max_age` old, at most LATE seconds after the last
    was; else how far outside (negative: early)."""
    now = time.time()
    if now < published_from + max_age:
        return now - (published_from + max_age)
    return max(0.0, now - (published_to + max_age + LATE))


async def _empty(nc: nats.NATS, stream: str) -> bool:
    return bool((await state(nc, stream))["messages"] == 0)


async def test_a_kv_bucket_ttl_removes_idle_keys(jetraft: LocalCluster, reference: list[str]) -> None:
    async def scenario(nc: nats.NATS) -> tuple[float, int]:
        js = nc.jetstream()
        kv = await js.create_key_value(KeyValueConfig(bucket="idle", ttl=2, replicas=3))
        before = time.time()
        revision = await when_served(lambda: kv.put("session", b"alive"), "the idle bucket")
        after = time.time()

        async def gone() -> bool:
            # STREAM.MSG.GET, which the leader answers: nats-py's kv.get may use a Direct Get, which
            # a follower that has not applied the put yet would answer "not found"
            answer = await api(nc, "$JS.API.STREAM.MSG.GET.KV_idle", {"last_by_subj": "$KV.idle.session"})
            return answer.get("error", {}).get("err_code") == 10037

        await poll(gone, after - time.time() + 2 + LATE, "the idle key to expire")
        return on_time(before, after, 2), revision

    (ours, our_rev), (theirs, their_rev) = await on_both(jetraft, reference, scenario)
    assert our_rev == their_rev == 1
    assert ours == theirs == 0.0, "expired neither early nor late"


async def test_nats_ttl_expires_single_messages_and_never_outlives_max_age(
    jetraft: LocalCluster, reference: list[str]
) -> None:
    async def scenario(nc: nats.NATS) -> tuple[list[tuple[int, str]], list[int], dict[str, Any]]:
        js = nc.jetstream()
        await create_stream(
            nc, {"name": "TTLS", "subjects": ["ttls.>"], "allow_msg_ttl": True, "max_age": 3 * SECOND}
        )
        acks = [
            await publish_when_served(js, "ttls.short", b"1", {"Nats-TTL": "1"}),
            await publish_when_served(js, "ttls.plain", b"2"),
            await publish_when_served(js, "ttls.forever", b"3", {"Nats-TTL": "never"}),
            await publish_when_served(js, "ttls.long", b"4", {"Nats-TTL": "1h"}),
        ]
        seen: list[tuple[int, str]] = []

        async def only_never_left() -> bool:
            left = await _sequences(nc, "TTLS")
            if not seen or seen[-1][1] != str(left):
                seen.append((len(seen), str(left)))
            return left == [3]

        await poll(only_never_left, 3 + LATE, "all but the never message to expire")
        return seen, [ack.seq for ack in acks], comparable(await state(nc, "TTLS"))

    (our_steps, our_acks, our_state), (their_steps, their_acks, their_state) = await on_both(
        jetraft, reference, scenario
    )
    assert our_acks == their_acks == [1, 2, 3, 4]
    # the 1 s message goes first (a step both show for about 2 s), then max_age takes the rest but
    # `never` (the 1 h one too); between, either may show [3, 4] for a moment: the two age out
    # a few ms apart and neither server looks again sooner than 250 ms
    for steps in (our_steps, their_steps):
        shown = [s for _, s in steps]
        assert shown[0] == "[1, 2, 3, 4]" and "[2, 3, 4]" in shown and shown[-1] == "[3]", shown
        assert set(shown) <= {"[1, 2, 3, 4]", "[2, 3, 4]", "[3, 4]", "[3]"}, shown
    assert our_state == their_state


async def _sequences(nc: nats.NATS, stream: str) -> list[int]:
    """The stream's live sequences, from one STREAM.INFO (one answer: no expiry between reads)."""
    st = (await api(nc, f"$JS.API.STREAM.INFO.{stream}", {"deleted_details": True}))["state"]
    if not st["messages"]:
        return []
    gone = set(st.get("deleted") or ())
    return [seq for seq in range(st["first_seq"], st["last_seq"] + 1) if seq not in gone]


TTL_VALUES = ["5", "never", "abc", "0", "", "500ms", "-1", "00", "1.5s", "1h", "1e3", "+2s", "NEVER"]


async def test_ttl_publish_answers_match_nats_server(jetraft: LocalCluster, reference: list[str]) -> None:
    async def scenario(nc: nats.NATS) -> list[bytes]:
        await create_stream(nc, {"name": "NOTTL", "subjects": ["nottl.>"]})
        await create_stream(nc, {"name": "YESTTL", "subjects": ["yesttl.>"], "allow_msg_ttl": True})
        answers = []
        for value in TTL_VALUES:
            for subject in ("nottl.x", "yesttl.x"):
                ask = functools.partial(nc.request, subject, b"v", headers={"Nats-TTL": value}, timeout=5)
                reply = await when_served(ask, subject)
                answers.append(reply.data)
        return answers

    ours, theirs = await on_both(jetraft, reference, scenario)
    assert ours == theirs
    assert b'"err_code":10166' in ours[0] and b'"err_code":10165' in ours[5]


async def test_a_kv_watcher_sees_limit_markers(jetraft: LocalCluster, reference: list[str]) -> None:
    async def scenario(nc: nats.NATS) -> tuple[list[tuple[str, bytes, int, str | None]], dict[str, Any]]:
        js = nc.jetstream()
        kv = await js.create_key_value(
            KeyValueConfig(bucket="marked", ttl=3, limit_marker_ttl=3, history=1, replicas=3, direct=True)
        )
        watcher = await kv.watchall()
        await when_served(lambda: kv.put("k1", b"v1"), "the marked bucket")
        await when_served(lambda: kv.create("k2", b"v2", msg_ttl=1), "the marked bucket")
        entries: list[tuple[str, bytes, int, str | None]] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 3 + LATE
        while len(entries) < 4:
            update = await asyncio.wait_for(watcher.updates(), max(deadline - loop.time(), 0.01))
            if update is not None:  # the end of the initial values
                entries.append((update.key, update.value, update.revision, update.operation))
        await watcher.stop()
        info = await api(nc, "$JS.API.STREAM.INFO.KV_marked")
        return entries, {k: info["config"][k] for k in ("allow_msg_ttl", "subject_delete_marker_ttl")}

    (ours, our_config), (theirs, their_config) = await on_both(jetraft, reference, scenario)
    assert ours == theirs == [
        ("k1", b"v1", 1, None),
        ("k2", b"v2", 2, None),
        ("k2", b"", 3, "PURGE"),  # k2's own TTL ran out: a marker in its place
        ("k1", b"", 4, "PURGE"),  # the bucket's ttl took k1
    ]
    assert our_config == their_config == {"allow_msg_ttl": True, "subject_delete_marker_ttl": 3 * SECOND}

    # every jetraft replica holds the same marker for k1, at the same sequence
    nc = await nats.connect(jetraft.client_urls[0])
    try:
        request = json.dumps({"last_by_subj": "$KV.marked.k1", "min_last_seq": 4}).encode()
        replies = await direct_get_from_every_replica(nc, "KV_marked", request)
        markers = {(r.headers or {}).get("Nats-Sequence") for r in replies}
        reasons = {(r.headers or {}).get("Nats-Marker-Reason") for r in replies}
        assert markers == {"4"} and reasons == {"MaxAge"}, [r.headers for r in replies]
    finally:
        await nc.close()


async def test_delete_markers_are_republished(jetraft: LocalCluster, reference: list[str]) -> None:
    async def scenario(nc: nats.NATS, url_of: Callable[[str], str]) -> list[tuple[str, dict[str, str], bytes]]:
        js = nc.jetstream()
        await create_stream(
            nc,
            {
                "name": "REPUB",
                "subjects": ["repub.>"],
                "max_age": SECOND,
                "subject_delete_marker_ttl": SECOND,
                "republish": {"src": "repub.>", "dest": "out.>"},
            },
        )
        # listen where the stream's leader runs, which is where republished messages come from
        leader = (await api(nc, "$JS.API.STREAM.INFO.REPUB"))["cluster"]["leader"]
        listener = await nats.connect(url_of(leader))
        try:
            received: asyncio.Queue[Any] = asyncio.Queue()
            await listener.subscribe("out.>", cb=received.put)
            await listener.flush()
            await publish_when_served(js, "repub.a", b"old")
            out = []
            for _ in range(2):  # the message, then the marker that replaced it
                msg = await asyncio.wait_for(received.get(), 1 + LATE)
                headers = {k: v for k, v in (msg.headers or {}).items() if k != "Nats-Time-Stamp"}
                out.append((msg.subject, headers, msg.data))
            return out
        finally:
            await listener.close()

    ours, theirs = await asyncio.gather(
        _run("jetraft", jetraft.client_urls[0], lambda nc: scenario(nc, lambda name: jetraft.spec(name).client_url)),
        _run("nats-server", reference[0], lambda nc: scenario(nc, lambda name: reference[int(name[1:]) - 1])),
    )
    assert ours == theirs
    assert ours[1][1]["Nats-Marker-Reason"] == "MaxAge" and ours[1][1]["Nats-Last-Sequence"] == "1"


async def test_expiry_carries_on_after_a_leader_change(jetraft: LocalCluster) -> None:
    nc = await nats.connect(jetraft.client_urls[0])
    try:
        js = nc.jetstream()
        await create_stream(nc, {"name": "HANDOVER", "subjects": ["handover"], "max_age": 3 * SECOND})
        await publish_when_served(js, "handover", b"old")
        before = (await api(nc, "$JS.API.STREAM.INFO.HANDOVER"))["cluster"]["leader"]
        stepdown = await api(nc, "$JS.API.STREAM.LEADER.STEPDOWN.HANDOVER")
        assert stepdown.get("success") is True, stepdown

        async def new_leader() -> bool:
            leader = (await api(nc, "$JS.API.STREAM.INFO.HANDOVER")).get("cluster", {}).get("leader")
            return leader not in (None, before)

        await poll(new_leader, 10, "a new leader")
        await poll(lambda: _empty(nc, "HANDOVER"), 3 + LATE, "the new leader to expire the message")
    finally:
        await nc.close()


async def test_expiry_carries_on_after_a_restart(jetraft: LocalCluster) -> None:
    """Last in the module: it stops and restarts every node."""
    nc = await nats.connect(jetraft.client_urls[0])
    try:
        js = nc.jetstream()
        await create_stream(nc, {"name": "REBOOT", "subjects": ["reboot"], "max_age": 2 * SECOND})
        ack = await publish_when_served(js, "reboot", b"old")
        assert ack.seq == 1
    finally:
        await nc.close()
    stored_at = time.time()
    jetraft.stop()
    # the message comes due while every node is down
    while time.time() < stored_at + 2.5:
        await asyncio.sleep(0.1)
    for spec in jetraft.specs:
        jetraft.restart_node(spec.name)
    jetraft.wait_ready(60)
    nc = await nats.connect(jetraft.client_urls[1])
    try:

        async def expired() -> bool:
            answer = await api(nc, "$JS.API.STREAM.INFO.REBOOT")
            return "state" in answer and answer["state"]["messages"] == 0

        await poll(expired, 20, "the restarted cluster to expire the message")
        assert (await state(nc, "REBOOT"))["last_seq"] == 1
    finally:
        await nc.close()
