"""NodeContext.group_options: a base's options with the node's quiescence, made once per base."""

from __future__ import annotations

from pathlib import Path

from cluster.runtime.context import NodeContext
from cluster.runtime.internal_requests import InternalRequester
from cluster.runtime.metrics import NodeMetrics
from gateway.router import Router
from raft.driver import GroupOptions


def _context(quiesce: bool) -> NodeContext:
    router = Router()
    return NodeContext(
        name="n1",
        router=router,
        host=None,  # type: ignore[arg-type]  # options are never given to a host here
        metrics=NodeMetrics("n1"),
        requester=InternalRequester(router, "n1"),
        data_dir=Path("/nonexistent"),
        members=("n1",),
        quiesce=quiesce,
    )


def test_options_take_the_nodes_quiescence_and_are_made_once_per_base() -> None:
    base = GroupOptions(election_tick=20, quiesce=False)
    ctx = _context(quiesce=True)
    first = ctx.group_options(base)
    assert first == GroupOptions(election_tick=20, quiesce=True)
    assert ctx.group_options(base) is first
    assert ctx.group_options(GroupOptions(election_tick=20, quiesce=False)) is first  # an equal base
    other = ctx.group_options(GroupOptions(election_tick=30, quiesce=False))
    assert other == GroupOptions(election_tick=30, quiesce=True)


def test_a_base_with_the_nodes_quiescence_is_itself_and_a_change_of_setting_is_followed() -> None:
    base = GroupOptions(quiesce=False)
    ctx = _context(quiesce=False)
    assert ctx.group_options(base) is base
    ctx.quiesce = True
    assert ctx.group_options(base).quiesce is True
    ctx.quiesce = False
    assert ctx.group_options(base) is base
