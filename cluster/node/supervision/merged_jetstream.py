"""A several-worker node's JetStream as one server's: /jsz and /varz's `jetstream` object merged
from its workers' (pure functions over their JSON bodies).

Usage is summed; each stream's and consumer's details come from the one worker holding its
replica (never two replicas of a group on one node); the meta group is seen from the node's voter,
worker 0, with member names made node names, as a one-worker node shows it.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from cluster.node.http_server import QueryError
from cluster.node.supervision.merged_bodies import Bodies, NodeIdentity, first_copy, in_worker_order, summed
from cluster.runtime.workers import node_of

_USAGE = ("memory", "storage", "reserved_memory", "reserved_storage")


def merged_meta(node: NodeIdentity, metas: Sequence[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The meta group from the node's view (`metas` in worker order; worker 0 is its voter): the
    leader and the other voters named by node, this node as `peer`."""
    known = [meta for meta in metas if meta is not None]
    if not known:
        return None
    out = copy.deepcopy(known[0])
    if out.get("leader"):
        out["leader"] = node_of(out["leader"])
    out["peer"] = node.name
    replicas: dict[str, dict[str, Any]] = {}
    for replica in out.pop("replicas", None) or ():
        name = node_of(replica["name"])
        if name != node.name and name not in replicas:
            replicas[name] = {**replica, "name": name, "peer": name}
    if replicas:
        # before the counters, as a one-worker node writes them
        ordered = {}
        for key, value in out.items():
            if key == "cluster_size":
                ordered["replicas"] = list(replicas.values())
            ordered[key] = value
        out = ordered
    return out


def merged_stats(stats: Sequence[dict[str, Any]], metas: Sequence[dict[str, Any] | None]) -> dict[str, Any]:
    """JetStream usage summed over the workers. Every worker counts the meta group among its HA
    assets (the learners too); the node holds it once."""
    out = copy.deepcopy(stats[0])
    for key in _USAGE:
        if key in out:
            out[key] = sum(s.get(key, 0) for s in stats)
    out["accounts"] = max(s.get("accounts", 0) for s in stats)
    counting_meta = sum(1 for meta in metas if meta is not None and meta.get("cluster_size", 0) > 1)
    out["ha_assets"] = sum(s.get("ha_assets", 0) for s in stats) - max(counting_meta - 1, 0)
    out["api"] = {
        **stats[0].get("api", {}),
        "total": sum(s.get("api", {}).get("total", 0) for s in stats),
        "errors": sum(s.get("api", {}).get("errors", 0) for s in stats),
    }
    return out


def merged_varz_jetstream(node: NodeIdentity, jetstreams: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """/varz's `jetstream` object of the node, from each worker's (in worker order)."""
    out = copy.deepcopy(jetstreams[0])
    metas = [js.get("meta") for js in jetstreams]
    out["config"] = {**out.get("config", {}), "store_dir": node.store_dir}
    out["stats"] = merged_stats([js.get("stats", {}) for js in jetstreams], metas)
    meta = merged_meta(node, metas)
    if meta is not None:
        out["meta"] = meta
    return out


def _merged_accounts(details: Sequence[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each account once: usage summed, its streams from every worker that holds them, by name."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for worker_details in details:
        for account in worker_details:
            by_name.setdefault(account["name"], []).append(account)
    merged = []
    for name in sorted(by_name):
        accounts = by_name[name]
        out = copy.deepcopy(accounts[0])
        out["memory"] = sum(a.get("memory", 0) for a in accounts)
        out["storage"] = sum(a.get("storage", 0) for a in accounts)
        # the account's API answers from every node (as ACCOUNT INFO): each worker asks the same totals
        out["api"] = max((a.get("api", {}) for a in accounts), key=lambda api: api.get("total", 0))
        if any("stream_detail" in a for a in accounts):
            streams = [stream for a in accounts for stream in a.get("stream_detail", ())]
            out["stream_detail"] = sorted(streams, key=lambda stream: stream["name"])
        merged.append(out)
    return merged


def merged_jsz(node: NodeIdentity, bodies: Bodies, leader_only: bool, now: str) -> dict[str, Any]:
    """/jsz for the node. `leader_only`: nats-server's 400 unless this node leads the meta group
    (asked of the workers without it: their learners never lead)."""
    ordered = in_worker_order(bodies)
    metas = [body.get("meta_cluster") for body in ordered]
    meta = merged_meta(node, metas)
    if leader_only and node.peers and (meta is None or meta.get("leader") != node.name):
        raise QueryError("filtered response: not leader")
    out = first_copy(bodies)
    out.update(merged_stats(ordered, metas))
    out["server_id"] = node.server_id
    out["now"] = now
    out["config"] = {**out.get("config", {}), "store_dir": node.store_dir}
    for key in ("streams", "consumers", "messages", "bytes"):
        out[key] = summed([body.get(key, 0) for body in ordered])
    if meta is not None:
        out["meta_cluster"] = meta
    if "account_details" in out:  # every worker was asked the same query
        out["account_details"] = _merged_accounts([body.get("account_details", []) for body in ordered])
    out["total"] = max(body.get("total", 0) for body in ordered)
    return out
