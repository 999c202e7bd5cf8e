"""A jetraft node without peers answers as a nats-server without a `cluster` block: side by side with a
standalone nats-server 2.15.1, the same requests show the same `cluster` objects (nats-py's own
`test_stream_management` compares a create reply with a later INFO and relies on this)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import nats
import pytest

from cluster.runtime.workers import node_of
from local.cluster import node_available
from tests.pipeline.servers import NATS_SERVER, JetStreamTarget, side_by_side

pytestmark = pytest.mark.skipif(
    not (node_available() and NATS_SERVER.exists()), reason="needs `jetraft node` and nats-server"
)


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, JetStreamTarget]]:
    with side_by_side(tmp_path_factory, nodes=1) as started:
        yield started


async def _cluster_shapes(url: str) -> dict[str, Any]:
    """For each reply: absent, or the keys of its `cluster` object with the leader named `me`."""
    nc = await nats.connect(url)
    server_name = nc._server_info["server_name"]  # the INFO the server sent

    async def ask(subject: str, body: dict[str, Any] | None = None) -> Any:
        reply = await nc.request(subject, json.dumps(body).encode() if body else b"", timeout=10)
        answer = json.loads(reply.data)
        assert "error" not in answer, answer
        cluster = answer.get("cluster")
        if cluster is None:
            return "absent"
        # `me`: this server, or on a several-worker node (`n1/w0`) any worker of this one machine
        return {k: ("me" if k == "leader" and node_of(v) == node_of(server_name) else v) for k, v in cluster.items()}

    try:
        config = {"name": "SOLO", "subjects": ["solo.>"]}
        shapes = {
            "create": await ask("$JS.API.STREAM.CREATE.SOLO", config),
            "info": await ask("$JS.API.STREAM.INFO.SOLO"),
            "update": await ask("$JS.API.STREAM.UPDATE.SOLO", {**config, "max_msgs": 10}),
            "list": None,
            "consumer create": await ask(
                "$JS.API.CONSUMER.CREATE.SOLO.c", {"stream_name": "SOLO", "config": {"durable_name": "c"}}
            ),
            "consumer info": await ask("$JS.API.CONSUMER.INFO.SOLO.c"),
        }
        listed = json.loads((await nc.request("$JS.API.STREAM.LIST", b"", timeout=10)).data)
        entry = listed["streams"][0].get("cluster")
        shapes["list"] = "absent" if entry is None else sorted(entry)
        return shapes
    finally:
        await nc.close()


async def test_replies_carry_the_cluster_object_a_standalone_nats_server_does(
    clusters: dict[str, JetStreamTarget],
) -> None:
    theirs = await _cluster_shapes(clusters["nats-server"].urls[0])
    ours = await _cluster_shapes(clusters["jetraft"].urls[0])
    assert theirs == {
        "create": "absent",
        "info": {"leader": "me"},
        "update": "absent",
        "list": "absent",
        "consumer create": "absent",
        "consumer info": "absent",
    }
    assert ours == theirs


S = 1_000_000_000
VOLATILE = {"created", "ts", "first_ts", "last_ts", "cluster"}
# each created with subjects of its own; what jetraft answers differently on purpose is left out
# (docs/config-fields.md: allow_direct with max_msgs_per_subject, a memory stream larger than the
# machine, counters and fast batches)
STREAM_CONFIGS = [
    {"max_age": 50_000_000},
    {"duplicate_window": 50_000_000},
    {"discard_new_per_subject": True},
    {"description": "d" * 5000},
    {"subjects": ["a", "a.>"]},
    {"subjects": [""]},
    {"sealed": True},
    {"allow_rollup_hdrs": True, "deny_purge": True},
    {"compression": "s2"},
    {"compression": "zstd"},
    {"first_seq": 10},
    {"allow_msg_ttl": True, "subject_delete_marker_ttl": 500_000_000},
    {"allow_msg_counter": True, "discard": "new"},
    {"allow_atomic": True},
    {"allow_msg_schedules": True},
    {"persist_mode": "async"},
    {"persist_mode": "bad"},
    {"retention": "bad"},
    {"placement": {"tags": ["x"]}},
    {"placement": {"cluster": "other"}},
    {"max_msgs": -7},
    {"num_replicas": 3},
    {"allow_msg_ttl": True, "subject_delete_marker_ttl": S},
]


async def _stream_configs(url: str) -> list[Any]:
    nc = await nats.connect(url)
    out = []
    try:
        for i, config in enumerate(STREAM_CONFIGS):
            body = {"name": f"SC{i}", "subjects": [f"sc{i}.>"], **config}
            reply = json.loads((await nc.request(f"$JS.API.STREAM.CREATE.SC{i}", json.dumps(body).encode(), timeout=10)).data)
            out.append({k: v for k, v in reply.items() if k not in VOLATILE})
            if "config" in reply:
                out[-1]["state"] = {k: v for k, v in reply["state"].items() if k not in VOLATILE}
    finally:
        await nc.close()
    return out


async def test_stream_configs_answered_as_a_standalone_nats_server_answers_them(
    clusters: dict[str, JetStreamTarget],
) -> None:
    theirs = await _stream_configs(clusters["nats-server"].urls[0])
    ours = await _stream_configs(clusters["jetraft"].urls[0])
    assert ours == theirs
    # the API level each needs (_nats.req.level): TTLs 1; atomic batches, schedules, async persistence 2
    levels = {i: theirs[i]["config"]["metadata"]["_nats.req.level"] for i in (22, 13, 14, 15)}
    assert levels == {22: "1", 13: "2", 14: "2", 15: "2"}
    # placement places nothing on one server: accepted and kept as asked
    assert (theirs[18]["config"]["placement"], theirs[19]["config"]["placement"]) == ({"tags": ["x"]}, {"cluster": "other"})
