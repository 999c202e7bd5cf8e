"""Placement and a node's byte limits see every account's streams (cluster/runtime/accounts_placement.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cluster.meta.placement import NodeInfo, choose_peers
from cluster.runtime.accounts_placement import AccountsPlacement


class _Account:
    def __init__(self, streams: dict[str, list[str]]) -> None:
        self.streams = streams

    def load(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for peers in self.streams.values():
            for peer in peers:
                counts[peer] = counts.get(peer, 0) + 1
        return counts

    def first_peers(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for peers in self.streams.values():
            counts[peers[0]] = counts.get(peers[0], 0) + 1
        return counts

    def configs(self) -> dict[str, Any]:
        return {name: f"config of {name}" for name in self.streams}

    def peers_of(self, stream: str) -> Sequence[str]:
        return self.streams.get(stream, [])


def test_load_and_first_peers_add_up_every_account() -> None:
    home, other = _Account({"S": ["n1"], "T": ["n1", "n2"]}), _Account({"S": ["n3"]})
    placement = AccountsPlacement()
    placement.register("", home)
    placement.register("B/", other)
    assert placement.load(other) == {"n1": 2, "n2": 1, "n3": 1}
    assert placement.first_peers(home) == {"n1": 2, "n3": 1}
    # one account's R1 streams on n1 and n2: another account's first goes to n3, not to n1 (by name)
    nodes = [NodeInfo(name) for name in ("n1", "n2", "n3")]
    placement = AccountsPlacement()
    placement.register("", _Account({"S": ["n1"], "T": ["n2"]}))
    newcomer = _Account({})
    placement.register("B/", newcomer)
    assert choose_peers(1, nodes, newcomer.load()) == ["n1"]
    assert choose_peers(1, nodes, placement.load(newcomer)) == ["n3"]


def test_configs_name_other_accounts_streams_apart_from_the_askers() -> None:
    home, other = _Account({"S": ["n1"]}), _Account({"S": ["n2"], "U": ["n3"]})
    placement = AccountsPlacement()
    placement.register("", home)
    placement.register("B/", other)
    configs, peers_of = placement.configs(other)
    assert dict(configs) == {"S": "config of S", "U": "config of U", "/S": "config of S"}
    assert (peers_of("S"), peers_of("/S"), peers_of("U")) == (["n2"], ["n1"], ["n3"])
    # alone, an account's own mapping comes back as it is (no copy per create)
    alone = AccountsPlacement()
    alone.register("", home)
    assert alone.configs(home)[0] is not None and alone.configs(home)[1]("S") == ["n1"]
