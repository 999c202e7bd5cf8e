"""The monitoring endpoints beside nats-server 2.15.1's: the same workload on a three-node cluster
of each, then every key nats-server's /varz, /connz, /subsz, /routez, /jsz and /healthz show must be
in jetraft's with the same JSON type (prometheus-nats-exporter and the nats CLI decode them into Go
structs), and jetraft's figures must be the workload's."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

from local.cluster import LocalCluster
from tests.node.cluster_fixtures import local_cluster, publish_when_served
from tests.pipeline.servers import NatsServerProcesses

ENDPOINTS = [
    "varz",
    "connz?subs=1",
    "connz?auth=true",
    "subsz?subs=1",
    "routez",
    "jsz?accounts=true&streams=true&consumers=true&config=true",
    "healthz",
    "healthz?js-enabled-only=true",
    "gatewayz",
    "leafz",
    "accountz",
    "accountz?acc=$G",
    "accstatz",
    "accstatz?unused=1",
]
# nats-server's own feature switches: nothing in jetraft they could name (an empty object here)
NO_MEANING = {"varz.feature_flags"}
# keys nats-server writes only in a configuration jetraft has no counterpart of: `account` names the
# account a route is pinned to (nats-server's per-account routes; jetraft has one link per peer)
ABSENT_HERE = {"routez.routes[].account"}
# lists nats-server fills with what jetraft has none of: the service imports that wire its JetStream
# API and $SYS requests into each account (jetraft answers them directly, in its one account)
EMPTY_HERE = {"accountz.account_detail.imports"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("monitoring")) as running:
        yield running


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServerProcesses]:
    with NatsServerProcesses(3, Path(tmp_path_factory.mktemp("reference"))) as processes:
        yield processes


def get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


def differences(ref: Any, ours: Any, path: str) -> list[str]:
    """Where `ours` lacks a key `ref` has, or holds another JSON type (lists: their first items)."""
    if path in NO_MEANING:
        return [] if kind(ours) == kind(ref) else [f"{path}: {kind(ours)} instead of {kind(ref)}"]
    if kind(ref) != kind(ours):
        return [f"{path}: {kind(ours)} instead of {kind(ref)}"]
    if isinstance(ref, dict):
        out = []
        for key, value in ref.items():
            if key not in ours:
                if f"{path}.{key}" in ABSENT_HERE:
                    continue
                out.append(f"{path}.{key}: missing")
            else:
                out.extend(differences(value, ours[key], f"{path}.{key}"))
        return out
    if isinstance(ref, list) and ref:
        if path in EMPTY_HERE and ours == []:
            return []
        if not ours:
            return [f"{path}: empty list where nats-server has items"]
        return differences(_merged(ref), _merged(ours), f"{path}[]")
    return []


def _merged(items: list[Any]) -> Any:
    """A list's items as one: objects merged (an optional key counts if any item has it)."""
    if not all(isinstance(item, dict) for item in items):
        return items[0]
    merged: dict[str, Any] = {}
    for item in items:
        for key, value in item.items():
            merged.setdefault(key, value)
    return merged


async def workload(url: str) -> nats.NATS:
    """One named client: an R3 stream with three messages and a durable, and a queue subscription."""
    nc = await nats.connect(url, name="monitored")
    # generous: a freshly started 3-node nats-server once took over 5 s (nats-py's default) for the R3
    # consumer on a loaded machine
    js = nc.jetstream(timeout=20)
    await js.add_stream(name="ORDERS", subjects=["orders.>"], num_replicas=3)
    for _ in range(3):
        await publish_when_served(js, "orders.new", b"hello")
    await js.add_consumer("ORDERS", durable_name="C1")
    await nc.subscribe("foo.*", queue="workers")
    await nc.flush()
    return nc


async def test_endpoints_have_nats_servers_shapes_and_real_figures(
    cluster: LocalCluster, reference: NatsServerProcesses
) -> None:
    ref_target = reference.target()
    ours_url, ours_http = cluster.specs[0].client_url, cluster.specs[0].http_url
    clients = [await workload(ref_target.urls[0]), await workload(ours_url)]
    try:
        found: list[str] = []
        bodies: dict[str, Any] = {}
        for endpoint in ENDPOINTS:
            ref_status, ref_body = get(f"{ref_target.monitor_urls[0]}/{endpoint}")
            status, body = get(f"{ours_http}/{endpoint}")
            assert status == ref_status == 200, (endpoint, status, body)
            bodies[endpoint] = body
            found.extend(differences(ref_body, body, endpoint.split("?")[0]))
        assert found == [], "\n".join(found)
    finally:
        for nc in clients:
            await nc.close()

    varz, connz = bodies["varz"], bodies["connz?subs=1"]
    jsz = bodies["jsz?accounts=true&streams=true&consumers=true&config=true"]
    assert varz["server_name"] == "n1" and varz["version"] == "2.15.1"
    assert varz["connections"] >= 1 and varz["routes"] == 2
    assert varz["jetstream"]["meta"]["cluster_size"] == 3
    ours = next(c for c in connz["connections"] if c.get("name") == "monitored")
    assert ours["in_msgs"] >= 3 and ours["subscriptions"] == 2 and "foo.*" in ours["subscriptions_list"]
    assert jsz["streams"] == 1 and jsz["consumers"] == 1 and jsz["messages"] == 3
    detail = jsz["account_details"][0]["stream_detail"][0]
    assert detail["name"] == "ORDERS" and detail["state"]["messages"] == 3
    assert detail["consumer_detail"][0]["name"] == "C1" and detail["consumer_detail"][0]["num_pending"] == 3
    assert jsz["meta_cluster"]["leader"] in {"n1", "n2", "n3"}
    assert bodies["routez"]["num_routes"] == 2
    (global_account,) = [a for a in bodies["accstatz?unused=1"]["account_statz"] if a["acc"] == "$G"]
    assert global_account["conns"] >= 1 and global_account["received"]["msgs"] >= 3
    assert bodies["accountz?acc=$G"]["account_detail"]["client_connections"] >= 1
    assert all(c["name_tag"] == "$G" for c in bodies["connz?auth=true"]["connections"])


async def test_healthz_answers_nats_servers_status(cluster: LocalCluster) -> None:
    status, body = get(f"{cluster.specs[1].http_url}/healthz?js-enabled-only=true")
    assert status == 200 and body["status"] == "ok"
    status, body = get(f"{cluster.specs[1].http_url}/healthz")
    assert status == 200 and body["status"] == "ok" and body["meta_leader"] in {"n1", "n2", "n3"}


def error_text(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, ""
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


async def test_bad_queries_get_nats_servers_400(cluster: LocalCluster, reference: NatsServerProcesses) -> None:
    ref_url = reference.target().monitor_urls[0]
    for endpoint in ("connz?sort=nonsense", "connz?limit=x", "jsz?streams=maybe", "accountz?acc=NOPE"):
        ours = error_text(f"{cluster.specs[0].http_url}/{endpoint}")
        assert ours == error_text(f"{ref_url}/{endpoint}") and ours[0] == 400, endpoint


async def test_jsz_leader_only_answers_on_the_meta_leader_alone(cluster: LocalCluster) -> None:
    leader = cluster.meta_leader()
    for spec in cluster.specs:
        status, text = error_text(f"{spec.http_url}/jsz?leader-only=true")
        if spec.name == leader:
            assert status == 200
        else:
            assert (status, text) == (400, "filtered response: not leader")
