"""Atomic batch publish (ADR-50) against a 3-node nats-server 2.15.1 cluster and a 3-node jetraft cluster:
every reply, byte for byte, and what each stream holds afterwards must agree."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import nats
import pytest

from local.cluster import node_available
from tests.pipeline.servers import NATS_SERVER, JetStreamTarget, request_when_served, side_by_side

pytestmark = pytest.mark.skipif(
    not (node_available() and NATS_SERVER.exists()), reason="needs `jetraft node` and nats-server"
)

TIMEOUT = 10.0


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, JetStreamTarget]]:
    with side_by_side(tmp_path_factory) as started:
        yield started


def batch(batch_id: str, seq: int | str | None, commit: str | None = None, **extra: str) -> dict[str, str]:
    headers = {"Nats-Batch-Id": batch_id}
    if seq is not None:
        headers["Nats-Batch-Sequence"] = str(seq)
    if commit is not None:
        headers["Nats-Batch-Commit"] = commit
    headers.update({name.replace("_", "-"): value for name, value in extra.items()})
    return headers


# (subject, headers): one publish each, as a request; None as headers is a plain publish
SCRIPT: list[tuple[str, dict[str, str] | None]] = [
    ("off.1", batch("b1", 1)),  # atomic publish not allowed on that stream
    ("a.1", batch("b1", None)),  # no sequence
    ("a.1", batch("x" * 65, 1)),  # id too long
    ("a.1", batch("b2", 2)),  # unknown batch
    ("a.1", batch("b3", 1)),
    ("a.2", batch("b3", 2)),
    ("a.3", batch("b3", 3, "1")),  # committed with its last message
    ("a.4", batch("b4", 1)),
    ("a.4", batch("b4", 2, "eob")),  # committed by end-of-batch: the marker is not stored
    ("a.5", batch("b5", 1)),
    ("a.5", batch("b5", 3)),  # a gap abandons the batch
    ("a.5", batch("b5", 2, "1")),
    ("a.6", batch("b6", 1, "eob")),  # an empty batch
    ("a.6", batch("b7", 1, "yes")),  # no such commit
    ("a.7", batch("b8", 1, Nats_Expected_Last_Msg_Id="zz")),
    ("a.7", batch("b8", 2, "1")),
    ("a.8", batch("b9", 1, Nats_Msg_Id="m1")),
    ("a.8", batch("b9", 2, "1", Nats_Msg_Id="m1")),  # the same msg id twice in a batch
    ("a.8", batch("b10", 1, Nats_Msg_Id="m2")),
    ("a.8", batch("b10", 2, "1", Nats_Msg_Id="m3")),
    ("a.8", batch("b11", 1, "1", Nats_Msg_Id="m2")),  # a msg id the stream already holds
    ("a.9", batch("b12", 1, Nats_Expected_Last_Sequence="1")),
    ("a.9", batch("b12", 2, "1")),
    ("a.9", batch("b13", 1)),
    ("a.9", batch("b13", 2, "1", Nats_Expected_Last_Sequence="6")),  # the batch's own first counts
    ("a.9", batch("b14", 1)),
    ("a.9", batch("b14", 2, "1", Nats_Expected_Last_Sequence="7")),  # right, but not on the first
    ("a.9", batch("b15", 1)),
    ("a.9", batch("b15", 2, "1", Nats_Expected_Last_Subject_Sequence="0")),  # subject written in the batch
    ("a.10", batch("b16", 1, Nats_Expected_Last_Subject_Sequence="0")),
    ("a.10", batch("b16", 2, "1")),
    ("a.11", batch("b17", 1, Nats_Rollup="all")),  # the stream does not allow roll-ups
    ("a.11", batch("b17", 2, "1")),
    ("a.12", batch("b18", 0)),
    ("a.12", batch("b19", "abc")),
    ("a.12", batch("", 1)),  # an empty id is a lone publish
    ("a.12", batch("b20", 1001)),
    ("a.12", batch("b21", 1, Nats_TTL="5s")),  # the stream does not allow TTLs
    ("a.12", batch("b21", 2, "1")),
    ("a.13", batch("b22", 1)),
    ("a.13", None),  # a lone publish while a batch is staged
    ("a.13", batch("b22", 2, "1")),
    ("full.1", batch("b23", 1)),
    ("full.2", batch("b23", 2)),
    ("full.3", batch("b23", 3, "1")),  # one more than the discard-new stream's max_msgs
    ("full.1", batch("b24", 1)),
    ("full.2", batch("b24", 2, "1")),
    ("r.1", batch("b25", 1)),
    ("r.1", batch("b25", 2, "1", Nats_Rollup="sub")),  # a roll-up of a subject the batch already wrote
    ("r.1", batch("b26", 1)),
    ("r.2", batch("b26", 2, "1", Nats_Rollup="all")),  # a roll-up of the stream after the batch's first
    ("r.1", batch("b27", 1, Nats_Rollup="all")),
    ("r.1", batch("b27", 2, "1")),
]


async def _replay(url: str) -> tuple[list[Any], list[Any]]:
    nc = await nats.connect(url, max_reconnect_attempts=0)
    try:
        streams = [
            {"name": "A", "subjects": ["a.>"], "allow_atomic": True},
            {"name": "OFF", "subjects": ["off.>"]},
            {"name": "R", "subjects": ["r.>"], "allow_atomic": True, "allow_rollup_hdrs": True},
            {
                "name": "FULL",
                "subjects": ["full.>"],
                "allow_atomic": True,
                "max_msgs": 2,
                "discard": "new",
            },
        ]
        for config in streams:
            config.update(storage="file", num_replicas=3)
            reply = await nc.request(
                f"$JS.API.STREAM.CREATE.{config['name']}", json.dumps(config).encode(), timeout=TIMEOUT
            )
            assert "error" not in json.loads(reply.data), reply.data
        replies: list[Any] = []
        for subject, headers in SCRIPT:
            reply = await request_when_served(nc, subject, b"x", headers, timeout=TIMEOUT)
            replies.append((subject, headers, reply.data))
        stored: list[Any] = []
        for stream in ("A", "FULL", "R"):
            info = json.loads((await nc.request(f"$JS.API.STREAM.INFO.{stream}", b"", timeout=TIMEOUT)).data)
            state = info["state"]
            stored.append((stream, state["messages"], state["first_seq"], state["last_seq"]))
            for seq in range(state["first_seq"], state["last_seq"] + 1):
                request = json.dumps({"seq": seq}).encode()
                got = json.loads(
                    (await nc.request(f"$JS.API.STREAM.MSG.GET.{stream}", request, timeout=TIMEOUT)).data
                )
                message = got.get("message", got)
                stored.append((seq, message.get("subject"), message.get("hdrs"), message.get("error")))
        return replies, stored
    finally:
        await nc.close()


async def test_atomic_batches_answer_and_store_as_nats_server(clusters: dict[str, JetStreamTarget]) -> None:
    expected = await _replay(clusters["nats-server"].urls[0])
    got = await _replay(clusters["jetraft"].urls[0])
    for want, have in zip(expected[0], got[0], strict=True):
        assert have == want
    assert got[1] == expected[1]
    # the script really commits batches, abandons others and fills the discard-new stream
    acks = [json.loads(data) for _, _, data in expected[0] if data]
    assert {ack.get("batch") for ack in acks} >= {"b3", "b4", "b10", "b16", "b22", "b24"}
    assert {ack["error"]["err_code"] for ack in acks if "error" in ack} >= {
        10174,
        10176,
        10177,
        10199,
        10201,
        10164,
        10077,
    }
