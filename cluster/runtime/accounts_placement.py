"""Every JetStream account's stream assignments on this node, for placement that sees all of them.

Each account has its own meta group and machine (cluster/node/account_jetstream.py), but its streams
share the nodes, their load and their `max_file_store`/`max_memory_store` with every other account's:
placing by one account's streams alone stacked each account's streams on the same nodes and let a
node's reservations go past its limit. Each account's meta service registers here; the one placing a
stream reads the sums.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol


class PlacementSource(Protocol):
    def load(self) -> dict[str, int]: ...

    def first_peers(self) -> dict[str, int]: ...

    def configs(self) -> Mapping[str, Any]: ...

    def peers_of(self, stream: str) -> Sequence[str]: ...


class AccountsPlacement:
    def __init__(self) -> None:
        self._sources: dict[str, PlacementSource] = {}

    def register(self, tag: str, source: PlacementSource) -> None:
        self._sources[tag] = source

    def unregister(self, tag: str) -> None:
        self._sources.pop(tag, None)

    def load(self, own: PlacementSource) -> dict[str, int]:
        """Streams per member, every account's (`own` counts even when it is not registered)."""
        return _summed(source.load() for source in self._with(own))

    def first_peers(self, own: PlacementSource) -> dict[str, int]:
        return _summed(source.first_peers() for source in self._with(own))

    def configs(self, own: PlacementSource) -> tuple[Mapping[str, Any], Callable[[str], Sequence[str]]]:
        """Every account's stream configs and their peers: `own`'s streams under their names, another
        account's under `<tag>/<name>` (the home account's tag is empty; no stream name holds a '/'). With no other
        account's streams, `own`'s own mapping, not a copy: a create must not cost O(streams)."""
        others = [
            (tag, source)
            for tag, source in self._sources.items()
            if source is not own and source.configs()
        ]
        if not others:
            return own.configs(), own.peers_of
        configs: dict[str, Any] = dict(own.configs())
        owners: dict[str, tuple[PlacementSource, str]] = {}
        for tag, source in others:
            for name, config in source.configs().items():
                key = f"{tag}/{name}"
                configs[key] = config
                owners[key] = (source, name)

        def peers_of(key: str) -> Sequence[str]:
            found = owners.get(key)
            return own.peers_of(key) if found is None else found[0].peers_of(found[1])

        return configs, peers_of

    def _with(self, own: PlacementSource) -> list[PlacementSource]:
        sources = list(self._sources.values())
        return sources if any(source is own for source in sources) else [*sources, own]


def _summed(counts: Any) -> dict[str, int]:
    total: dict[str, int] = {}
    for one in counts:
        for member, count in one.items():
            total[member] = total.get(member, 0) + count
    return total
