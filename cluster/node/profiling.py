"""Optional CPU profile of a node process, for finding where an operation's CPU goes.

`JETRAFT_PROFILE_DIR=<dir>` makes every node process it reaches (workers
included) run under cProfile and write `<dir>/<member>-<pid>.prof` when it
stops (SIGTERM). The clock is the thread's CPU time (`time.thread_time`), not
the wall clock: on a shared machine a wall-clock profiler charges a function
for the time the process waited for a core (py-spy's samples did so here), and
the writer threads' fsyncs would show up as the functions that awaited them.
"""

from __future__ import annotations

import contextlib
import cProfile
import os
import time
from collections.abc import Iterator
from pathlib import Path

PROFILE_DIR_ENV = "JETRAFT_PROFILE_DIR"


@contextlib.contextmanager
def profiled(member: str) -> Iterator[None]:
    """Profile the block when $JETRAFT_PROFILE_DIR is set; otherwise do nothing."""
    directory = os.environ.get(PROFILE_DIR_ENV)
    if not directory:
        yield
        return
    profiler = cProfile.Profile(time.thread_time)
    profiler.enable()
    try:
        yield
    finally:
        profiler.disable()
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        profiler.dump_stats(path / f"{member.replace('/', '-')}-{os.getpid()}.prof")
