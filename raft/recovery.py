"""The node discarded Raft state it could not trust, and which of its groups have caught up since.

A node whose Raft log (or the stream stores applied from it) was found damaged
moves those files aside and starts with empty ones (cluster/node/damage.py).
It may have acknowledged entries and granted votes it no longer remembers, so
every group it had stays `RaftConfig.recovering` (no vote, no campaign) until
a leader has caught it up. This ledger is how that survives a restart: it is
written before the fresh files are used, and a group is struck off only once
the Ready that caught it up is on disk. A crash in between leaves the group
recovering again, which is the safe direction.

It does not know which groups the node had (their names were in the damaged
files): every group the node runs while the ledger is open starts recovering.
Once the node has caught up with its meta leader and started every replica
assigned to it, and every one of those has caught up, the node retires the
ledger (cluster/node/node.py): a group created after that is new here. A group whose only voter is this node is not held
back (RaftCore): it has no peer to recover from.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson

LEDGER_FILE = "raft-recovering.json"


class RecoveryLedger:
    def __init__(self, path: Path, caught_up: set[str]) -> None:
        self.path = path
        self._caught_up = caught_up

    @classmethod
    def load(cls, data_dir: Path) -> RecoveryLedger | None:
        """The node's ledger, if it is recovering; None if it is not."""
        path = data_dir / LEDGER_FILE
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            caught_up = set(orjson.loads(raw)["caught_up"])
        except (orjson.JSONDecodeError, KeyError, TypeError):
            # unreadable: nothing is known to have caught up, the safe reading
            caught_up = set()
        return cls(path, caught_up)

    @classmethod
    def begin(cls, data_dir: Path, reason: str) -> RecoveryLedger:
        """Start recovering: durable before any fresh Raft state is written."""
        ledger = cls(data_dir / LEDGER_FILE, set())
        ledger._write(reason)
        return ledger

    def recovering(self, group: str) -> bool:
        return group not in self._caught_up

    def caught_up(self, group: str) -> None:
        """`group` holds its leader's commit again, on disk: it may vote after a restart too."""
        if group in self._caught_up:
            return
        self._caught_up.add(group)
        self._write(None)

    def done(self, running: list[str]) -> bool:
        """Every group in `running` has caught up (the caller knows these are all it had)."""
        return all(group in self._caught_up for group in running)

    def retire(self) -> None:
        """Recovery is over: groups created from now on are new here, with nothing to recover."""
        self.path.unlink(missing_ok=True)
        _fsync_dir(self.path.parent)

    def _write(self, reason: str | None) -> None:
        body: dict[str, object] = {"caught_up": sorted(self._caught_up)}
        if reason is not None:
            body["reason"] = reason
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "wb") as file:
            file.write(orjson.dumps(body))
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, self.path)
        _fsync_dir(self.path.parent)


def _fsync_dir(path: Path) -> None:
    directory = os.open(path, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


__all__ = ["LEDGER_FILE", "RecoveryLedger"]
