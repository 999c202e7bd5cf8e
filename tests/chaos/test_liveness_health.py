"""After a fault that restarted a node, liveness also waits for its /healthz (chaos/run/liveness.py)."""

from __future__ import annotations

import time

from chaos.run.liveness import Liveness, wait_healthy


async def test_a_restarted_node_counts_as_back_only_once_its_healthz_is_ok() -> None:
    answers = iter(["raft group g: recovering from damaged files", "JetStream is not current", None])
    asked: list[str] = []

    def health_problem(node: str) -> str | None:
        asked.append(node)
        return next(answers)

    result = Liveness(bound=5.0, served_after={"n1": 0.01, "n3": 0.02})
    started = time.monotonic()
    await wait_healthy(health_problem, ["n3"], result, started)
    assert asked == ["n3", "n3", "n3"]
    assert result.ok and (result.served_after["n3"] or 0) >= 0.2  # two retry pauses
    assert result.served_after["n1"] == 0.01


async def test_a_node_that_never_reports_healthy_within_the_bound_is_not_serving() -> None:
    result = Liveness(bound=0.5, served_after={"n3": 0.02})
    await wait_healthy(lambda node: "raft group g: recovering", ["n3"], result, time.monotonic())
    assert not result.ok
    assert result.last_error["n3"] == "serves, but /healthz: raft group g: recovering"
