"""Names of a node's workers, and what each name says about its machine.

A node started with `--workers N` (N > 1) runs N worker processes; each is a
member of the cluster in its own right (route mesh, Raft groups) under the
name `<node>/w<i>`. Placement and the meta group need to know which workers
share a machine; the name says it, so nothing has to be asked of a peer (or
of a peer whose route is down) to know its node. A node with one worker
keeps its plain name, so a single-worker cluster looks as it always did.
"""

from __future__ import annotations

from collections.abc import Iterable

WORKER_SEPARATOR = "/"


def worker_name(node: str, index: int, workers: int) -> str:
    """The cluster member name of worker `index` of `node`."""
    return node if workers == 1 else f"{node}{WORKER_SEPARATOR}w{index}"


def node_of(member: str) -> str:
    """The node (machine) a member runs on: `n1` for `n1/w1` and for `n1`."""
    return member.split(WORKER_SEPARATOR, 1)[0]


def worker_index(member: str) -> int:
    """0 for a single-worker node's member and for worker 0."""
    _node, sep, worker = member.partition(WORKER_SEPARATOR)
    return int(worker[1:]) if sep else 0


def meta_voters(members: Iterable[str]) -> tuple[str, ...]:
    """One voter of the meta group per node, its worker 0: losing a machine loses one vote."""
    return tuple(sorted(m for m in members if worker_index(m) == 0))


def meta_learners(members: Iterable[str]) -> tuple[str, ...]:
    """Every other worker follows the meta group as a learner: it applies the assignments, never votes."""
    return tuple(sorted(m for m in members if worker_index(m) != 0))


def node_count(members: Iterable[str]) -> int:
    return len({node_of(m) for m in members})
