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
