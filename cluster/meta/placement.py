"""Choosing which nodes host a stream's replicas.

The meta leader decides and writes the chosen peers into the replicated
assignment, so placement need not be deterministic across nodes; it is
anyway (ties broken by name) so that tests and operators can predict it.

A peer is a cluster member: a node, or one worker of a node started with
`--workers N` (`cluster/runtime/workers.py`). Placement is host-aware: it
picks the nodes (machines) first, never two replicas on one, then on each the
worker with the fewest groups, so a machine's groups spread over its cores.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from cluster.runtime.server_limits import NO_SERVER_LIMITS, ServerJetStreamLimits, split_labels
from cluster.runtime.workers import node_of

MIRROR_TAG = "mirror"


class PlacementError(Exception):
    """No set of nodes satisfies the request (JetStream err_code 10005)."""


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    tags: frozenset[str] = field(default_factory=frozenset)
    online: bool = True
    # what its node's JetStream may hold (`jetstream { max_memory_store, max_file_store }`), as it announced
    limits: ServerJetStreamLimits = NO_SERVER_LIMITS

    @property
    def machine(self) -> str:
        """The node this member runs on (itself, for a single-worker node)."""
        return node_of(self.name)


def choose_peers(
    replicas: int,
    nodes: Iterable[NodeInfo],
    load: Mapping[str, int],
    required_tags: Iterable[str] = (),
    is_mirror: bool = False,
    exclude: Iterable[str] = (),
    first_in: Mapping[str, int] | None = None,
    without_room: Collection[str] = (),
) -> list[str]:
    """Pick `replicas` online members carrying every required tag, on as many different nodes,
    least loaded first; never on a node in `without_room` (one without room for the stream's max_bytes
    under its own limits: nats-server's "insufficient storage").

    Nodes tagged `mirror` are reserved for mirror streams: a mirror goes there
    when enough of them exist, and other streams avoid them unless the
    placement asks for the tag explicitly.

    A node's load is the sum of its workers' (its machine's share of the
    groups); on each chosen node the worker with the fewest groups gets the
    replica. With one worker per node, both are the node's own load.

    The chosen members come back ordered by `first_in` (how many streams already
    list each member first; a node's workers' counts summed first), fewest first:
    a new group's first peer stands for election at once, so this spreads stream
    leaders over the nodes and their workers, as nats-server's are. Ordering by
    load alone put every R3 stream of a 3-node cluster first on n1 (all nodes
    carry the same load there).
    """
    if replicas < 1:
        raise PlacementError("replicas must be at least 1")
    wanted = frozenset(required_tags)
    # a member excluded (a stream's current peers, when one is replaced) rules out its whole machine
    excluded = frozenset(node_of(member) for member in exclude)
    candidates = [n for n in nodes if n.online and n.machine not in excluded and wanted <= n.tags]
    if is_mirror:
        mirror_nodes = [n for n in candidates if MIRROR_TAG in n.tags]
        if len({n.machine for n in mirror_nodes}) >= replicas:
            candidates = mirror_nodes
    elif MIRROR_TAG not in wanted:
        candidates = [n for n in candidates if MIRROR_TAG not in n.tags]
    with_room = [n for n in candidates if n.machine not in without_room]
    by_machine: dict[str, list[NodeInfo]] = {}
    for candidate in with_room:
        by_machine.setdefault(candidate.machine, []).append(candidate)
    if len(by_machine) < replicas:
        reasons = ", insufficient storage" if len(with_room) < len(candidates) else ""
        raise PlacementError(f"no suitable peers for placement{reasons}")
    machine_load = _per_machine(load)
    machines = sorted(by_machine, key=lambda machine: (machine_load.get(machine, 0), machine))
    chosen = [
        min(by_machine[machine], key=lambda n: (load.get(n.name, 0), n.name)).name
        for machine in machines[:replicas]
    ]
    firsts = first_in or {}
    machine_firsts = _per_machine(firsts)
    chosen.sort(
        key=lambda name: (
            machine_firsts.get(node_of(name), 0), firsts.get(name, 0), load.get(name, 0), name
        )
    )
    return chosen


def _per_machine(counts: Mapping[str, int]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for member, count in counts.items():
        machine = node_of(member)
        totals[machine] = totals.get(machine, 0) + count
    return totals

def known_nodes(
    members: Iterable[str], me: str, my_labels: Iterable[str], peer_labels: Callable[[str], Sequence[str] | None]
) -> list[NodeInfo]:
    """Every member as placement sees it: this node with its own labels, each peer whose route is up
    with the labels it announced in its route hello (`peer_labels`), and a peer without a route as
    offline. Labels are tags and limits (runtime/server_limits.py `split_labels`). Nothing is asked of
    the peers, so a loaded or lagging link cannot make a live node look absent."""
    nodes = []
    for member in members:
        labels = my_labels if member == me else peer_labels(member)
        tags, limits = split_labels(labels or ())
        nodes.append(NodeInfo(member, tags, online=labels is not None, limits=limits))
    return nodes
