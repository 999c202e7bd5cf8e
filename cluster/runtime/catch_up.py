"""Waiting until this node has applied everything a Raft group had committed when it asked."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from raft.driver import GroupNotFoundError, RaftHost, RaftHostError


async def caught_up(host: RaftHost, group: str, stopped: Callable[[], bool], attempt_timeout: float) -> bool:
    """True once a ReadIndex of `group` has been applied here: this node holds everything committed
    when it asked. False when `stopped()` says the asker gave up, or the group is gone. An attempt that
    fails (between leaders, a round that timed out) is followed by a wait for a leadership change, at
    most `attempt_timeout`, before asking again."""
    while not stopped():
        try:
            await host.read_index(group, timeout=attempt_timeout)
            return True
        except GroupNotFoundError:
            return False
        except (RaftHostError, TimeoutError):
            await asyncio.sleep(0)  # give a leader change a turn before asking again
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(host.wait_leadership_change(group), attempt_timeout)
    return False
