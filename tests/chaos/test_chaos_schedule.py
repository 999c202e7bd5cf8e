"""The chaos run's pure parts: the seeded schedule, fault targets, error outcomes, the run's verdict."""

from __future__ import annotations

import io
import itertools
import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.errors import APIError, KeyWrongLastSequenceError

from chaos.check.history import OpType, pair, parse_jsonl
from chaos.readafterwrite.faults import LinkFaults
from chaos.run import corruption, schedule, table
from chaos.run.clients import outcome_of
from chaos.run.faults import FaultInjector
from chaos.run.membership import Placement
from chaos.run.recorder import HistoryRecorder
from chaos.run.runner import FaultRecord, RunReport
from chaos.run.schedule import FAULTS, Targets, parse_faults, plan, targets

NODES = ["n1", "n2", "n3"]
FIVE = ["n1", "n2", "n3", "n4", "n5"]


def test_the_same_seed_plans_the_same_faults_and_another_seed_others() -> None:
    kinds = list(FAULTS)
    assert plan(7, kinds, 120) == plan(7, kinds, 120)
    assert plan(7, kinds, 120) != plan(8, kinds, 120)


@given(
    st.integers(0, 2**32), st.floats(0, 300), st.lists(st.sampled_from(list(FAULTS)), min_size=1, unique=True)
)
def test_a_plan_fits_its_time_and_uses_only_the_faults_asked(
    seed: int, total: float, kinds: list[str]
) -> None:
    steps = plan(seed, kinds, total)
    assert sum(step.quiet + step.duration for step in steps) <= total
    assert {step.kind for step in steps} <= set(kinds)
    assert [step.index for step in steps] == list(range(len(steps)))
    assert all(3.0 <= step.duration <= 8.0 and 1.0 <= step.quiet <= 4.0 for step in steps)


def test_fault_groups_expand_and_unknown_faults_are_refused() -> None:
    assert parse_faults("kill,latency") == [*schedule.GROUPS["kill"], schedule.LATENCY]
    assert parse_faults("all") == schedule.SURVIVABLE
    assert set(parse_faults("all,corrupt,membership")) == set(FAULTS)
    with pytest.raises(ValueError, match="unknown fault 'kill-everyone'"):
        parse_faults("kill-everyone")
    with pytest.raises(ValueError, match="no fault"):
        parse_faults(" , ")


def _reachable(cut: tuple[tuple[str, str], ...], source: str, target: str) -> bool:
    return (source, target) not in cut


@pytest.mark.parametrize("choice", range(20))
def test_leader_faults_hit_the_leader_and_follower_faults_never_do(choice: int) -> None:
    assert targets(schedule.KILL_LEADER, NODES, "n2", choice).kill == ("n2",)
    assert targets(schedule.PAUSE_LEADER, NODES, "n2", choice).pause == ("n2",)
    assert "n2" not in targets(schedule.KILL_FOLLOWER, NODES, "n2", choice).kill
    assert "n2" not in targets(schedule.PAUSE_FOLLOWER, NODES, "n2", choice).pause
    isolated = targets(schedule.ISOLATE_LEADER, NODES, "n2", choice).cut
    assert sorted(isolated) == sorted([("n2", "n1"), ("n2", "n3"), ("n1", "n2"), ("n3", "n2")])
    assert len(targets(schedule.KILL_MAJORITY, FIVE, None, choice).kill) == 3
    removed = targets(schedule.PEER_REMOVE, FIVE, "n2", choice, replicas=["n2", "n4", "n5"]).remove_peer
    assert removed in (("n4",), ("n5",))
    damaged = targets(schedule.CORRUPT_BITS, NODES, "n2", choice)
    assert damaged.corrupt == damaged.kill and "n2" not in damaged.corrupt and damaged.corrupt_mode == "bits"


@pytest.mark.parametrize("choice", range(20))
def test_leader_faults_hit_the_leaders_node_when_the_peers_are_workers(choice: int) -> None:
    # STREAM.INFO of a cluster of several-worker nodes names workers; faults hit their nodes
    placement = Placement("n2/w1", ["n2/w1", "n1/w0", "n3/w1"])
    leader, replicas = placement.leader_node, placement.nodes
    assert targets(schedule.KILL_LEADER, NODES, leader, choice, replicas).kill == ("n2",)
    assert targets(schedule.PAUSE_LEADER, NODES, leader, choice, replicas).pause == ("n2",)
    assert "n2" not in targets(schedule.PAUSE_FOLLOWER, NODES, leader, choice, replicas).pause
    (removed,) = targets(schedule.PEER_REMOVE, NODES, leader, choice, replicas).remove_peer
    # the peer removal names the member on the node chosen
    assert placement.member_on(removed) in ("n1/w0", "n3/w1")
    assert Placement("n2", ["n2", "n1", "n3"]).member_on("n3") == "n3"
    assert Placement().leader_node is None and Placement().nodes == []


