"""A client subscribed to `>` in the JetStream account, as `nats sub '>'` does while debugging: it sees what
a nats-server would show it, never the nodes' own traffic (leaders' requests, beacons, internal inboxes),
and it neither hides an unserved internal subject nor swallows a request meant for a leader. Side by side
with nats-server 2.15.1, on one node and on three."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator

import nats
import pytest

from local.cluster import node_available
from tests.pipeline.servers import NATS_SERVER, JetStreamTarget, side_by_side, when_served

pytestmark = pytest.mark.skipif(
    not (node_available() and NATS_SERVER.exists()), reason="needs `jetraft node` and nats-server"
)


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, JetStreamTarget]]:
    with side_by_side(tmp_path_factory) as started:
        yield started


async def _what_a_wildcard_sees(urls: list[str]) -> set[str]:
    """A `>` subscriber on every node while another client creates a stream, publishes, reads it back
    and deletes it: the subjects it saw (inboxes shown as `_INBOX`)."""
    spies = [await nats.connect(url) for url in urls]
    seen: set[str] = set()

    async def note(msg: nats.aio.msg.Msg) -> None:
        seen.add(re.sub(r"^_INBOX\..*", "_INBOX", msg.subject))

    for spy in spies:
        await spy.subscribe(">", cb=note)
        await spy.flush()
    nc = await nats.connect(urls[0])
    try:
        js = nc.jetstream(timeout=10)
        await js.add_stream(name="SEEN", subjects=["seen.>"], num_replicas=3)
        await when_served(lambda: js.publish("seen.a", b"x"), "seen.a")
        assert (await js.get_msg("SEEN", seq=1)).data == b"x"
        await js.delete_stream("SEEN")
        await asyncio.sleep(0.5)  # what is still on its way to the spies (no event marks the end of it)
    finally:
        await nc.close()
        for spy in spies:
            await spy.close()
    return seen


async def test_a_wildcard_subscriber_sees_what_it_would_see_on_nats_server(
    clusters: dict[str, JetStreamTarget],
) -> None:
    ours = await _what_a_wildcard_sees(clusters["jetraft"].urls)
    theirs = await _what_a_wildcard_sees(clusters["nats-server"].urls)
    assert not {s for s in ours if s.startswith(("$JSR.", "_JRI."))}, ours
    assert "$JS.EVENT.ADVISORY.API" in theirs
    assert ours == theirs


async def _elected(url: str) -> list[dict]:
    """The LEADER_ELECTED advisories of an R3 stream with an R3 consumer and of an R1 stream."""
    nc = await nats.connect(url)
    got: list[dict] = []

    async def note(msg: nats.aio.msg.Msg) -> None:
        got.append(json.loads(msg.data))

    try:
        await nc.subscribe("$JS.EVENT.ADVISORY.*.LEADER_ELECTED.>", cb=note)
        js = nc.jetstream(timeout=10)
        await js.add_stream(name="ELECT", subjects=["elect.>"], num_replicas=3)
        await js.add_consumer("ELECT", durable_name="c", num_replicas=3)
        await js.add_stream(name="ELECT1", subjects=["elect1.>"], num_replicas=1)
        for _ in range(100):  # bounded: until both advisories are in
            if len(got) >= 2:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # an R1 stream's would come as quickly: give it the chance to
        await js.delete_stream("ELECT")
        await js.delete_stream("ELECT1")
    finally:
        await nc.close()
    shapes = []
    for advisory in got:
        names = sorted(peer["name"] for peer in advisory["replicas"])
        assert advisory["leader"] in names
        shapes.append(
            {
                "keys": list(advisory),
                "type": advisory["type"],
                "stream": advisory["stream"],
                "consumer": advisory.get("consumer"),
                "replicas": len(names),
                "replica keys": sorted({key for peer in advisory["replicas"] for key in peer} - {"lag"}),
            }
        )
    return sorted(shapes, key=lambda shape: shape["type"])


async def test_leader_elected_advisories_as_nats_server_sends_them(
    clusters: dict[str, JetStreamTarget],
) -> None:
    theirs = await _elected(clusters["nats-server"].urls[0])
    assert [shape["type"].rsplit(".", 1)[1] for shape in theirs] == [
        "consumer_leader_elected",
        "stream_leader_elected",
    ]
    assert await _elected(clusters["jetraft"].urls[0]) == theirs


async def test_a_client_cannot_publish_into_the_nodes_own_subjects(
    clusters: dict[str, JetStreamTarget],
) -> None:
    nc = await nats.connect(clusters["jetraft"].urls[0])
    try:
        js = nc.jetstream(timeout=10)
        await js.add_stream(name="FORGED", subjects=["forged.>"], num_replicas=3)
        await js.publish("forged.a", b"kept")
        # a leader's own purge request, forged: nobody takes it
        with pytest.raises(nats.errors.NoRespondersError):
            await nc.request("$JSR.S.FORGED.PURGE", b"{}", timeout=5)
        assert (await js.stream_info("FORGED")).state.messages == 1
        await js.delete_stream("FORGED")
    finally:
        await nc.close()
