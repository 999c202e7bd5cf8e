"""Subject interest: a token trie with `*` and `>` wildcards and a match cache.

Entries are whatever the caller stores (a client's subscription, an internal
service's, a peer node's interest); each has a `queue` attribute, None for a
plain subscriber. `match(subject)` returns every plain entry and, per queue
group name, the members whose filters match, merged across filters as
nats-server does. Results are immutable tuples, so a caller may keep
iterating one while subscriptions change under it, and they are cached per
subject until an insert or removal touches a matching filter.

Many subjects are published once: request replies (`_INBOX.<id>.<n>` under
one `_INBOX.<id>.*` subscription) and acks (`$JS.ACK.<stream>.<consumer>.`
and six numbers under `...>`). A match remembers how many leading tokens it
depended on (beyond them only wildcard filters were left), and keeps such a
result by that prefix and the token count instead: every later reply to the
same inbox finds it without walking the trie or filling the subject cache.
"""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

DEFAULT_CACHE_SIZE = 4096


class Entry(Protocol):
    @property
    def queue(self) -> str | None: ...


E = TypeVar("E", bound=Entry)


class SublistResult(Generic[E]):
    """What matched one literal subject.

    `memo` is free for the sublist's user to cache something derived from this
    result (a delivery plan); it is dropped together with the result.
    """

    __slots__ = ("memo", "plain", "queues")

    def __init__(self, plain: tuple[E, ...], queues: tuple[tuple[str, tuple[E, ...]], ...]) -> None:
        self.plain = plain
        self.queues = queues
        self.memo: Any = None

    def __repr__(self) -> str:
        return f"SublistResult(plain={self.plain!r}, queues={self.queues!r})"


class _Node:
    __slots__ = ("children", "plain", "queues")

    def __init__(self) -> None:
        self.plain: dict[Any, None] = {}
        self.queues: dict[str, dict[Any, None]] = {}
        self.children: dict[str, _Node] = {}

    def is_empty(self) -> bool:
        return not self.plain and not self.queues and not self.children