@pytest.mark.parametrize(("nodes", "choice"), list(itertools.product([NODES, FIVE], range(20))))
def test_partitions_cut_what_their_shape_says(nodes: list[str], choice: int) -> None:
    majority = targets(schedule.PARTITION_MAJORITY, nodes, None, choice).cut
    # two sides: every node is cut from exactly the nodes of the other side, both ways
    side = {node for node in nodes if _reachable(majority, nodes[0], node)}
    assert len(side) in (len(nodes) // 2 + 1, len(nodes) - len(nodes) // 2 - 1)
    for a, b in itertools.permutations(nodes, 2):
        assert _reachable(majority, a, b) == ((a in side) == (b in side))

    bridge = targets(schedule.PARTITION_BRIDGE, nodes, None, choice)
    middle = bridge.notes["bridge"]
    assert all(middle not in link for link in bridge.cut) and bridge.cut
    for a, b in bridge.cut:
        assert (b, a) in bridge.cut

    one_way = targets(schedule.PARTITION_ONE_WAY, nodes, None, choice).cut
    assert len(one_way) == len(nodes) - 1
    assert all((b, a) not in one_way for a, b in one_way)
    sources, sinks = {a for a, _ in one_way}, {b for _, b in one_way}
    assert len(sources) == 1 or len(sinks) == 1


def test_the_same_choice_and_leader_give_the_same_targets() -> None:
    for kind in FAULTS:
        assert targets(kind, NODES, "n1", 42) == targets(kind, NODES, "n1", 42)
    lag = targets(schedule.LATENCY, NODES, None, 3)
    assert lag.lag and lag.latency_ms > 0 and Targets().describe() == {}


def test_only_no_responders_and_a_wrong_last_sequence_are_definite_failures() -> None:
    assert outcome_of(NoRespondersError())[0] is OpType.FAIL
    assert outcome_of(KeyWrongLastSequenceError(description="wrong last sequence: 4"))[0] is OpType.FAIL
    assert outcome_of(APIError(code=400, err_code=10071, description="wrong last sequence"))[0] is OpType.FAIL
    assert outcome_of(NatsTimeoutError())[0] is OpType.INFO
    assert (
        outcome_of(
            APIError(code=503, err_code=10008, description="JetStream system temporarily unavailable")
        )[0]
        is OpType.INFO
    )


def test_the_recorder_writes_each_operation_as_a_json_line_as_it_happens() -> None:
    out = io.StringIO()
    recorder = HistoryRecorder(out)
    invoke = recorder.invoke(3, "cas", (1, 2), key="r0", node="n1")
    recorder.complete(invoke, OpType.OK, (1, 2), seq=9)
    ops = list(parse_jsonl(out.getvalue().splitlines()))
    assert ops == recorder.ops
    [operation] = pair(ops)
    assert operation.complete is not None and operation.complete.seq == 9 and operation.invoke.value == (1, 2)
    assert operation.invoke.time <= operation.complete.time


def _report(valid: bool | None, served: list[float | None]) -> RunReport:
    liveness = {"ok": all(s is not None for s in served)}
    report = RunReport(settings={}, checks={"valid": valid}, final_liveness={"ok": True})
    report.faults.append(FaultRecord(0, "partition-one", "n1", {}, 1.0, 2.0, liveness))
    return report


def test_a_node_not_serving_after_a_heal_makes_the_run_invalid() -> None:
    assert _report(True, [0.1, 0.2, 0.1]).verdict == "valid"
    assert _report(True, [0.1, None, 0.1]).verdict == "invalid"
    assert _report(False, [0.1, 0.2, 0.1]).verdict == "invalid"
    assert _report(None, [0.1, 0.2, 0.1]).verdict == "unknown"
    broken = _report(True, [0.1])
    broken.harness_errors.append("KeyError: 'n1'")
    assert broken.verdict == "unknown"


def test_a_matrix_row_says_what_was_lost_and_who_did_not_serve_again() -> None:
    report = {
        "verdict": "invalid",
        "settings": {"workload": "queue", "seed": 4},
        "operations": {"add:ok": 90, "add:info": 3, "add:fail": 2, "read:ok": 1, "direct-read:ok": 7},
        "checks": {"valid": False, "set": {"final_read": True, "lost_count": 1, "duplicated_count": 0}},
        "faults": [
            {
                "index": 0,
                "kind": "kill-leader",
                "liveness": {"ok": True, "served_after_s": {"n1": 1.5, "n2": 0.1}},
            },
            {
                "index": 1,
                "kind": "isolate-leader",
                "liveness": {
                    "ok": False,
                    "served_after_s": {"n1": None, "n2": 0.2},
                    "not_serving": {"n1": "no responders"},
                },
            },
        ],
        "final_liveness": {"ok": True},
        "node_log_problems": {"n1": {"count": 2}},
    }
    row = table.row(report, "kill")
    assert (row["acked"], row["indeterminate"], row["lost"], row["faults_applied"]) == (90, 3, 1, 2)
    assert row["not_serving"] == "#1 isolate-leader: n1" and row["slowest_recovery_s"] == 1.5
    assert row["log_problems"] == 2
    report["checks"]["set"]["final_read"] = False
    assert table.row(report, "kill")["lost"] == "no final read"
    lines = table.markdown([row]).splitlines()
    assert len(lines) == 3 and "| queue | kill | 4 | invalid | 90 |" in lines[2]


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()
    }


