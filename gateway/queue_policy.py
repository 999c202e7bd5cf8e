"""Which member of a queue group gets a message.

A group's members are local subscriptions plus, per peer node, a weight (how
many members that node has). A policy returns a local member, or the name of
the peer whose members should get it (that node then picks one of its own
with `choose_local`). Randomness comes from an injected `random.Random`, so
tests can pin it.

- `random`: every member cluster-wide equally likely (nats-server in practice).
- `local-first`: a local member whenever there is one, else one on a peer of the same machine (a
  sibling worker, when the router is told which peers those are), otherwise as `random`.
- `round-robin`: members in turn, cluster-wide, per group name.
- `nearest`: local if possible, otherwise the peer with the lowest measured
  round-trip time (peers never measured count as farthest).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Generic, Protocol, TypeVar

POLICY_NAMES = ("random", "local-first", "round-robin", "nearest")

M = TypeVar("M")


class QueueGroup(Generic[M]):
    """One queue group's members for one subject, as a delivery plan sees them."""

    __slots__ = ("local", "name", "remote", "remote_total")

    def __init__(self, name: str, local: Sequence[M], remote: Sequence[tuple[str, int]]) -> None:
        self.name = name
        self.local = tuple(local)
        self.remote = tuple(remote)
        self.remote_total = sum(weight for _, weight in self.remote)

    @property
    def total(self) -> int:
        return len(self.local) + self.remote_total

    def member_at(self, index: int) -> M | str:
        """Member number `index` counting local members first, then each peer's weight."""
        if index < len(self.local):
            return self.local[index]
        index -= len(self.local)
        for peer, weight in self.remote:
            if index < weight:
                return peer
            index -= weight
        raise IndexError(index)


class QueuePolicy(Protocol):
    name: str

    def choose(self, group: QueueGroup[M]) -> M | str | None:
        """A local member or a peer name; None if the group is empty."""
        ...

    def choose_local(self, group_name: str, members: Sequence[M]) -> M:
        """One of the (non-empty) local `members`, for a message a peer sent to this node's share of the group."""
        ...


class RandomPolicy:
    name = "random"

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def choose(self, group: QueueGroup[M]) -> M | str | None:
        total = group.total
        if not total:
            return None
        return group.member_at(self._rng.randrange(total))

    def choose_local(self, group_name: str, members: Sequence[M]) -> M:
        return members[self._rng.randrange(len(members))]


class LocalFirstPolicy(RandomPolicy):
    """A local member, else one on a peer that shares this machine (`same_machine`: a worker of the
    same several-worker node), else any, at random."""

    name = "local-first"

    def __init__(self, rng: random.Random, same_machine: Callable[[str], bool] | None = None) -> None:
        super().__init__(rng)
        self._same_machine = same_machine

    def choose(self, group: QueueGroup[M]) -> M | str | None:
        if group.local:
            return group.local[self._rng.randrange(len(group.local))]
        if self._same_machine is not None:
            siblings = [(peer, weight) for peer, weight in group.remote if weight > 0 and self._same_machine(peer)]
            if siblings:
                return QueueGroup(group.name, (), siblings).member_at(
                    self._rng.randrange(sum(weight for _, weight in siblings))
                )
        return super().choose(group)


class RoundRobinPolicy:
    name = "round-robin"

    def __init__(self) -> None:
        self._next: dict[str, int] = {}

    def _turn(self, key: str, total: int) -> int:
        turn = self._next.get(key, 0)
        self._next[key] = turn + 1
        return turn % total

    def choose(self, group: QueueGroup[M]) -> M | str | None:
        total = group.total
        if not total:
            return None
        return group.member_at(self._turn(group.name, total))

    def choose_local(self, group_name: str, members: Sequence[M]) -> M:
        return members[self._turn("\x00local\x00" + group_name, len(members))]


class NearestPolicy(RandomPolicy):
    name = "nearest"

    def __init__(self, rng: random.Random, rtt: Callable[[str], float | None]) -> None:
        super().__init__(rng)
        self._rtt = rtt

    def choose(self, group: QueueGroup[M]) -> M | str | None:
        if group.local:
            return group.local[self._rng.randrange(len(group.local))]
        best: list[str] = []
        best_rtt = float("inf")
        for peer, weight in group.remote:
            if weight <= 0:
                continue
            rtt = self._rtt(peer)
            rtt = float("inf") if rtt is None else rtt
            if rtt < best_rtt or not best:
                best, best_rtt = [peer], rtt
            elif rtt == best_rtt:
                best.append(peer)
        if not best:
            return None
        return best[self._rng.randrange(len(best))] if len(best) > 1 else best[0]


def make_policy(
    name: str,
    rng: random.Random | None = None,
    rtt: Callable[[str], float | None] | None = None,
    same_machine: Callable[[str], bool] | None = None,
) -> QueuePolicy:
    rng = rng or random.Random()
    if name == "random":
        return RandomPolicy(rng)
    if name == "local-first":
        return LocalFirstPolicy(rng, same_machine)
    if name == "round-robin":
        return RoundRobinPolicy()
    if name == "nearest":
        return NearestPolicy(rng, rtt or (lambda _peer: None))
    raise ValueError(f"queue policy {name!r} is not one of {', '.join(POLICY_NAMES)}")
