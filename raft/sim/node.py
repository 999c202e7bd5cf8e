"""One simulated node: a RaftCore, its MemoryLogStorage "disk" and its state machine.

The disk keeps what was written; what was written without an fsync (a Ready
with must_sync false only ever changes the commit index) is rolled back by a
crash, and so is a Ready whose write was still in flight. A crash may also
damage the disk (`lose_disk`): the log's tail, or all of it, and the term and
vote are gone, and the node restarts recovering (RaftConfig.recovering) until
its core says it has caught up; that flag is on the disk too. The core and the state machine are volatile: a restart rebuilds them
from the disk, the state machine from the latest snapshot.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from raft.core import RaftConfig, RaftCore
from raft.log_storage import MemoryLogStorage
from raft.sim.state_machine import SimStateMachine
from raft.types import ConfState, HardState, Message, Ready


class SimNode:
    def __init__(
        self,
        node_id: str,
        storage: MemoryLogStorage,
        make_config: Callable[[str, int, bool], RaftConfig],
        rng_seed: int,
    ) -> None:
        self.id = node_id
        self.storage = storage
        self._make_config = make_config
        self.synced_hard_state: HardState = storage.hard_state
        self.alive = False
        self.removed = False
        # Its disk was damaged and it has not caught up since (kept across crashes, as a marker file is).
        self.damaged = False
        self.ready_clears_damage = False
        self.core: RaftCore | None = None
        # A Ready taken but not yet persisted (the host's write is in flight),
        # with the messages that wait for that write.
        self.in_flight: tuple[Ready, tuple[Message, ...]] | None = None
        self.state_machine = SimStateMachine()
        self.start(rng_seed)

    def start(self, rng_seed: int) -> None:
        snapshot = self.storage.snapshot()
        self.state_machine = SimStateMachine.from_snapshot(snapshot.data)
        config = self._make_config(self.id, self.state_machine.index, self.damaged)
        self.core = RaftCore(config, self.storage, random.Random(rng_seed))
        self.in_flight = None
        self.alive = True

    def crash(self) -> None:
        """Lose everything volatile, and the commit index written since the last fsync."""
        self.storage.set_hard_state(self.synced_hard_state)
        self.core = None
        self.in_flight = None  # a write that had not completed never happened
        self.alive = False

    def lose_disk(self, keep_through: int | None, keep_hard_state: bool, conf: ConfState) -> None:
        """Its (crashed) disk comes back damaged: entries after `keep_through` are gone (all of them, and
        its snapshot, when None; `conf` is then the membership the host knows from elsewhere), and with
        them the term and vote unless `keep_hard_state`."""
        old = self.storage
        snapshot = old.snapshot()
        fresh = MemoryLogStorage(conf if keep_through is None else snapshot.metadata.conf_state)
        if keep_through is not None:
            if snapshot.index > 0:
                fresh.apply_snapshot(snapshot)
            keep = min(max(keep_through, snapshot.index), old.last_index())
            if keep > snapshot.index:
                fresh.append(old.entries(snapshot.index + 1, keep + 1))
        if keep_hard_state:
            hard = old.hard_state
            fresh.set_hard_state(HardState(hard.term, hard.vote, min(hard.commit, fresh.last_index())))
        self.storage = fresh
        self.synced_hard_state = fresh.hard_state
        self.damaged = True

    @property
    def live_core(self) -> RaftCore:
        if self.core is None:
            raise RuntimeError(f"{self.id} is down")
        return self.core
