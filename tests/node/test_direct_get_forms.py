"""ADR-31 request forms answered by a real cluster's responders, frame by frame, as nats-server answers them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator

import nats
import pytest
from nats.aio.msg import Msg

from local.cluster import LocalCluster
from tests.node.cluster_fixtures import every_replica_applied, local_cluster

STREAM = "FORMS"
API = f"$JS.API.DIRECT.GET.{STREAM}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("forms")) as running:
        yield running


async def _seed(url: str) -> None:
    client = await nats.connect(url)
    js = client.jetstream()
    await js.add_stream(name=STREAM, subjects=["dg.>"], num_replicas=3, allow_direct=True)
    # as trace 08: dg.a a1, dg.b b1 (with a header), dg.a a2, dg.c.x cx1, dg.c.y cy1, dg.a a3, dg.b b2
    for subject, data, headers in [
        ("dg.a", b"a1", None),
        ("dg.b", b"b1", {"X-Custom": "yes"}),
        ("dg.a", b"a2", None),
        ("dg.c.x", b"cx1", None),
        ("dg.c.y", b"cy1", None),
        ("dg.a", b"a3", None),
        ("dg.b", b"b2", None),
    ]:
        await js.publish(subject, data, headers=headers)
    await every_replica_applied(client, STREAM, "dg.b", 7)
    await client.close()


@pytest.fixture(scope="module")
def seeded(cluster: LocalCluster) -> LocalCluster:
    asyncio.run(_seed(cluster.client_urls[1]))
    return cluster


@pytest.fixture
async def nc(seeded: LocalCluster) -> AsyncIterator[nats.NATS]:
    client = await nats.connect(seeded.client_urls[0])
    yield client
    await client.close()


async def frames(nc: nats.NATS, subject: str, body: bytes, *, until_eob: bool) -> list[Msg]:
    """Every frame of one request: until the 204 EOB for batches, else the first one."""
    inbox = nc.new_inbox()
    got: list[Msg] = []
    done = asyncio.Event()

    async def take(msg: Msg) -> None:
        got.append(msg)
        status = (msg.headers or {}).get("Status")
        if not until_eob or status is not None:
            done.set()

    sub = await nc.subscribe(inbox, cb=take)
    await nc.publish(subject, body, reply=inbox)
    await asyncio.wait_for(done.wait(), 5)
    await sub.unsubscribe()
    return got


def described(msg: Msg) -> tuple[object, ...]:
    h = msg.headers or {}
    if h.get("Status"):
        return (h["Status"], h.get("Description", ""), h.get("Nats-Num-Pending"), h.get("Nats-Last-Sequence"))
    return (h.get("Nats-Subject"), h.get("Nats-Sequence"), msg.data, h.get("Nats-Num-Pending"))


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"seq": 1, "batch": 3},
            [
                ("dg.a", "1", b"a1", "6"),
                ("dg.b", "2", b"b1", "5"),
                ("dg.a", "3", b"a2", "4"),
                ("204", "EOB", "4", "3"),
            ],
        ),
        (
            {"seq": 6, "batch": 5},
            [("dg.a", "6", b"a3", "1"), ("dg.b", "7", b"b2", "0"), ("204", "EOB", "0", "7")],
        ),
        (
            {"next_by_subj": "dg.a", "seq": 2, "batch": 2},
            [("dg.a", "3", b"a2", "1"), ("dg.a", "6", b"a3", "0"), ("204", "EOB", "0", "6")],
        ),
    ],
)
async def test_batches_end_with_eob(
    nc: nats.NATS, body: dict[str, object], expected: list[tuple[object, ...]]
) -> None:
    got = await frames(nc, API, json.dumps(body).encode(), until_eob=True)
    assert [described(m) for m in got] == expected


async def test_multi_last_returns_the_last_per_subject(nc: nats.NATS) -> None:
    got = await frames(nc, API, json.dumps({"multi_last": ["dg.a", "dg.c.*"]}).encode(), until_eob=True)
    assert [(m.headers or {}).get("Nats-Subject") for m in got[:-1]] == ["dg.c.x", "dg.c.y", "dg.a"]
    eob = got[-1].headers or {}
    assert eob.get("Status") == "204" and eob.get("Nats-UpTo-Sequence") == "7"


async def test_single_message_forms(nc: nats.NATS) -> None:
    (by_seq,) = await frames(nc, API, b'{"seq": 2}', until_eob=False)
    assert by_seq.data == b"b1" and (by_seq.headers or {}).get("X-Custom") == "yes"
    assert (by_seq.headers or {}).get("Jetraft-Role") in {"leader", "follower"}
    (appended,) = await frames(nc, f"{API}.dg.c.y", b"", until_eob=False)
    assert (appended.headers or {}).get("Nats-Sequence") == "5"
    (plain,) = await frames(nc, API, b'{"seq": 3, "no_hdr": true}', until_eob=False)
    assert plain.data == b"a2" and not plain.headers


@pytest.mark.parametrize(
    ("subject_tail", "body", "status"),
    [
        ("", b"", ("408", "Empty Request")),
        ("", b"{not json", ("408", "Malformed Request")),
        ("", b'{"seq": 1, "last_by_subj": "dg.a"}', ("408", "Bad Request")),
        (".dg.a", b'{"seq": 1}', ("408", "Bad Request")),
        ("", b'{"seq": 99}', ("404", "Message Not Found")),
        ("", b'{"last_by_subj": "dg.none"}', ("404", "Message Not Found")),
    ],
)
async def test_bad_and_missing_requests_get_status(
    nc: nats.NATS, subject_tail: str, body: bytes, status: tuple[str, str]
) -> None:
    (reply,) = await frames(nc, API + subject_tail, body, until_eob=False)
    headers = reply.headers or {}
    assert (headers.get("Status"), headers.get("Description")) == status
    assert reply.data == b""
