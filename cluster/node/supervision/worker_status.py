"""A worker's side of its supervisor's hand-over: where the supervisor says who it is, and the pipe on which
the worker reports that it is up. Apart from supervisor.py so that a worker, or a node of one process,
does not import the supervisor's HTTP client (aiohttp) to start."""

from __future__ import annotations

import contextlib
import os

# the write end of a pipe the supervisor reads the worker's HTTP port from
STATUS_FD_ENV = "JETRAFT_WORKER_STATUS_FD"
# the supervisor's pid: a worker dies with it
SUPERVISOR_PID_ENV = "JETRAFT_SUPERVISOR_PID"


def report_started(http_port: int) -> None:
    """In a worker: tell the supervisor (if this process has one) that it is up, and on which HTTP port."""
    fd = os.environ.pop(STATUS_FD_ENV, None)
    if fd is None:
        return
    with contextlib.suppress(OSError), os.fdopen(int(fd), "wb", buffering=0) as pipe:
        pipe.write(f"{http_port}\n".encode())
