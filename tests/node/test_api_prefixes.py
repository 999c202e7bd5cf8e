"""ADR-19: nats-py with a JetStream domain reaches the same streams and KV buckets. (An imported API prefix is
an account's import, `accounts { ... }`: tests/node/test_accounts.py.)"""

from __future__ import annotations

from collections.abc import Iterator

import nats
import pytest

from cluster.api.prefixes import map_subject
from local.cluster import LocalCluster
from tests.node.cluster_fixtures import every_replica_applied, local_cluster


def test_prefix_mapping() -> None:
    assert map_subject("$JS.hub.API", "$JS.hub.API.STREAM.INFO.S") == "$JS.API.STREAM.INFO.S"
    assert map_subject("$JS.hub.API", "$JS.hub.API.$KV.b.k") == "$KV.b.k"
    assert map_subject("JS.acc1", "JS.acc1.$OBJ.b.x") == "$OBJ.b.x"
    assert map_subject("JS.acc1", "JS.acc2.STREAM.INFO.S") is None
    assert map_subject("JS.acc1", "JS.acc1") is None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    args = ["--domain", "hub"]
    with local_cluster(tmp_path_factory.mktemp("prefixes"), extra_args=args) as running:
        yield running


async def test_domain_clients(cluster: LocalCluster) -> None:
    nc = await nats.connect(cluster.client_urls[2])
    hub = nc.jetstream(domain="hub")
    await hub.add_stream(name="DOM", subjects=["dom.>"], num_replicas=3, allow_direct=True)
    ack = await hub.publish("dom.a", b"one")
    assert (ack.stream, ack.seq, ack.domain) == ("DOM", 1, "hub")
    await every_replica_applied(nc, "DOM", "dom.a", 1)
    assert (await hub.get_msg("DOM", seq=1, direct=True)).data == b"one"
    assert (await hub.get_msg("DOM", seq=1)).data == b"one"

    # the local API still works, and sees the same stream
    local = nc.jetstream()
    assert (await local.stream_info("DOM")).config.name == "DOM"
    info = await local.account_info()
    assert info.domain == "hub"

    kv = await hub.create_key_value(bucket="domkv", replicas=3)
    revision = await kv.put("k", b"v1")
    await every_replica_applied(nc, "KV_domkv", "$KV.domkv.k", revision)
    assert (await kv.get("k")).value == b"v1"
    local_kv = await local.key_value("domkv")
    assert (await local_kv.get("k")).value == b"v1"
    await local.delete_stream("DOM")
    await local.delete_key_value("domkv")
    await nc.close()
