"""Which owners' subject filters can overlap a filter, found by first token instead of by a scan.

Two filters can match a common subject only if their first tokens are equal or one of them is a
wildcard (`*` or `>`). A stream create checks its subjects against every other stream's (as
nats-server does): with the owners (streams) indexed by their filters' first tokens, it compares
only those that can overlap, so the check does not grow with the number of streams.
"""

from __future__ import annotations

from collections.abc import Iterable

_WILDCARDS = frozenset({"*", ">"})


def _head(filter_: str) -> str:
    return filter_.partition(".")[0]


class FirstTokenIndex:
    def __init__(self) -> None:
        # literal first token -> the owners with a filter that starts with it
        self._by_head: dict[str, set[str]] = {}
        # owners with a filter that starts with a wildcard: they may overlap anything
        self._wild: set[str] = set()
        # owner -> the first tokens of its filters
        self._heads: dict[str, frozenset[str]] = {}

    def set(self, owner: str, filters: Iterable[str]) -> None:
        """`owner`'s filters are now `filters` (none: it leaves the index)."""
        self.remove(owner)
        heads = frozenset(_head(filter_) for filter_ in filters)
        if not heads:
            return
        self._heads[owner] = heads
        for head in heads:
            if head in _WILDCARDS:
                self._wild.add(owner)
            else:
                self._by_head.setdefault(head, set()).add(owner)

    def remove(self, owner: str) -> None:
        heads = self._heads.pop(owner, None)
        if heads is None:
            return
        for head in heads:
            if head in _WILDCARDS:
                self._wild.discard(owner)
                continue
            owners = self._by_head[head]
            owners.discard(owner)
            if not owners:
                del self._by_head[head]

    def candidates(self, filters: Iterable[str]) -> set[str]:
        """Every owner with a filter that may overlap one of `filters` (a superset of those that do)."""
        found = set(self._wild)
        for filter_ in filters:
            head = _head(filter_)
            if head in _WILDCARDS:
                return set(self._heads)
            found.update(self._by_head.get(head, ()))
        return found
