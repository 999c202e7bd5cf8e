"""A several-worker node's monitoring bodies merged from its workers' (pure functions, no processes):
the node's identity, counters summed, lists paged after the merge, routes per peer node, the meta
group seen by node, JetStream usage summed with each stream from the worker holding it."""

from __future__ import annotations

from typing import Any

import pytest

from cluster.node.http_server import QueryError
from cluster.node.supervision.merged_bodies import (
    UNANSWERED_KEY,
    WORKER_INTEREST_KEY,
    NodeIdentity,
    node_subscriptions,
    with_unanswered,
)
from cluster.node.supervision.merged_jetstream import merged_jsz, merged_meta
from cluster.node.supervision.merged_lists import merged_connz, merged_subsz
from cluster.node.supervision.merged_monitoring import (
    merged_accountz,
    merged_accstatz,
    merged_routez,
    merged_varz,
)
from storage.nats_time import format_rfc3339_nano

NODE = NodeIdentity(
    name="n1",
    server_id="NODEID",
    http_port=8222,
    cluster_port=6222,
    peers={"n2": "10.0.0.2:6222", "n3": "10.0.0.3:6222"},
    store_dir="/data/n1",
    started_ns=1_700_000_000_000_000_000,
)
NOW = "2026-11-26T14:00:00Z"


def connection(cid: int, start_s: int, in_msgs: int = 0, subs: int = 0) -> dict[str, Any]:
    stamp = format_rfc3339_nano(start_s * 1_000_000_000)
    return {
        "cid": cid,
        "start": stamp,
        "last_activity": stamp,
        "subscriptions": subs,
        "pending_bytes": 0,
        "in_msgs": in_msgs,
        "out_msgs": 0,
        "in_bytes": 0,
        "out_bytes": 0,
    }


def connz(*connections: dict[str, Any]) -> dict[str, Any]:
    return {"server_id": "W", "total": len(connections), "connections": list(connections)}


def test_connz_concatenates_the_workers_then_sorts_and_pages() -> None:
    # worker 0 numbers 1, 3, 5; worker 1 numbers 2, 4
    bodies = {
        "n1/w0": connz(connection(1, 100, in_msgs=5), connection(3, 50), connection(5, 300, in_msgs=9)),
        "n1/w1": connz(connection(2, 200, in_msgs=7), connection(4, 10)),
    }
    body = merged_connz(NODE, bodies, 0, 1024, "cid", NOW)
    assert [c["cid"] for c in body["connections"]] == [1, 2, 3, 4, 5]
    assert (body["server_id"], body["total"], body["num_connections"]) == ("NODEID", 5, 5)
    page = merged_connz(NODE, bodies, 1, 2, "cid", NOW)
    assert [c["cid"] for c in page["connections"]] == [2, 3]
    assert (page["total"], page["num_connections"], page["offset"], page["limit"]) == (5, 2, 1, 2)
    by_start = merged_connz(NODE, bodies, 0, 1024, "start", NOW)
    assert [c["cid"] for c in by_start["connections"]] == [4, 3, 1, 2, 5]
    by_msgs = merged_connz(NODE, bodies, 0, 2, "msgs_from", NOW)
    assert [c["cid"] for c in by_msgs["connections"]] == [5, 2]
    # ties keep cid order, as one server's stable sort does
    by_subs = merged_connz(NODE, bodies, 0, 1024, "subs", NOW)
    assert [c["cid"] for c in by_subs["connections"]] == [1, 2, 3, 4, 5]