class Sublist(Generic[E]):
    def __init__(self, cache_size: int = DEFAULT_CACHE_SIZE) -> None:
        self._root: dict[str, _Node] = {}
        self._cache: dict[str, SublistResult[E]] = {}
        # token count -> leading tokens the result depends on -> that prefix -> result
        self._shapes: dict[int, dict[int, dict[str, SublistResult[E]]]] = {}
        self._shape_count = 0
        self._cache_size = cache_size
        self._count = 0
        # counted for /subsz, as nats-server's SublistStats
        self.inserts = 0
        self.removes = 0
        self.matches = 0
        self.cache_hits = 0

    def __len__(self) -> int:
        return self._count

    @property
    def cache_len(self) -> int:
        return len(self._cache)

    def insert(self, filter_: str, entry: E) -> None:
        """Add `entry` under `filter_` (a valid subject or wildcard filter; the caller checks)."""
        level = self._root
        node: _Node | None = None
        for token in filter_.split("."):
            node = level.get(token)
            if node is None:
                node = level[token] = _Node()
            level = node.children
        assert node is not None
        queue = entry.queue
        if queue is None:
            if entry in node.plain:
                return
            node.plain[entry] = None
        else:
            members = node.queues.setdefault(queue, {})
            if entry in members:
                return
            members[entry] = None
        self._count += 1
        self.inserts += 1
        self._invalidate(filter_)

    def remove(self, filter_: str, entry: E) -> bool:
        """Remove `entry` from `filter_`; False if it was not there."""
        path: list[tuple[dict[str, _Node], str, _Node]] = []
        level = self._root
        for token in filter_.split("."):
            node = level.get(token)
            if node is None:
                return False
            path.append((level, token, node))
            level = node.children
        node = path[-1][2]
        queue = entry.queue
        if queue is None:
            if entry not in node.plain:
                return False
            del node.plain[entry]
        else:
            members = node.queues.get(queue)
            if members is None or entry not in members:
                return False
            del members[entry]
            if not members:
                del node.queues[queue]
        self._count -= 1
        self.removes += 1
        for parent, token, child in reversed(path):
            if not child.is_empty():
                break
            del parent[token]
        self._invalidate(filter_)
        return True

    def cached(self, subject: str) -> SublistResult[E] | None:
        """The cached result for `subject`, if any: lets a caller skip validating subjects it has seen."""
        result = self._cache.get(subject)
        if result is not None:
            self.matches += 1
            self.cache_hits += 1
        return result

    def match(self, subject: str) -> SublistResult[E]:
        """Entries interested in literal `subject` (validated by the caller)."""
        self.matches += 1
        result = self._cache.get(subject)
        if result is not None:
            self.cache_hits += 1
            return result
        tokens = subject.split(".")
        count = len(tokens)
        shapes = self._shapes.get(count)
        if shapes:
            for depth, by_prefix in shapes.items():
                result = by_prefix.get(".".join(tokens[:depth]))
                if result is not None:
                    return result
        plain: list[E] = []
        queues: dict[str, list[E]] = {}
        depth = _collect(self._root, tokens, 0, plain, queues) + 1
        result = SublistResult(
            tuple(plain),
            tuple((name, tuple(members)) for name, members in queues.items()),
        )
        if depth < count:
            if self._shape_count >= self._cache_size:
                self._shapes.clear()
                self._shape_count = 0
            by_depth = self._shapes.setdefault(count, {})
            by_depth.setdefault(depth, {})[".".join(tokens[:depth])] = result
            self._shape_count += 1
            return result
        if len(self._cache) >= self._cache_size:
            del self._cache[next(iter(self._cache))]
        self._cache[subject] = result
        return result

    def _invalidate(self, filter_: str) -> None:
        # Any change may add or remove the literal tokens a shape's prefix stopped at.
        if self._shapes:
            self._shapes.clear()
            self._shape_count = 0
        if not self._cache:
            return
        if "*" not in filter_ and ">" not in filter_:
            self._cache.pop(filter_, None)
            return
        ftoks = filter_.split(".")
        stale = [subject for subject in self._cache if _filter_matches(ftoks, subject.split("."))]
        for subject in stale:
            del self._cache[subject]


def _add_node(node: _Node, plain: list[Any], queues: dict[str, list[Any]]) -> None:
    if node.plain:
        plain.extend(node.plain)
    for name, members in node.queues.items():
        group = queues.get(name)
        if group is None:
            queues[name] = list(members)
        else:
            group.extend(members)


def _collect(
    level: dict[str, _Node],
    tokens: list[str],
    index: int,
    plain: list[Any],
    queues: dict[str, list[Any]],
) -> int:
    """Adds what matches `tokens[index:]` below `level`; returns the last index whose token
    mattered (a level with literal filter tokens was looked up with it), -1 if none did."""
    last = index == len(tokens) - 1
    node = level.get(">")
    if node is not None:
        _add_node(node, plain, queues)
    wildcards = (node is not None) + ("*" in level)
    depended = index if len(level) > wildcards else -1
    token = tokens[index]
    # a published wildcard token is literal: only wildcard subscriptions match it
    for key in ("*",) if token == "*" or token == ">" else ("*", token):
        node = level.get(key)
        if node is None:
            continue
        if last:
            _add_node(node, plain, queues)
        elif node.children:
            deeper = _collect(node.children, tokens, index + 1, plain, queues)
            if deeper > depended:
                depended = deeper
    return depended


def _filter_matches(ftoks: list[str], stoks: list[str]) -> bool:
    for i, ft in enumerate(ftoks):
        if ft == ">":
            return len(stoks) > i
        if i >= len(stoks):
            return False
        if ft != "*" and ft != stoks[i]:
            return False
    return len(ftoks) == len(stoks)
