"""One chaos run: set up, run the workload on every node's clients while faults come and heal, read back,
check, report.

The run's directory gets `history.jsonl` (every operation, as it happens)
and `report.json` (settings, every fault with its targets and the liveness
check after its heal, the checkers' results, the verdict).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from chaos.readafterwrite.faults import LinkFaults
from chaos.run.clients import PinnedClient, close_all, connect_all
from chaos.run.faults import ClusterControl, FaultInjector
from chaos.run.liveness import check_liveness, create_liveness_stream
from chaos.run.membership import remove_peer, stream_placement
from chaos.run.queue import QueueWorkload
from chaos.run.recorder import HistoryRecorder
from chaos.run.register import RegisterWorkload
from chaos.run.schedule import FaultStep, plan, targets
from chaos.run.workload import Workload, run_worker

Progress = Callable[[str], None]
WORKLOADS = ("queue", "register")


@dataclass(slots=True)
class RunSettings:
    workload: str
    faults: list[str]
    time: float
    seed: int
    clients_per_node: int = 2
    op_timeout: float = 3.0
    liveness_bound: float = 20.0
    check_time_limit: float = 60.0
    keys: int = 5
    replicas: int = 3
    fault_seconds: tuple[float, float] = (3.0, 8.0)
    quiet_seconds: tuple[float, float] = (1.0, 4.0)
    final_read_timeout: float = 60.0


@dataclass(slots=True)
class FaultRecord:
    index: int
    kind: str
    leader_before: str | None
    targets: dict[str, object]
    applied_at_s: float
    healed_at_s: float
    liveness: dict[str, Any]
    error: str | None = None
    # what the fault did beyond its targets: the files it damaged, the API's answer to a peer removal
    effects: list[str] = field(default_factory=list)


@dataclass(slots=True)
class RunReport:
    settings: dict[str, Any]
    faults: list[FaultRecord] = field(default_factory=list)
    initial_liveness: dict[str, Any] = field(default_factory=dict)
    final_liveness: dict[str, Any] = field(default_factory=dict)
    operations: dict[str, int] = field(default_factory=dict)
    checks: dict[str, Any] = field(default_factory=dict)
    elapsed_s: float = 0.0
    # a workload worker that raised: a bug of the harness, not of the cluster; the run decides nothing
    harness_errors: list[str] = field(default_factory=list)

    @property
    def liveness_ok(self) -> bool:
        return bool(self.final_liveness.get("ok")) and all(fault.liveness.get("ok") for fault in self.faults)

    @property
    def verdict(self) -> str:
        """valid, invalid (a checker or a liveness check failed) or unknown (a checker could not decide)."""
        valid = self.checks.get("valid")
        if valid is False or not self.liveness_ok:
            return "invalid"
        return "valid" if valid and not self.harness_errors else "unknown"

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "liveness_ok": self.liveness_ok,
            "settings": self.settings,
            "elapsed_s": round(self.elapsed_s, 1),
            "operations": self.operations,
            "checks": self.checks,
            "initial_liveness": self.initial_liveness,
            "faults": [asdict(fault) for fault in self.faults],
            "final_liveness": self.final_liveness,
            "harness_errors": self.harness_errors,
        }


def make_workload(settings: RunSettings) -> Workload:
    if settings.workload == "queue":
        return QueueWorkload(replicas=settings.replicas, op_timeout=settings.op_timeout)
    if settings.workload == "register":
        return RegisterWorkload(
            keys=settings.keys, replicas=settings.replicas, op_timeout=settings.op_timeout
        )
    raise ValueError(f"unknown workload {settings.workload!r} (known: {', '.join(WORKLOADS)})")


def _count(ops: list[Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for op in ops:
        if op.type != "invoke":
            name = f"{op.f}:{op.type}"
            counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items()))


async def run(
    settings: RunSettings,
    urls: dict[str, str],
    control: ClusterControl,
    toxiproxy_url: str,
    out_dir: Path,
    progress: Progress = lambda _line: None,
) -> RunReport:
    out_dir.mkdir(parents=True, exist_ok=True)
    workload = make_workload(settings)
    steps = plan(
        settings.seed, settings.faults, settings.time, settings.fault_seconds, settings.quiet_seconds
    )
    report = RunReport(settings={**asdict(settings), "nodes": sorted(urls), "planned_faults": len(steps)})
    started = time.monotonic()
    injector = FaultInjector(control, LinkFaults(toxiproxy_url))
    with open(out_dir / "history.jsonl", "w", encoding="utf-8") as history_file:
        recorder = HistoryRecorder(history_file)
        clients = await connect_all(urls, settings.op_timeout)
        try:
            await workload.setup(clients)
            await create_liveness_stream(clients[0], settings.replicas)
            report.initial_liveness = (await check_liveness(clients, settings.liveness_bound)).to_json()
            progress(
                f"{workload.name}: {len(steps)} faults planned over {settings.time:.0f}s (seed {settings.seed})"
            )
            stop = asyncio.Event()
            threads = len(clients) * settings.clients_per_node
            workers = [
                asyncio.create_task(
                    run_worker(
                        workload,
                        thread,
                        threads,
                        clients[thread % len(clients)],
                        recorder,
                        stop,
                        settings.seed * 1_000 + thread,
                    )
                )
                for thread in range(threads)
            ]
            try:
                for step in steps:
                    report.faults.append(
                        await _one_fault(step, workload, clients, injector, recorder, settings, progress)
                    )
            finally:
                stop.set()
                await injector.heal_links()
                _, still_running = await asyncio.wait(workers, timeout=settings.op_timeout * 3 + 5)
                for task in still_running:
                    task.cancel()  # their operations stay open in the history: indeterminate
                report.harness_errors = [
                    f"{type(exc).__name__}: {exc}"
                    for task in workers
                    if task.done() and not task.cancelled() and (exc := task.exception()) is not None
                ]
            final = await check_liveness(clients, settings.liveness_bound)
            report.final_liveness = final.to_json()
            progress(f"final liveness: {_liveness_line(report.final_liveness)}")
            await workload.final_read(clients, recorder, settings.final_read_timeout)
        finally:
            recorder.flush()
            await close_all(clients)
    report.operations = _count(recorder.ops)
    report.checks = workload.check(recorder.ops, settings.check_time_limit)
    report.elapsed_s = time.monotonic() - started
    (out_dir / "report.json").write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
    return report


async def _one_fault(
    step: FaultStep,
    workload: Workload,
    clients: list[PinnedClient],
    injector: FaultInjector,
    recorder: HistoryRecorder,
    settings: RunSettings,
    progress: Progress,
) -> FaultRecord:
    await asyncio.sleep(step.quiet)
    placement = await stream_placement(clients, workload.stream)
    leader = placement.leader
    nodes = [client.node for client in clients]
    chosen = targets(step.kind, nodes, placement.leader_node, step.choice, placement.nodes or None)
    applied_at = recorder.now() / 1e9
    error = None
    effects: list[str] = []
    try:
        effects = await injector.apply(chosen, random.Random(step.choice))
        for node in chosen.remove_peer:
            effects.append(await remove_peer(clients, workload.stream, placement.member_on(node)))
        await asyncio.sleep(step.duration)
    except Exception as exc:  # recorded; the heal below still runs
        error = f"applying: {type(exc).__name__}: {exc}"
    finally:
        await injector.heal(chosen)
    healed_at = recorder.now() / 1e9
    liveness = (
        await check_liveness(
            clients,
            settings.liveness_bound,
            health_problem=injector.control.health_problem,
            restarted=chosen.kill,
        )
    ).to_json()
    progress(
        f"fault {step.index} {step.kind} {chosen.describe()} (leader was {leader}) {step.duration:.1f}s; "
        f"after heal: {_liveness_line(liveness)}"
    )
    return FaultRecord(step.index, step.kind, leader, chosen.describe(), round(applied_at, 3), round(healed_at, 3),
                       liveness, error, effects)  # fmt: skip


def _liveness_line(liveness: dict[str, Any]) -> str:
    served = liveness.get("served_after_s", {})
    parts = [f"{node} {'NOT SERVING' if s is None else f'{s:.2f}s'}" for node, s in served.items()]
    return ", ".join(parts)
