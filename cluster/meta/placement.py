"""Choosing which nodes host a stream's replicas.

The meta leader decides and writes the chosen peers into the replicated
assignment, so placement need not be deterministic across nodes; it is
anyway (ties broken by name) so that tests and operators can predict it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

MIRROR_TAG = "mirror"


class PlacementError(Exception):
    """No set of nodes satisfies the request (JetStream err_code 10005)."""


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    tags: frozenset[str] = field(default_factory=frozenset)
    online: bool = True


def choose_peers(
    replicas: int,
    nodes: Iterable[NodeInfo],
    load: Mapping[str, int],
    required_tags: Iterable[str] = (),
    is_mirror: bool = False,
    exclude: Iterable[str] = (),
    first_in: Mapping[str, int] | None = None,
) -> list[str]:
    """Pick `replicas` online nodes carrying every required tag, least loaded first.

    Nodes tagged `mirror` are reserved for mirror streams: a mirror goes there
    when enough of them exist, and other streams avoid them unless the
    placement asks for the tag explicitly.

    The chosen nodes come back ordered by `first_in` (how many streams already
    list each node first), fewest first: a new group's first peer stands for
    election at once, so this spreads stream leaders over the nodes, as
    nats-server's are. Ordering by load alone put every R3 stream of a 3-node
    cluster first on n1 (all nodes carry the same load there).
    """
    if replicas < 1:
        raise PlacementError("replicas must be at least 1")
    wanted = frozenset(required_tags)
    excluded = frozenset(exclude)
    candidates = [n for n in nodes if n.online and n.name not in excluded and wanted <= n.tags]
    if is_mirror:
        mirror_nodes = [n for n in candidates if MIRROR_TAG in n.tags]
        if len(mirror_nodes) >= replicas:
            candidates = mirror_nodes
    elif MIRROR_TAG not in wanted:
        candidates = [n for n in candidates if MIRROR_TAG not in n.tags]
    if len(candidates) < replicas:
        raise PlacementError("no suitable peers for placement")
    candidates.sort(key=lambda n: (load.get(n.name, 0), n.name))
    chosen = [n.name for n in candidates[:replicas]]
    firsts = first_in or {}
    chosen.sort(key=lambda name: (firsts.get(name, 0), load.get(name, 0), name))
    return chosen


def known_nodes(
    members: Iterable[str], me: str, my_tags: Iterable[str], peer_labels: Callable[[str], Sequence[str] | None]
) -> list[NodeInfo]:
    """Every member as placement sees it: this node with its own tags, each peer whose route is up
    with the tags it announced in its route hello (`peer_labels`), and a peer without a route as
    offline. Nothing is asked of the peers, so a loaded or lagging link cannot make a live node
    look absent."""
    nodes = []
    for member in members:
        if member == me:
            nodes.append(NodeInfo(member, frozenset(my_tags)))
            continue
        labels = peer_labels(member)
        nodes.append(NodeInfo(member, frozenset(labels or ()), online=labels is not None))
    return nodes
