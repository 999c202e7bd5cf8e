"""What a several-worker node's workers share in memory, in one process: two workers' views of one file.
The node's one count of client connections (cluster/node/supervision/connection_slots.py; the lock between
processes is the kernel's), and what the node's replicas hold (shared_holdings.py) as NodeHoldings adds it."""

from __future__ import annotations

import asyncio
import os

from cluster.node.supervision.connection_slots import NodeConnectionCount, create_connection_slots
from cluster.node.supervision.shared_holdings import WorkerHoldings, create_holdings_slots
from cluster.runtime.server_limits import NodeHoldings


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


async def test_each_worker_counts_what_the_whole_node_holds() -> None:
    fd = create_holdings_slots(2)
    try:
        holdings = [NodeHoldings(WorkerHoldings(os.dup(fd), index, 2)) for index in range(2)]
        replica_a, replica_b = object(), object()
        holdings[0].changed(replica_a, lambda: (False, 700))
        holdings[1].changed(replica_b, lambda: (True, 300))
        # told in the loop turn the change came, with no publish asking on either worker
        await asyncio.sleep(0)
        assert [(h.held(in_memory=False), h.held(in_memory=True)) for h in holdings] == [(700, 300), (700, 300)]
        holdings[0].gone(replica_a)
        await asyncio.sleep(0)
        assert holdings[1].held(in_memory=False) == 0
    finally:
        os.close(fd)
