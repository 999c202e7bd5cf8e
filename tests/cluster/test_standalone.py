"""Which nodes answer as a standalone nats-server (no `cluster` object in create, update and list
replies): a node without peers, whether it runs one worker or several (tests/node/test_standalone_parity.py
shows the replies side by side with nats-server)."""

from __future__ import annotations

from pathlib import Path

from cluster.runtime.context import NodeContext
from cluster.runtime.internal_requests import InternalRequester
from cluster.runtime.metrics import NodeMetrics
from gateway.router import Router


def _context(name: str, members: tuple[str, ...]) -> NodeContext:
    router = Router()
    return NodeContext(
        name=name,
        router=router,
        host=None,  # type: ignore[arg-type]  # deciding standalone never touches Raft
        metrics=NodeMetrics(name),
        requester=InternalRequester(router, name),
        data_dir=Path("/nonexistent"),
        members=members,
    )


def test_a_node_without_peers_is_standalone_with_one_worker_or_several() -> None:
    assert _context("n1", ("n1",)).standalone
    assert _context("n1/w1", ("n1/w0", "n1/w1")).standalone


def test_a_node_with_peers_is_not_standalone_with_one_worker_or_several() -> None:
    assert not _context("n1", ("n1", "n2", "n3")).standalone
    assert not _context("n1/w0", ("n1/w0", "n1/w1", "n2/w0", "n2/w1")).standalone