def test_subsz_sums_the_indexes_and_pages_the_listed_subscriptions_in_cid_order() -> None:
    def subsz(matches: int, hit_rate: float, cids: list[int]) -> dict[str, Any]:
        listed = [{"subject": f"s.{cid}", "sid": "1", "cid": cid} for cid in cids]
        return {
            "num_subscriptions": 10,
            "num_cache": 2,
            "num_inserts": 12,
            "num_removes": 2,
            "num_matches": matches,
            "cache_hit_rate": hit_rate,
            "max_fanout": 0,
            "avg_fanout": 0.0,
            "total": len(listed),
            "subscriptions_list": listed,
        }

    bodies = {"n1/w1": subsz(30, 0.0, [2, 4]), "n1/w0": subsz(10, 1.0, [1, 3])}
    body = merged_subsz(NODE, bodies, 1, 2, True, NOW)
    assert (body["num_subscriptions"], body["num_matches"], body["num_inserts"]) == (20, 40, 24)
    assert body["cache_hit_rate"] == pytest.approx(0.25)  # 10 hits in 40 matches
    assert body["total"] == 4 and [s["cid"] for s in body["subscriptions_list"]] == [2, 3]
    assert "subscriptions_list" not in merged_subsz(NODE, bodies, 0, 1024, False, NOW)


def route(peer: str, in_msgs: int, out_msgs: int, interest: int = 0) -> dict[str, Any]:
    return {
        "rid": 1,
        "remote_id": peer,
        "remote_name": peer,
        "ip": "127.0.0.1",
        "port": 1,
        "rtt": "1ms",
        "pending_size": 0,
        "in_msgs": in_msgs,
        "out_msgs": out_msgs,
        "in_bytes": 0,
        "out_bytes": 0,
        "subscriptions": interest,
    }


ROUTEZ = {
    "n1/w0": {"routes": [route("n1/w1", 100, 100, 4), route("n2/w0", 1, 2, 3), route("n2/w1", 3, 4, 5)]},
    "n1/w1": {"routes": [route("n1/w0", 100, 100, 4), route("n2/w0", 10, 20, 3), route("n2/w1", 30, 40, 5)]},
}


def test_routez_is_one_route_per_peer_node_without_the_sibling_links() -> None:
    body = merged_routez(NODE, ROUTEZ, NOW)
    assert (body["server_name"], body["num_routes"]) == ("n1", 1)
    (only,) = body["routes"]
    assert (only["remote_name"], only["ip"], only["port"]) == ("n2", "10.0.0.2", 6222)
    assert (only["in_msgs"], only["out_msgs"]) == (44, 66)
    # n2's two workers' interest, each heard by both of n1's workers, counted once
    assert only["subscriptions"] == 8


def test_varz_is_the_nodes_identity_with_the_workers_counters_summed() -> None:
    def varz(worker: int, connections: int, client_in: int, route_in: int) -> dict[str, Any]:
        return {
            "server_id": f"W{worker}",
            "server_name": f"n1/w{worker}",
            "port": 4222,
            "http_port": 40000 + worker,
            "cluster": {"name": "jetraft", "cluster_port": 6222 + worker, "urls": ["x"]},
            "connections": connections,
            "in_msgs": client_in + route_in,
            "in_client_msgs": client_in,
            "out_msgs": 0,
            "out_client_msgs": 0,
            "cpu": 1.5,
            "routes": 3,
            "remotes": 3,
            "slow_consumer_stats": {"clients": worker, "routes": 0},
            "jetstream": {
                "config": {"store_dir": f"/data/n1/w{worker}"},
                "stats": {"memory": 1, "storage": 10, "accounts": 1, "ha_assets": 2, "api": {"total": 5, "errors": 1}},
                "meta": {"leader": "n2/w0", "peer": f"n1/w{worker}", "cluster_size": 3},
            },
        }

    bodies = {"n1/w0": varz(0, 2, 10, 105), "n1/w1": varz(1, 3, 20, 160)}
    body = merged_varz(NODE, bodies, ROUTEZ, {"/varz": 4}, NODE.started_ns + 61_000_000_000)
    assert (body["server_id"], body["server_name"], body["port"], body["http_port"]) == ("NODEID", "n1", 4222, 8222)
    assert body["cluster"]["cluster_port"] == 6222 and body["cluster"]["urls"] == ["10.0.0.2:6222", "10.0.0.3:6222"]
    assert body["connections"] == 5 and body["in_client_msgs"] == 30 and body["cpu"] == 3.0
    # route messages less the 200 the sibling links carried
    assert body["in_msgs"] == 30 + 265 - 200
    assert body["routes"] == body["remotes"] == 1
    assert body["slow_consumer_stats"] == {"clients": 1, "routes": 0}
    assert body["uptime"] == "1m1s" and body["http_req_stats"] == {"/varz": 4}
    js = body["jetstream"]
    assert js["config"]["store_dir"] == "/data/n1"
    # the meta group, which both workers count, is one HA asset of the node
    assert js["stats"] == {"memory": 2, "storage": 20, "accounts": 1, "ha_assets": 3, "api": {"total": 10, "errors": 2}}
    assert (js["meta"]["leader"], js["meta"]["peer"]) == ("n2", "n1")


