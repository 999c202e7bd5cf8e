"""A several-worker node's /connz and /subsz: every worker's list concatenated, then sorted and paged
as one server pages its own (pure functions over the workers' JSON bodies).

Each worker is asked for its first `offset + limit` entries in the requested order, which hold the
node's page whatever the others have; the totals are the workers' summed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cluster.node.supervision.merged_bodies import (
    WORKER_INTEREST_KEY,
    Bodies,
    NodeIdentity,
    in_worker_order,
    merged_subscriptions,
)
from storage.nats_time import parse_rfc3339_nano


def _started(connection: dict[str, Any]) -> int:
    return parse_rfc3339_nano(connection["start"])


def _last_activity(connection: dict[str, Any]) -> int:
    return parse_rfc3339_nano(connection["last_activity"])


# connz's sort options over a connection's JSON, each as cluster/node/monitoring.py orders clients
CONNZ_SORTS: dict[str, tuple[Callable[[dict[str, Any]], Any], bool]] = {
    "cid": (lambda c: c["cid"], False),
    "start": (_started, False),
    "subs": (lambda c: c["subscriptions"], True),
    "pending": (lambda c: c["pending_bytes"], True),
    "msgs_to": (lambda c: c["out_msgs"], True),
    "msgs_from": (lambda c: c["in_msgs"], True),
    "bytes_to": (lambda c: c["out_bytes"], True),
    "bytes_from": (lambda c: c["in_bytes"], True),
    "last": (_last_activity, True),
    "idle": (lambda c: -_last_activity(c), True),
    "uptime": (lambda c: -_started(c), True),
}


def merged_connz(
    node: NodeIdentity, bodies: Bodies, offset: int, limit: int, sort: str, now: str
) -> dict[str, Any]:
    """One page of every worker's connections. Ties keep cid order, as one server's stable sort of
    its clients (held in cid order) keeps them."""
    key, descending = CONNZ_SORTS[sort]
    ordered = in_worker_order(bodies)
    connections = sorted((c for body in ordered for c in body.get("connections", ())), key=lambda c: c["cid"])
    connections.sort(key=key, reverse=descending)
    page = connections[offset : offset + limit]
    return {
        "server_id": node.server_id,
        "now": now,
        "num_connections": len(page),
        "total": sum(body.get("total", 0) for body in ordered),
        "offset": offset,
        "limit": limit,
        "connections": page,
    }


def merged_sublist_stats(stats: list[dict[str, Any]]) -> dict[str, Any]:
    """The workers' subscription indexes' counts added up; rates weighted by each one's matches.
    `num_subscriptions` counts each subscription and each other node's interest once (merged_bodies.
    node_subscriptions); the other counts are of the workers' index operations, which are each worker's."""
    matches = sum(s.get("num_matches", 0) for s in stats)
    out = dict(stats[0])
    out.pop(WORKER_INTEREST_KEY, None)
    for key in ("num_cache", "num_inserts", "num_removes", "num_matches"):
        out[key] = sum(s.get(key, 0) for s in stats)
    out["num_subscriptions"] = merged_subscriptions(stats, "num_subscriptions")
    for key in ("cache_hit_rate", "avg_fanout"):
        weighted = sum(s.get(key, 0.0) * s.get("num_matches", 0) for s in stats)
        out[key] = weighted / matches if matches else 0.0
    out["max_fanout"] = max(s.get("max_fanout", 0) for s in stats)
    return out


_SUBLIST_KEYS = (
    "num_subscriptions",
    "num_cache",
    "num_inserts",
    "num_removes",
    "num_matches",
    "cache_hit_rate",
    "max_fanout",
    "avg_fanout",
)


def merged_subsz(
    node: NodeIdentity, bodies: Bodies, offset: int, limit: int, with_subs: bool, now: str
) -> dict[str, Any]:
    """/subsz of the node: the indexes' counts summed and, asked for, one page of every worker's
    subscriptions in cid order (each worker lists its own in cid order)."""
    ordered = in_worker_order(bodies)
    stats = merged_sublist_stats(
        [{key: body[key] for key in (*_SUBLIST_KEYS, WORKER_INTEREST_KEY) if key in body} for body in ordered]
    )
    out: dict[str, Any] = {
        "server_id": node.server_id,
        "now": now,
        **stats,
        "total": 0,
        "offset": offset,
        "limit": limit,
    }
    if with_subs:
        listed = sorted((s for body in ordered for s in body.get("subscriptions_list", ())), key=lambda s: s["cid"])
        out["total"] = sum(body.get("total", 0) for body in ordered)
        out["subscriptions_list"] = listed[offset : offset + limit]
    return out
