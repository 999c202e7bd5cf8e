"""A worker dies with its supervisor: no worker outlives the node it belongs to.

Linux's PR_SET_PDEATHSIG has the kernel signal this process when its parent
exits, however it exits (SIGKILL included, where the supervisor runs no
handler). SIGKILL, not SIGTERM: a supervisor that is gone is a node that
crashed, and its workers must not linger holding the node's ports and
RocksDB locks while a restarted supervisor starts their successors; nothing
acknowledged is lost (every acknowledgement waits for an fsync).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """Arrange to be killed when the parent exits; exit at once if `parent_pid` is already gone."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    # the parent may have exited before the call above: then we were re-parented already
    if os.getppid() != parent_pid:
        os._exit(1)