def test_meta_group_is_named_by_node() -> None:
    voter = {
        "leader": "n1/w0",
        "peer": "n1/w0",
        "replicas": [{"name": "n2/w0", "current": True, "peer": "n2/w0"}, {"name": "n3/w0", "current": False, "peer": "n3/w0"}],
        "cluster_size": 3,
    }
    # a learner lists every voter, its own node's among them
    learner = {**voter, "peer": "n1/w1", "replicas": [*voter["replicas"], {"name": "n1/w0", "current": False, "peer": "n1/w0"}]}
    for metas in ([voter, learner], [None, learner]):
        meta = merged_meta(NODE, metas)
        assert meta is not None
        assert (meta["leader"], meta["peer"]) == ("n1", "n1")
        assert [r["name"] for r in meta["replicas"]] == ["n2", "n3"] and list(meta)[2] == "replicas"
    assert merged_meta(NODE, [None, None]) is None


def jsz(worker: int, streams: list[str], leader: str) -> dict[str, Any]:
    return {
        "memory": 0,
        "storage": 100 * len(streams),
        "reserved_memory": 0,
        "reserved_storage": 0,
        "accounts": 1,
        "ha_assets": 1 + len(streams),
        "api": {"level": 1, "total": 1, "errors": 0},
        "server_id": f"W{worker}",
        "config": {"store_dir": f"/data/n1/w{worker}"},
        "streams": len(streams),
        "consumers": len(streams),
        "messages": 3 * len(streams),
        "bytes": 100 * len(streams),
        "meta_cluster": {"leader": leader, "peer": f"n1/w{worker}", "cluster_size": 3},
        "account_details": [
            {
                "name": "$G",
                "memory": 0,
                "storage": 100 * len(streams),
                "api": {"total": 7, "errors": 0},
                "stream_detail": [{"name": name} for name in streams],
            }
        ],
        "total": 1,
    }


def test_jsz_sums_usage_and_takes_each_stream_from_the_worker_holding_it() -> None:
    bodies = {"n1/w0": jsz(0, ["ORDERS"], "n1/w0"), "n1/w1": jsz(1, ["B", "Z"], "n1/w0")}
    body = merged_jsz(NODE, bodies, False, NOW)
    assert (body["server_id"], body["streams"], body["consumers"], body["messages"]) == ("NODEID", 3, 3, 9)
    assert body["storage"] == 300 and body["ha_assets"] == 4 and body["config"]["store_dir"] == "/data/n1"
    (account,) = body["account_details"]
    assert [s["name"] for s in account["stream_detail"]] == ["B", "ORDERS", "Z"]
    assert account["storage"] == 300 and account["api"]["total"] == 7
    assert body["meta_cluster"]["leader"] == "n1" and body["total"] == 1
    assert merged_jsz(NODE, bodies, True, NOW)["streams"] == 3  # this node leads


def test_jsz_leader_only_refuses_where_another_node_leads() -> None:
    bodies = {"n1/w0": jsz(0, [], "n2/w0"), "n1/w1": jsz(1, [], "n2/w0")}
    with pytest.raises(QueryError, match="filtered response: not leader"):
        merged_jsz(NODE, bodies, True, NOW)


