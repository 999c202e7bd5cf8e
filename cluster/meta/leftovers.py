"""What a node holds on disk that no assignment wants any more: the replicas of streams and consumers
deleted (or moved off this node) while it was down.

A node removes a replica's Raft log and store when it sees the assignment go.
One that was down then learns of the deletion from the meta log or, once the
meta log is compacted, from a snapshot that no longer names the stream at
all; either way it never had that replica running to remove, and the files
would stay forever. So once the node has caught up with the meta group
(a ReadIndex applied here), everything of this account's that is neither
assigned to this node nor running is a leftover. Names carry the
incarnation (`S-<stream>-<created_ns>`, a store `<stream>-<created_ns>`), so
a stream created later never has a leftover's name.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Leftovers:
    groups: list[str]
    stores: list[str]


def _of_account(name: str, tag: str) -> bool:
    # an account's tag ends with '/', which no stream or consumer name holds; the home account's is ""
    return name.startswith(tag) and "/" not in name[len(tag) :]


def find_leftovers(
    *,
    tag: str,
    stored_groups: Iterable[str],
    stored_stores: Iterable[str],
    wanted_groups: set[str],
    wanted_stores: set[str],
    running_groups: set[str],
    open_stores: set[str],
) -> Leftovers:
    """This account's stream and consumer groups and stream stores that nothing wants or uses."""
    replica_groups = (tag + "S-", tag + "C-")
    groups = [
        name
        for name in stored_groups
        if _of_account(name, tag)
        and name.startswith(replica_groups)
        and name not in wanted_groups
        and name not in running_groups
    ]
    stores = [
        name
        for name in stored_stores
        if _of_account(name, tag) and name not in wanted_stores and name not in open_stores
    ]
    return Leftovers(sorted(groups), sorted(stores))
