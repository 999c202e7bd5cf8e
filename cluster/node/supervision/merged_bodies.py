"""What the merges of a several-worker node's monitoring bodies share: the node's identity, the
order of its workers, and sums over JSON bodies (pure functions; cluster/node/supervision/supervisor_http.py
asks the workers and answers)."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cluster.runtime.workers import worker_index

# jetraft's own key, present only when a worker did not answer: the body is the others' alone
UNANSWERED_KEY = "unanswered_workers"
# A worker's own key in its /varz and sublist stats, for its supervisor only (never in a merged body):
# its subscription index's entries as {"own": its clients' and its services' subscriptions, "peers":
# {member of another node: the entries that member's interest takes}}; its sibling workers' interest
# is left out.
WORKER_INTEREST_KEY = "jetraft_worker_interest"


@dataclass(frozen=True, slots=True)
class NodeIdentity:
    """Who a several-worker node is, as its merged bodies name it (never one worker's figures)."""

    name: str
    server_id: str
    http_port: int
    cluster_port: int
    # the other nodes, by name, with the cluster address given for each (`--peer`)
    peers: Mapping[str, str]
    store_dir: str
    started_ns: int


Bodies = Mapping[str, dict[str, Any]]


def in_worker_order(bodies: Bodies) -> list[dict[str, Any]]:
    """The workers' bodies, worker 0's first (the meta voter, whose view of the node is the node's)."""
    return [bodies[name] for name in sorted(bodies, key=worker_index)]


def first_copy(bodies: Bodies) -> dict[str, Any]:
    """A deep copy of the lowest worker's body, the base a merge overwrites."""
    return copy.deepcopy(in_worker_order(bodies)[0])


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def summed(values: Sequence[Any]) -> Any:
    """Several workers' values of one key added up: numbers summed, objects key by key, anything
    else (strings, lists, booleans) the first worker's."""
    first = values[0]
    if is_number(first):
        return sum(v for v in values if is_number(v))
    if isinstance(first, dict):
        out: dict[str, Any] = {}
        for value in values:
            if not isinstance(value, dict):
                continue
            for key in value:
                if key not in out:
                    out[key] = summed([v[key] for v in values if isinstance(v, dict) and key in v])
        return out
    return copy.deepcopy(first)


def sum_key(bodies: Iterable[dict[str, Any]], key: str) -> Any:
    return summed([body[key] for body in bodies if key in body])


def with_unanswered(body: dict[str, Any], unanswered: Sequence[str]) -> dict[str, Any]:
    """Names the workers left out of `body`; a tool decoding nats-server's struct ignores the key."""
    if unanswered:
        body[UNANSWERED_KEY] = sorted(unanswered, key=worker_index)
    return body


def node_subscriptions(breakdowns: Sequence[Mapping[str, Any]]) -> int:
    """The subscriptions of a node, from its workers' WORKER_INTEREST_KEY, counted as one server's index
    counts them: every subscription of the node's clients and services once (each is in one worker's
    index), and every interest another node told it of once, though each of its workers holds a copy
    (the largest copy, should one worker be behind: the same rule as /routez's). A worker's siblings'
    interest is not counted: it is the node's insides (their subscriptions are counted as theirs), as
    the links between them are not routes.

    What this cannot make one server's: each worker runs the node's services (the JetStream API entry,
    the `$SYS` responders, its internal inbox) for itself, and its index holds them, so they count once
    per worker (docs/monitoring.md)."""
    own = sum(int(breakdown.get("own", 0)) for breakdown in breakdowns)
    heard: dict[str, int] = {}
    for breakdown in breakdowns:
        for peer, entries in (breakdown.get("peers") or {}).items():
            heard[peer] = max(heard.get(peer, 0), int(entries))
    return own + sum(heard.values())


def merged_subscriptions(bodies: Iterable[Mapping[str, Any]], counted: str) -> int:
    """`counted` (a body's own subscription count) for the node: node_subscriptions where every body has
    its worker's breakdown, else (a worker of an older version) the counts summed."""
    listed = list(bodies)
    breakdowns = [body.get(WORKER_INTEREST_KEY) for body in listed]
    if listed and all(isinstance(breakdown, Mapping) for breakdown in breakdowns):
        return node_subscriptions([b for b in breakdowns if isinstance(b, Mapping)])
    return sum(int(body.get(counted, 0)) for body in listed)