def test_accounts_sum_each_account_over_the_workers() -> None:
    def statz(name: str, conns: int, msgs: int) -> dict[str, Any]:
        flows = {"msgs": msgs, "bytes": 2 * msgs, "routes": {"msgs": 0, "bytes": 0}}
        return {"acc": name, "name": name, "conns": conns, "sent": flows, "received": flows, "slow_consumers": 0}

    bodies = {
        "n1/w0": {"server_id": "W0", "account_statz": [statz("$G", 1, 5)]},
        "n1/w1": {"server_id": "W1", "account_statz": [statz("A", 2, 1), statz("$G", 2, 7)]},
    }
    body = merged_accstatz(NODE, bodies, NOW)
    assert [(e["acc"], e["conns"], e["sent"]["msgs"], e["sent"]["bytes"]) for e in body["account_statz"]] == [
        ("$G", 3, 12, 24),
        ("A", 2, 1, 2),
    ]
    detail = {"account_name": "$G", "client_connections": 2, "subscriptions": 3, "jetstream_enabled": True}
    accountz = merged_accountz(
        NODE,
        {"n1/w0": {"server_id": "W0", "account_detail": detail}, "n1/w1": {"server_id": "W1", "account_detail": detail}},
        NOW,
    )
    assert accountz["server_id"] == "NODEID"
    assert (accountz["account_detail"]["client_connections"], accountz["account_detail"]["subscriptions"]) == (4, 6)


def test_a_worker_that_did_not_answer_is_named() -> None:
    assert with_unanswered({"a": 1}, ["n1/w2", "n1/w1"]) == {"a": 1, UNANSWERED_KEY: ["n1/w1", "n1/w2"]}
    assert with_unanswered({"a": 1}, []) == {"a": 1}


def test_the_nodes_subscriptions_count_each_subscription_and_each_other_nodes_interest_once() -> None:
    # worker 0: 20 of its own; it heard 7 entries from n2/w0 and 4 from n2/w1; worker 1: 30 of its own,
    # and the same peers' interest, of which it has heard only 6 of n2/w0's so far
    w0 = {"own": 20, "peers": {"n2/w0": 7, "n2/w1": 4}}
    w1 = {"own": 30, "peers": {"n2/w0": 6, "n2/w1": 4}}
    assert node_subscriptions([w0, w1]) == 20 + 30 + 7 + 4

    def varz(worker: int, total: int, breakdown: dict[str, Any] | None) -> dict[str, Any]:
        body: dict[str, Any] = {"server_name": f"n1/w{worker}", "subscriptions": total, "in_msgs": 0, "out_msgs": 0}
        if breakdown is not None:
            body[WORKER_INTEREST_KEY] = breakdown
        return body

    # each worker's index also holds its sibling's 5 and 8 entries, which the breakdown leaves out
    bodies = {"n1/w0": varz(0, 20 + 11 + 8, w0), "n1/w1": varz(1, 30 + 10 + 5, w1)}
    body = merged_varz(NODE, bodies, ROUTEZ, {}, NODE.started_ns)
    assert body["subscriptions"] == 61 and WORKER_INTEREST_KEY not in body
    stats = {"num_subscriptions": 39, "num_matches": 0, WORKER_INTEREST_KEY: w0}
    subsz = merged_subsz(NODE, {"n1/w0": stats, "n1/w1": {**stats, "num_subscriptions": 45, WORKER_INTEREST_KEY: w1}}, 0, 10, False, NOW)
    assert subsz["num_subscriptions"] == 61 and WORKER_INTEREST_KEY not in subsz
    # a worker without the breakdown (an older one): the counts summed, as before
    assert merged_varz(NODE, {**bodies, "n1/w1": varz(1, 45, None)}, ROUTEZ, {}, NODE.started_ns)["subscriptions"] == 84
