"""A several-worker node's /varz, /routez, /accountz, /accstatz, /gatewayz and /leafz, merged from
its workers' (pure functions over their JSON bodies; /jsz in merged_jetstream.py, /connz and /subsz
in merged_lists.py).

The node answers as one server: its own name and id, its ports, counters summed over the workers.
Its routes are its links to the other nodes, one per peer node as a one-worker node has: the links
between sibling workers are the node's insides, and their messages are not route traffic.
"""

from __future__ import annotations

import copy
from typing import Any

from cluster.node.go_format import uptime_string
from cluster.node.supervision.merged_bodies import (
    WORKER_INTEREST_KEY,
    Bodies,
    NodeIdentity,
    first_copy,
    in_worker_order,
    merged_subscriptions,
    sum_key,
    summed,
)
from cluster.node.supervision.merged_jetstream import merged_varz_jetstream
from cluster.node.supervision.merged_lists import merged_sublist_stats
from cluster.runtime.workers import node_of
from storage.nats_time import format_rfc3339_nano

# /varz counters that are the workers' added up (in_msgs and out_msgs less the sibling links')
_VARZ_SUMS = (
    "mem",
    "connections",
    "total_connections",
    "leafnodes",
    "in_bytes",
    "in_client_msgs",
    "in_client_bytes",
    "out_bytes",
    "out_client_msgs",
    "out_client_bytes",
    "slow_consumers",
    "stale_connections",
    "stalled_clients",
    "slow_consumer_stats",
    "stale_connection_stats",
    "disk_io_wait_stats",
)


def node_routes(node: NodeIdentity, routez: Bodies) -> list[dict[str, Any]]:
    """One route per peer node any worker reaches: the links of every worker to its workers, their
    traffic summed; its interest once per peer worker (every worker of this node hears the same)."""
    links: dict[str, list[dict[str, Any]]] = {}
    for body in in_worker_order(routez):
        for route in body.get("routes", ()):
            peer = node_of(route["remote_name"])
            if peer != node.name:
                links.setdefault(peer, []).append(route)
    routes = []
    for rid, peer in enumerate(sorted(links), start=1):
        peer_links = links[peer]
        route = copy.deepcopy(peer_links[0])
        interest: dict[str, int] = {}
        for link in peer_links:
            name = link["remote_name"]
            interest[name] = max(interest.get(name, 0), link.get("subscriptions", 0))
        host, _, port = node.peers.get(peer, "").rpartition(":")
        route.update(
            rid=rid,
            remote_id=peer,
            remote_name=peer,
            ip=host,
            port=int(port) if port.isdigit() else 0,
            subscriptions=sum(interest.values()),
        )
        for key in ("pending_size", "in_msgs", "out_msgs", "in_bytes", "out_bytes"):
            route[key] = sum(link.get(key, 0) for link in peer_links)
        routes.append(route)
    return routes


def sibling_traffic(node: NodeIdentity, routez: Bodies) -> tuple[int, int]:
    """(received, sent) messages on the links between this node's own workers."""
    siblings = [
        route
        for body in routez.values()
        for route in body.get("routes", ())
        if node_of(route["remote_name"]) == node.name
    ]
    return sum(r.get("in_msgs", 0) for r in siblings), sum(r.get("out_msgs", 0) for r in siblings)


def merged_routez(node: NodeIdentity, routez: Bodies, now: str) -> dict[str, Any]:
    routes = node_routes(node, routez)
    return {
        "server_id": node.server_id,
        "server_name": node.name,
        "now": now,
        "num_routes": len(routes),
        "routes": routes,
    }


def merged_varz(
    node: NodeIdentity, varz: Bodies, routez: Bodies, http_req_stats: dict[str, int], now_ns: int
) -> dict[str, Any]:
    """/varz of the node: the lowest answering worker's settings with the node's identity, ports and
    start, the counters summed, routes counted by peer node."""
    ordered = in_worker_order(varz)
    out = first_copy(varz)
    started = format_rfc3339_nano(node.started_ns)
    out.update(
        server_id=node.server_id,
        server_name=node.name,
        http_port=node.http_port,
        start=started,
        now=format_rfc3339_nano(now_ns),
        uptime=uptime_string((now_ns - node.started_ns) / 1e9),
        config_load_time=started,
        http_req_stats=dict(http_req_stats),
    )
    if out.get("cluster"):
        out["cluster"] = {**out["cluster"], "cluster_port": node.cluster_port, "urls": sorted(node.peers.values())}
    for key in _VARZ_SUMS:
        if key in out:
            out[key] = sum_key(ordered, key)
    out["cpu"] = round(sum(body.get("cpu", 0.0) for body in ordered), 2)
    out.pop(WORKER_INTEREST_KEY, None)
    if "subscriptions" in out:
        out["subscriptions"] = merged_subscriptions(ordered, "subscriptions")
    sibling_in, sibling_out = sibling_traffic(node, routez)
    out["in_msgs"] = sum(body.get("in_msgs", 0) for body in ordered) - sibling_in
    out["out_msgs"] = sum(body.get("out_msgs", 0) for body in ordered) - sibling_out
    out["routes"] = out["remotes"] = len(node_routes(node, routez))
    if "jetstream" in out:
        out["jetstream"] = merged_varz_jetstream(node, [body["jetstream"] for body in ordered])
    return out


def merged_accountz(node: NodeIdentity, bodies: Bodies, now: str) -> dict[str, Any]:
    """/accountz: the accounts every worker lists; one account's detail with its clients and
    subscriptions summed over the workers."""
    ordered = in_worker_order(bodies)
    out = first_copy(bodies)
    out.update(server_id=node.server_id, now=now)
    if "accounts" in out:
        out["accounts"] = sorted({name for body in ordered for name in body.get("accounts", ())})
    details = [body["account_detail"] for body in ordered if "account_detail" in body]
    if details:
        detail = out["account_detail"] = copy.deepcopy(details[0])
        detail["client_connections"] = sum(d.get("client_connections", 0) for d in details)
        detail["subscriptions"] = sum(d.get("subscriptions", 0) for d in details)
        if "sublist_stats" in detail:
            detail["sublist_stats"] = merged_sublist_stats([d["sublist_stats"] for d in details if "sublist_stats" in d])
    return out


def merged_accstatz(node: NodeIdentity, bodies: Bodies, now: str) -> dict[str, Any]:
    """/accstatz: each account once, its traffic summed over the workers that list it, by name."""
    by_account: dict[str, list[dict[str, Any]]] = {}
    for body in in_worker_order(bodies):
        for entry in body.get("account_statz", ()):
            by_account.setdefault(entry["acc"], []).append(entry)
    return {
        "server_id": node.server_id,
        "now": now,
        "account_statz": [summed(by_account[name]) for name in sorted(by_account)],
    }


def merged_gatewayz(node: NodeIdentity, bodies: Bodies, now: str) -> dict[str, Any]:
    """jetraft has no gateways: nats-server's answer without any, as the node's."""
    out = first_copy(bodies)
    out.update(server_id=node.server_id, now=now)
    return out


def merged_leafz(node: NodeIdentity, bodies: Bodies, now: str) -> dict[str, Any]:
    """jetraft has no leaf nodes: nats-server's answer without any, as the node's."""
    ordered = in_worker_order(bodies)
    out = first_copy(bodies)
    out.update(
        server_id=node.server_id,
        now=now,
        leafnodes=sum(body.get("leafnodes", 0) for body in ordered),
        leafs=[leaf for body in ordered for leaf in body.get("leafs", ())],
    )
    return out
