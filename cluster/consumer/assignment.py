"""A consumer's assignment: the meta group's record of it (config, hosting nodes, incarnation)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class ConsumerAssignment:
    """A consumer of `stream`: its config (JSON), the nodes hosting its replicas, when it was made."""

    stream: str
    name: str
    config: dict[str, Any]
    peers: list[str]
    created_ns: int
    # bumps whenever the peer set changes (it follows its stream's), as StreamAssignment.epoch
    epoch: int = 1
    # the account's tag (NodeContext.account_tag): another account's consumer of the same names is
    # another group
    tag: str = ""
    # a restored consumer's archived state (ConsumerState.snapshot()), which its first leader proposes
    # in place of a start position (cluster/meta/restore.py)
    restored_state: bytes = b""

    @property
    def group(self) -> str:
        return f"{self.tag}C-{self.stream}-{self.name}-{self.created_ns}"

    def to_json(self) -> dict[str, Any]:
        return {
            "stream": self.stream,
            "name": self.name,
            "config": self.config,
            "peers": self.peers,
            "created_ns": self.created_ns,
            "epoch": self.epoch,
            **({"tag": self.tag} if self.tag else {}),
            **({"restored_state": self.restored_state.decode()} if self.restored_state else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ConsumerAssignment:
        return cls(
            data["stream"],
            data["name"],
            data["config"],
            list(data["peers"]),
            data["created_ns"],
            data.get("epoch", 1),
            data.get("tag", ""),
            data.get("restored_state", "").encode(),
        )
