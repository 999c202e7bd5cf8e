"""The CI chaos matrix: one short seeded run per workload on a real faultable cluster, through the command.

Each run starts 3 nodes behind Toxiproxy, applies at least one fault, heals
it, checks that every node serves its clients again, reads back and checks.
The long matrix is `make chaos` (docs/chaos.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.check.history import read_jsonl
from cli import chaos as chaos_cli
from local.cluster import node_available

pytestmark = pytest.mark.skipif(
    not node_available(), reason="needs a runnable `jetraft node` (cluster.node.command)"
)

SHORT = ["--time", "5", "--fault-seconds", "2:3", "--quiet-seconds", "0.5:1", "--clients-per-node", "1"]


@pytest.mark.parametrize(
    ("workload", "faults", "seed"),
    [
        ("queue", "kill-leader,partition-one-way", 11),
        ("register", "isolate-leader,pause-follower", 12),
        # damaged files repaired from the peers, and writes lost since the last fsync (docs/chaos.md)
        ("queue", "corrupt-bits,corrupt-truncate,lost-unsynced", 13),
    ],
)
def test_a_short_seeded_run_is_valid_and_every_node_serves_after_every_heal(
    workload: str, faults: str, seed: int, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    code = chaos_cli.main(
        ["run", "--workload", workload, "--faults", faults, "--seed", str(seed), "--out", str(out), *SHORT]
    )
    report = json.loads((out / "report.json").read_text())
    assert report["faults"], "the schedule applied no fault"
    for fault in report["faults"]:
        assert fault["kind"] in faults.split(",") and fault["error"] is None, fault
        assert fault["liveness"]["ok"], f"seed {seed}: a node did not serve again after {fault}"
    assert report["final_liveness"]["ok"], report["final_liveness"]
    assert report["harness_errors"] == []
    assert report["verdict"] == "valid", report["checks"]
    assert code == chaos_cli.EXIT_VALID
    history = read_jsonl(out / "history.jsonl")
    completions = sum(1 for op in history if op.type != "invoke")
    assert completions == sum(report["operations"].values())
    if workload == "queue":
        assert report["checks"]["set"]["acknowledged"] > 0 and report["checks"]["set"]["lost_count"] == 0
    else:
        assert report["checks"]["linearizability"]["verdict"] == "linearizable"
        assert report["operations"].get("read:ok", 0) > 0 and report["operations"].get("cas:ok", 0) > 0


def test_check_replays_a_history_and_finds_a_lost_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        {"type": "invoke", "process": 0, "f": "add", "value": 1, "time": 0},
        {"type": "ok", "process": 0, "f": "add", "value": 1, "time": 5},
        {"type": "invoke", "process": 1, "f": "read", "value": None, "time": 10},
        {"type": "ok", "process": 1, "f": "read", "value": [], "time": 11},
    ]
    history = tmp_path / "history.jsonl"
    history.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert chaos_cli.main(["check", "--workload", "queue", str(history)]) == chaos_cli.EXIT_INVALID
    assert json.loads(capsys.readouterr().out)["set"]["lost"] == [1]
