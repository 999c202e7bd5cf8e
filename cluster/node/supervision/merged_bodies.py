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