def _node_dir(root: Path) -> Path:
    for store in ("raft", "streams/S-1"):
        (root / store).mkdir(parents=True)
        (root / store / "000008.log").write_bytes(bytes(range(256)) * 8)
        (root / store / "000004.log").write_bytes(b"older" * 100)
        (root / store / "000009.sst").write_bytes(b"\x00" * 4096)
        (root / store / "LOG").write_text("rocksdb's own text log, not data")
    return root


def test_flipped_bits_change_only_data_files_one_bit_each_and_the_same_seed_flips_the_same(
    tmp_path: Path,
) -> None:
    first, second = _node_dir(tmp_path / "a"), _node_dir(tmp_path / "b")
    before = _files(first)
    done = corruption.flip_bits(first, random.Random(5), flips=16)
    assert done == corruption.flip_bits(second, random.Random(5), flips=16)
    after = _files(first)
    assert after == _files(second)
    changed_bits = 0
    for name, data in before.items():
        if name.endswith("LOG"):
            assert after[name] == data
        changed_bits += sum(bin(x ^ y).count("1") for x, y in zip(data, after[name], strict=True))
    # 16 flips, a bit flipped twice flips back
    assert 0 < changed_bits <= 16 and changed_bits % 2 == 0


def test_truncation_cuts_each_stores_newest_write_ahead_log_only(tmp_path: Path) -> None:
    node = _node_dir(tmp_path / "n")
    before = _files(node)
    done = corruption.truncate_logs(node, random.Random(9))
    after = _files(node)
    assert len(done) == 2
    for name, data in before.items():
        if name.endswith("000008.log"):
            assert len(data) // 2 <= len(after[name]) < len(data) and data.startswith(after[name])
        else:
            assert after[name] == data


class RecordingControl:
    """A ClusterControl over no processes: records what the injector asked, in order."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.calls: list[tuple[str, str]] = []

    def kill(self, node: str) -> None:
        self.calls.append(("kill", node))

    def restart(self, node: str) -> None:
        self.calls.append(("restart", node))

    def pause(self, node: str) -> None:
        self.calls.append(("pause", node))

    def resume(self, node: str) -> None:
        self.calls.append(("resume", node))

    def data_dir(self, node: str) -> Path:
        return self.root / node

    def health_problem(self, node: str) -> str | None:
        return None


async def test_a_corrupt_fault_kills_damages_then_restarts_the_node_and_says_what_it_damaged(
    tmp_path: Path,
) -> None:
    _node_dir(tmp_path / "n2")
    control = RecordingControl(tmp_path)
    injector = FaultInjector(control, LinkFaults("http://127.0.0.1:1"))
    chosen = targets(schedule.CORRUPT_TRUNCATE, NODES, "n1", 1)
    assert chosen.kill == chosen.corrupt == ("n2",)  # what seed 1 picks among the followers
    damage = await injector.apply(chosen, random.Random(3))
    assert control.calls == [("kill", "n2")]
    assert len(damage) == 2 and all(line.endswith("bytes") for line in damage)
    await injector.heal(chosen)
    assert control.calls == [("kill", "n2"), ("restart", "n2")]
