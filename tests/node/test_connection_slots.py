"""The node's one count of client connections (cluster/node/supervision/connection_slots.py), in one
process: two workers' views of one slot file (the lock between processes is the kernel's)."""

from __future__ import annotations

import os

from cluster.node.supervision.connection_slots import NodeConnectionCount, create_connection_slots


def test_the_workers_hold_one_limit_and_a_restarted_worker_starts_with_no_clients() -> None:
    fd = create_connection_slots(2)
    try:
        w0 = NodeConnectionCount(os.dup(fd), 0, 2)
        w1 = NodeConnectionCount(os.dup(fd), 1, 2)
        assert w0.try_add(3) and w1.try_add(3) and w1.try_add(3)
        assert not w0.try_add(3) and not w1.try_add(3)
        assert (w0.total(), w0.mine(), w1.mine()) == (3, 1, 2)
        w1.remove()
        assert w0.try_add(3) and w0.total() == 3
        # worker 1 restarts: its clients died with it, its slot starts empty
        w1.close()
        w1 = NodeConnectionCount(os.dup(fd), 1, 2)
        assert (w0.total(), w1.mine()) == (2, 0)
        w0.close()
        w1.close()
    finally:
        os.close(fd)
