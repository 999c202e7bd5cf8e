"""What a node process sets up for itself: to die with its supervisor, to hold a lame duck request that
comes while it starts, and, when asked, a CPU profile.

A worker dies with its supervisor: no worker outlives the node it belongs to.
Linux's PR_SET_PDEATHSIG has the kernel signal this process when its parent
exits, however it exits (SIGKILL included, where the supervisor runs no
handler). SIGKILL, not SIGTERM: a supervisor that is gone is a node that
crashed, and its workers must not linger holding the node's ports and
RocksDB locks while a restarted supervisor starts their successors; nothing
acknowledged is lost (every acknowledgement waits for an fsync).

SIGUSR2 (lame duck mode) that reaches a node before its event loop handles it would kill it with the
signal's default action; the imports alone take about a second. `hold_lame_duck_requests` is the first
thing a node process does: the signal is remembered, and the node (or supervisor) enters lame duck mode
once it is up (`lame_duck_requests`).

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
import ctypes
import ctypes.util
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio

PR_SET_PDEATHSIG = 1
PROFILE_DIR_ENV = "JETRAFT_PROFILE_DIR"

_lame_duck_requested = False


def prepare_node_process() -> None:
    """The first thing a node process does, before its imports: hold lame duck requests, and keep `rich`
    out (`leave_rich_out`)."""
    hold_lame_duck_requests()
    leave_rich_out()


def leave_rich_out() -> None:
    """Have this process's `import rich` fail, unless something imported it already.

    structlog imports rich whenever it is installed, for pretty console tracebacks: a development install
    has it (import-linter depends on it), and `import structlog` took 84 ms with it against 24 ms without
    (`python -X importtime -m cluster.node.command --help`), of a node start's 0.6-0.8 s. Without it
    structlog formats tracebacks as it does in a production install, which has no rich: a node's logs
    look the same in both."""
    sys.modules.setdefault("rich", None)  # type: ignore[arg-type]


def hold_lame_duck_requests() -> None:
    """From now until the event loop takes SIGUSR2 over: remember it rather than die of it."""
    signal.signal(signal.SIGUSR2, _remember_lame_duck_request)


def _remember_lame_duck_request(signum: int, frame: object) -> None:
    global _lame_duck_requested
    _lame_duck_requested = True


def lame_duck_requests(loop: asyncio.AbstractEventLoop) -> asyncio.Event:
    """From now on the event loop takes SIGUSR2: an event it sets, already set if one came while the
    process started (a second signal changes nothing, as on nats-server)."""
    import asyncio  # here, not above: this module is imported before the node's other imports

    asked = asyncio.Event()
    loop.add_signal_handler(signal.SIGUSR2, asked.set)
    if _lame_duck_requested:  # read after the handler is set: a signal reaches one or the other
        asked.set()
    return asked


def die_with_parent(parent_pid: int) -> None:
    """Arrange to be killed when the parent exits; exit at once if `parent_pid` is already gone."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    # the parent may have exited before the call above: then we were re-parented already
    if os.getppid() != parent_pid:
        os._exit(1)


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
