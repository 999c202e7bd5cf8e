"""A tiny in-process host for unit tests: cores on MemoryLogStorage, a message list, no clock.

Each node's Ready is handled in the contract's order (persist, send, apply,
advance). Messages wait in `pending` until a test delivers them, so a test can
drop, reorder or inspect them.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

from raft.core import RaftConfig, RaftCore
from raft.log_storage import MemoryLogStorage
from raft.types import ConfState, Entry, EntryType, Message, MessageType, ReadState, Role


class Node:
    def __init__(self, core: RaftCore, storage: MemoryLogStorage) -> None:
        self.core = core
        self.storage = storage
        self.applied: list[Entry] = []
        self.read_states: list[ReadState] = []
        self.snapshots_applied = 0


class Harness:
    def __init__(
        self,
        ids: Iterable[str] = ("n1", "n2", "n3"),
        *,
        learners: Iterable[str] = (),
        seed: int = 1,
        **config: object,
    ) -> None:
        self.config = config
        self.seed = seed
        voters = tuple(ids)
        self.conf = ConfState(voters=voters, learners=tuple(learners))
        self.nodes: dict[str, Node] = {}
        self.pending: list[Message] = []
        for node_id in (*voters, *learners):
            self.add_node(node_id, self.conf)

    def add_node(
        self, node_id: str, conf: ConfState | None = None, storage: MemoryLogStorage | None = None
    ) -> Node:
        storage = storage if storage is not None else MemoryLogStorage(conf or ConfState())
        core = RaftCore(
            RaftConfig(id=node_id, **self.config),  # type: ignore[arg-type]
            storage,
            random.Random(f"{self.seed}-{node_id}"),
        )
        node = Node(core, storage)
        self.nodes[node_id] = node
        return node

    def restart(self, node_id: str) -> Node:
        """Rebuild a node from its storage, dropping volatile state (state machine restarts from the snapshot)."""
        old = self.nodes[node_id]
        snapshot_index = old.storage.snapshot().index
        core = RaftCore(
            RaftConfig(id=node_id, applied=snapshot_index, **self.config),  # type: ignore[arg-type]
            old.storage,
            random.Random(f"{self.seed}-{node_id}-restart"),
        )
        node = Node(core, old.storage)
        node.applied = [e for e in old.applied if e.index <= snapshot_index]
        self.nodes[node_id] = node
        return node

    def core(self, node_id: str) -> RaftCore:
        return self.nodes[node_id].core

    # --- driving ---

    def process(self, node_id: str) -> list[Message]:
        """Handle one Ready of `node_id`; its messages go to `pending` and are returned."""
        node = self.nodes[node_id]
        if not node.core.has_ready():
            return []
        ready = node.core.ready()
        if ready.snapshot is not None:
            node.storage.apply_snapshot(ready.snapshot)
            node.snapshots_applied += 1
            node.applied = [e for e in node.applied if e.index <= ready.snapshot.index]
        node.storage.append(ready.entries)
        if ready.hard_state is not None:
            node.storage.set_hard_state(ready.hard_state)
        self.pending.extend(ready.messages)
        node.applied.extend(ready.committed_entries)
        node.read_states.extend(ready.read_states)
        node.core.advance(ready)
        return list(ready.messages)

    def process_all(self) -> None:
        for node_id in self.nodes:
            while self.process(node_id):
                pass

    def deliver(self, keep: Callable[[Message], bool] = lambda m: True) -> int:
        """Deliver every pending message that `keep` accepts (others are dropped); returns the count delivered."""
        batch, self.pending = self.pending, []
        delivered = 0
        for msg in batch:
            if keep(msg) and msg.to in self.nodes:
                self.nodes[msg.to].core.step(msg)
                delivered += 1
        return delivered

    def stabilize(self, keep: Callable[[Message], bool] = lambda m: True, rounds: int = 200) -> None:
        """Process and deliver until no node has anything left to do."""
        for _ in range(rounds):
            self.process_all()
            if not self.pending:
                return
            self.deliver(keep)
        raise AssertionError("cluster did not stabilize")

    def take(self, mtype: MessageType) -> list[Message]:
        taken = [m for m in self.pending if m.type is mtype]
        self.pending = [m for m in self.pending if m.type is not mtype]
        return taken

    def elect(self, node_id: str) -> None:
        self.core(node_id).campaign()
        self.stabilize()
        assert self.core(node_id).role is Role.LEADER, f"{node_id} did not win"

    def tick(self, node_id: str, count: int = 1) -> None:
        for _ in range(count):
            self.core(node_id).tick()

    def leader(self) -> str | None:
        leaders = [n for n, node in self.nodes.items() if node.core.role is Role.LEADER]
        return leaders[0] if len(leaders) == 1 else None

    def applied_data(self, node_id: str) -> list[bytes]:
        return [e.data for e in self.nodes[node_id].applied if e.type is EntryType.NORMAL and e.data]


def isolate(*node_ids: str) -> Callable[[Message], bool]:
    """A delivery filter that cuts every message to or from the given nodes."""
    cut = set(node_ids)
    return lambda m: m.from_ not in cut and m.to not in cut
