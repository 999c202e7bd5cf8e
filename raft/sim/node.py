"""One simulated node: a RaftCore, its MemoryLogStorage "disk" and its state machine.

The disk keeps what was written; what was written without an fsync (a Ready
with must_sync false only ever changes the commit index) is rolled back by a
crash, and so is a Ready whose write was still in flight. The core and the state machine are volatile: a restart rebuilds them
from the disk, the state machine from the latest snapshot.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from raft.core import RaftConfig, RaftCore
from raft.log_storage import MemoryLogStorage
from raft.sim.state_machine import SimStateMachine
from raft.types import HardState, Message, Ready


class SimNode:
    def __init__(
        self,
        node_id: str,
        storage: MemoryLogStorage,
        make_config: Callable[[str, int], RaftConfig],
        rng_seed: int,
    ) -> None:
        self.id = node_id
        self.storage = storage
        self._make_config = make_config
        self.synced_hard_state: HardState = storage.hard_state
        self.alive = False
        self.removed = False
        self.core: RaftCore | None = None
        # A Ready taken but not yet persisted (the host's write is in flight),
        # with the messages that wait for that write.
        self.in_flight: tuple[Ready, tuple[Message, ...]] | None = None
        self.state_machine = SimStateMachine()
        self.start(rng_seed)

    def start(self, rng_seed: int) -> None:
        snapshot = self.storage.snapshot()
        self.state_machine = SimStateMachine.from_snapshot(snapshot.data)
        config = self._make_config(self.id, self.state_machine.index)
        self.core = RaftCore(config, self.storage, random.Random(rng_seed))
        self.in_flight = None
        self.alive = True

    def crash(self) -> None:
        """Lose everything volatile, and the commit index written since the last fsync."""
        self.storage.set_hard_state(self.synced_hard_state)
        self.core = None
        self.in_flight = None  # a write that had not completed never happened
        self.alive = False

    @property
    def live_core(self) -> RaftCore:
        if self.core is None:
            raise RuntimeError(f"{self.id} is down")
        return self.core
