"""A stream's assignment: the meta group's record of it (config, hosting nodes, incarnation)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class StreamAssignment:
    name: str
    config: dict[str, Any]
    peers: list[str]
    created_ns: int
    # bumps whenever the peer set changes, so a node can tell a re-created group from the old one
    epoch: int = 1
    # the account's tag (NodeContext.account_tag): another account's stream of the same name is another
    # group and another store
    tag: str = ""

    @property
    def group(self) -> str:
        # Named per incarnation, as nats-server names its groups afresh: a node that has not yet
        # stopped a deleted stream's replica must not reach the re-created stream's group with the old
        # group's messages (its higher term would depose the new leader, its log could win a vote).
        return f"{self.tag}S-{self.name}-{self.created_ns}"

    @staticmethod
    def group_of_store(store_name: str) -> str:
        """The Raft group whose entries a replica's store (named by `store_name_for`) holds applied."""
        tag_end = store_name.rfind("/") + 1  # an account's tag ends with '/', which no stream name holds
        return f"{store_name[:tag_end]}S-{store_name[tag_end:]}"

    @staticmethod
    def stream_of_group(group: str) -> str | None:
        """The stream whose group `group` names (the inverse of `group`), None for another group's name."""
        if not group.startswith("S-"):
            return None
        name, _, created_ns = group[2:].rpartition("-")
        return name if name and created_ns.isdigit() else None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "config": self.config,
            "peers": self.peers,
            "created_ns": self.created_ns,
            "epoch": self.epoch,
            **({"tag": self.tag} if self.tag else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StreamAssignment:
        return cls(
            data["name"],
            data["config"],
            list(data["peers"]),
            data["created_ns"],
            data.get("epoch", 1),
            data.get("tag", ""),
        )
