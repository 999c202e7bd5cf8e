"""Applying and healing one fault's targets: processes through the cluster's control, links through Toxiproxy.

The cluster's processes are not this package's (`local/` starts them, a
layer above): the runner is handed a `ClusterControl`. Every call blocks
(signals, waiting for a process, Toxiproxy's HTTP API), so each runs on a
worker thread.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Protocol

from chaos.readafterwrite.faults import LinkFaults
from chaos.run.corruption import drop_unsynced, flip_bits, truncate_logs
from chaos.run.schedule import Targets


class ClusterControl(Protocol):
    """The node processes of the cluster under test, by node name."""

    def kill(self, node: str) -> None:
        """kill -9, and wait for the process to be gone."""

    def restart(self, node: str) -> None:
        """Start a killed node again on the same data directory (returns at once)."""

    def pause(self, node: str) -> None:
        """SIGSTOP."""

    def data_dir(self, node: str) -> Path:
        """Where the node keeps its Raft log and stores."""

    def resume(self, node: str) -> None:
        """SIGCONT."""

    def health_problem(self, node: str) -> str | None:
        """What the node's /healthz reports wrong (None: healthy)."""


class FaultInjector:
    def __init__(self, control: ClusterControl, links: LinkFaults) -> None:
        self.control = control
        self.links = links

    async def apply(self, targets: Targets, rng: random.Random) -> list[str]:
        """Apply the fault; what was damaged on disk, if anything."""
        damage: list[str] = []
        for node in targets.kill:
            await asyncio.to_thread(self.control.kill, node)
        for node in targets.corrupt:
            damage_files = {"bits": flip_bits, "truncate": truncate_logs, "unsynced": drop_unsynced}[
                targets.corrupt_mode
            ]
            damage += await asyncio.to_thread(damage_files, self.control.data_dir(node), rng)
        for node in targets.pause:
            await asyncio.to_thread(self.control.pause, node)
        if targets.cut:
            await asyncio.to_thread(self.links.cut, targets.cut)
        if targets.lag:
            await asyncio.to_thread(
                self.links.add_latency, targets.lag, targets.latency_ms, targets.jitter_ms
            )
        return damage

    async def heal(self, targets: Targets) -> None:
        if targets.lag:
            await asyncio.to_thread(self.links.remove_latency, targets.lag)
        if targets.cut:
            await asyncio.to_thread(self.links.restore, targets.cut)
        for node in targets.pause:
            await asyncio.to_thread(self.control.resume, node)
        for node in targets.kill:
            await asyncio.to_thread(self.control.restart, node)

    async def heal_links(self) -> None:
        """Every proxy enabled and every toxic gone, whatever was applied (the end of a run)."""
        await asyncio.to_thread(self.links.client.reset)
