"""JETRAFT_PHASE_CPU_DIR: a node's CPU by phase of its hot paths (cluster/runtime/phase_cpu.py)."""

from __future__ import annotations

import asyncio
import gc
import importlib
import json
import threading
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import StreamConfig

from cluster.runtime.phase_cpu import (
    PHASE_CPU_DIR_ENV,
    PHASE_CPU_EXTRA_ENV,
    PHASES,
    PhaseClock,
    extra_phases,
    install_phase_clock,
)
from tests.node.cluster_fixtures import local_cluster

PUBLISHES = 50


def _busy(n: int) -> int:
    return sum(i * i for i in range(n))


def test_a_wrapped_function_counts_its_calls_and_cpu_and_still_answers() -> None:
    clock = PhaseClock()
    timed = clock.wrap("busy", _busy)
    assert timed(10) == _busy(10)
    assert clock.calls["busy"] == 1
    light = clock.cpu_ns["busy"]
    timed(300_000)
    assert clock.calls["busy"] == 2
    assert clock.cpu_ns["busy"] > light
    with pytest.raises(TypeError):
        timed("not a number")
    assert clock.calls["busy"] == 3  # a call that raised is counted too
    report = clock.report()
    assert report["phases"]["busy"] == {"calls": 3, "cpu_ns": clock.cpu_ns["busy"]}
    assert report["loop_thread_cpu_ns"] > 0 and report["process_cpu_ns"] >= report["loop_thread_cpu_ns"]


def test_the_collectors_passes_on_the_loop_thread_are_counted() -> None:
    before = list(gc.callbacks)
    try:
        clock = PhaseClock()
        clock.watch_collector()
        gc.collect()
        assert clock.calls["gc2"] == 1
        assert clock.cpu_ns["gc2"] > 0
        other = threading.Thread(target=gc.collect)
        other.start()
        other.join()
        assert clock.calls["gc2"] == 1  # another thread's pass is not the loop's
    finally:
        gc.callbacks[:] = before  # the clock's callback leaves with the test


def test_every_phase_names_a_plain_python_function() -> None:
    """A renamed or compiled method would make the tool fail at a node's start: caught here instead."""
    for phase, module_name, class_name, attribute in PHASES:
        owner: Any = importlib.import_module(module_name)
        if class_name is not None:
            owner = getattr(owner, class_name)
        function = getattr(owner, attribute)
        assert isinstance(function, types.FunctionType), (phase, function)
        assert not asyncio.iscoroutinefunction(function), phase  # an await would count other tasks' CPU


def test_extra_phases_name_a_module_function_or_a_class_method() -> None:
    env = {PHASE_CPU_EXTRA_ENV: "cluster.stream.leader:prepare_publish, gateway.router:Router.publish,"}
    assert extra_phases(env) == [
        ("cluster.stream.leader:prepare_publish", "cluster.stream.leader", None, "prepare_publish"),
        ("gateway.router:Router.publish", "gateway.router", "Router", "publish"),
    ]
    assert extra_phases({}) == []
    for malformed in ("gateway.router", "gateway.router:", ":publish", "gateway.router:a.b.c"):
        with pytest.raises(ValueError, match=PHASE_CPU_EXTRA_ENV):
            extra_phases({PHASE_CPU_EXTRA_ENV: malformed})


def test_nothing_is_wrapped_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PHASE_CPU_DIR_ENV, raising=False)
    assert install_phase_clock("n1") is None


async def test_a_node_reports_the_phases_its_publishes_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reports = tmp_path / "phases"
    monkeypatch.setenv(PHASE_CPU_DIR_ENV, str(reports))
    with local_cluster(tmp_path / "cluster", nodes=1) as cluster:
        nc = await nats.connect(cluster.specs[0].client_url)
        try:
            js = nc.jetstream(timeout=10)
            await js.add_stream(StreamConfig(name="PHASES", subjects=["phases.>"]))
            for i in range(PUBLISHES):
                await js.publish("phases.a", b"%d" % i)
            phases: dict[str, dict[str, int]] = {}
            for _ in range(50):  # each process writes its report every second; bounded
                phases = _summed(reports.glob("n1-*.json"))
                done = phases.get("stream_puback", {}).get("calls", 0) >= PUBLISHES
                if done and phases["client_commands"]["calls"] > 0:
                    break
                await asyncio.sleep(0.1)
        finally:
            await nc.close()
    assert phases["stream_publish"]["calls"] >= PUBLISHES, phases
    assert phases["stream_puback"]["calls"] >= PUBLISHES, phases
    assert phases["raft_apply"]["calls"] > 0 and phases["raft_apply"]["cpu_ns"] > 0, phases
    assert phases["client_commands"]["calls"] > 0, phases


def _summed(paths: Iterable[Path]) -> dict[str, dict[str, int]]:
    """The phases of every process of a node (its workers', when it has several: a publish may be taken
    in by one and led by another), summed."""
    total: dict[str, dict[str, int]] = {}
    for path in paths:
        for phase, counts in json.loads(path.read_text())["phases"].items():
            into = total.setdefault(phase, {"calls": 0, "cpu_ns": 0})
            into["calls"] += counts["calls"]
            into["cpu_ns"] += counts["cpu_ns"]
    return total
