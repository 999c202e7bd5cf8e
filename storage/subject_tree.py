"""Literal subjects indexed by token, so wildcard filters find their subjects without a full scan.

A node is a dict from token to child. A subject ending at a node is kept
under the key "" (no valid subject has an empty token); a child that is only
the end of one subject is stored as that subject's string instead of a dict,
so the common leaf costs one dict entry. The strings stored are the caller's
own subject objects, so the tree adds no copies of them.
"""

from __future__ import annotations

from collections.abc import Iterator

_END = ""
_Node = dict[str, "str | _Node"]


class SubjectTree:
    __slots__ = ("_root", "_size")

    def __init__(self) -> None:
        self._root: _Node = {}
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def insert(self, subject: str) -> None:
        tokens = subject.split(".")
        node = self._root
        for token in tokens[:-1]:
            child = node.get(token)
            if child is None:
                child = {}
                node[token] = child
            elif isinstance(child, str):
                child = {_END: child}
                node[token] = child
            node = child
        last = tokens[-1]
        existing = node.get(last)
        if existing is None:
            node[last] = subject
        elif isinstance(existing, dict):
            if _END in existing:
                return
            existing[_END] = subject
        else:
            return
        self._size += 1

    def remove(self, subject: str) -> bool:
        tokens = subject.split(".")
        path: list[tuple[_Node, str]] = []
        node = self._root
        for token in tokens[:-1]:
            child = node.get(token)
            if not isinstance(child, dict):
                return False
            path.append((node, token))
            node = child
        last = tokens[-1]
        existing = node.get(last)
        if isinstance(existing, str):
            del node[last]
        elif isinstance(existing, dict) and _END in existing:
            del existing[_END]
            if not existing:
                del node[last]
        else:
            return False
        self._size -= 1
        # Drop the dicts the removal left empty, from the leaf up.
        for parent, token in reversed(path):
            child = parent[token]
            if isinstance(child, dict) and not child:
                del parent[token]
            else:
                break
        return True

    def match(self, filter_: str) -> Iterator[str]:
        """Every stored subject matched by `filter_` (which may hold `*` and `>`)."""
        return _match(self._root, filter_.split("."), 0)

    def __iter__(self) -> Iterator[str]:
        return _all(self._root)


def _match(node: _Node, tokens: list[str], index: int) -> Iterator[str]:
    token = tokens[index]
    last = index == len(tokens) - 1
    if token == ">":
        for key, child in node.items():
            if key != _END:
                yield from _all(child)
        return
    if token == "*":
        children = [child for key, child in node.items() if key != _END]
    else:
        found = node.get(token)
        children = [] if found is None else [found]
    for child in children:
        if last:
            if isinstance(child, str):
                yield child
            elif _END in child:
                end = child[_END]
                assert isinstance(end, str)
                yield end
        elif isinstance(child, dict):
            yield from _match(child, tokens, index + 1)


def _all(node: str | _Node) -> Iterator[str]:
    if isinstance(node, str):
        yield node
        return
    for child in node.values():
        yield from _all(child)
