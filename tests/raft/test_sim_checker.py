"""The simulator's safety checker fires on each violation it claims to catch, and `jetraft sim` fails loudly.

The bad states are built directly (no simulation can be relied on to produce
them); one test breaks durability in the simulated disks and expects the
full simulation to notice; the command-line tests patch `run_seed`.
"""

from __future__ import annotations

import shlex
from collections import Counter

import pytest

from raft import sim_cli
from raft.log_storage import MemoryLogStorage
from raft.sim.checker import SafetyChecker, SafetyViolation
from raft.sim.node import SimNode
from raft.sim.simulation import SimOptions, SimResult, Simulation, run_seed
from raft.sim.state_machine import SimStateMachine
from raft.types import ConfState, Entry, Snapshot, SnapshotMetadata


def _entries(term_and_data: list[tuple[int, bytes]], first_index: int = 1) -> tuple[Entry, ...]:
    return tuple(
        Entry(term=term, index=first_index + offset, data=data)
        for offset, (term, data) in enumerate(term_and_data)
    )


def _apply_all(checker: SafetyChecker, node_id: str, entries: tuple[Entry, ...], max_term: int) -> bytes:
    """Apply `entries` on a fresh replica of `node_id`, reporting each to the checker; the final digest."""
    machine = SimStateMachine()
    for entry in entries:
        before = machine.index
        machine.apply(entry)
        checker.on_apply(node_id, entry, before, machine.digest, max_term)
    return machine.digest


# --------------------------------------------------------------------------- election safety


def test_two_leaders_in_one_term_are_caught() -> None:
    checker = SafetyChecker()
    assert checker.on_leader("n1", 4) is True
    assert checker.on_leader("n1", 4) is False  # the same leader seen again is fine
    assert checker.on_leader("n2", 5) is True  # another leader in another term is fine
    with pytest.raises(SafetyViolation, match="election safety: n1 and n3 both lead term 4"):
        checker.on_leader("n3", 4)


# --------------------------------------------------------------------------- log matching


def test_same_index_and_term_with_another_payload_is_caught() -> None:
    checker = SafetyChecker()
    checker.on_persist("n1", None, _entries([(1, b"a"), (1, b"b")]))
    checker.on_persist("n2", None, _entries([(1, b"a")]))  # a matching prefix is fine
    with pytest.raises(SafetyViolation, match=r"log matching: n2's entry 2 \(term 1\)"):
        checker.on_persist("n2", None, _entries([(1, b"other")], first_index=2))


def test_same_index_and_term_over_a_different_prefix_is_caught() -> None:
    checker = SafetyChecker()
    checker.on_persist("n1", None, _entries([(1, b"a"), (2, b"b")]))
    # n2's entry 2 is byte-identical to n1's, but the entry before it differs:
    # Log Matching says equal (index, term) implies equal logs up to there.
    with pytest.raises(SafetyViolation, match="log matching: n2's entry 2"):
        checker.on_persist("n2", None, _entries([(3, b"x"), (2, b"b")]))


def test_a_truncated_and_rewritten_suffix_is_checked_against_the_new_prefix() -> None:
    checker = SafetyChecker()
    checker.on_persist("n1", None, _entries([(1, b"a"), (1, b"b"), (1, b"c")]))
    # n2 had an uncommitted term-2 suffix that a term-3 leader overwrote: legal.
    checker.on_persist("n2", None, _entries([(1, b"a"), (2, b"x")]))
    checker.on_persist("n2", None, _entries([(3, b"y"), (3, b"z")], first_index=2))
    # n3 then claims entry 3 of term 3 over n1's prefix, not n2's: caught.
    with pytest.raises(SafetyViolation, match="log matching: n3's entry 3"):
        checker.on_persist("n3", None, _entries([(1, b"a"), (1, b"b"), (3, b"z")]))


def test_gaps_and_writes_below_a_snapshot_are_caught() -> None:
    checker = SafetyChecker()
    checker.on_persist("n1", None, _entries([(1, b"a")]))
    with pytest.raises(SafetyViolation, match="after a gap"):
        checker.on_persist("n1", None, _entries([(1, b"c")], first_index=3))
    snapshot = Snapshot(SnapshotMetadata(index=5, term=1))
    checker.on_persist("n2", snapshot, ())
    with pytest.raises(SafetyViolation, match="below its snapshot"):
        checker.on_persist("n2", None, _entries([(1, b"e")], first_index=5))


# --------------------------------------------------------------------------- state machine safety


def test_a_replica_applying_another_entry_at_an_acknowledged_index_is_caught() -> None:
    checker = SafetyChecker()
    _apply_all(checker, "n1", _entries([(1, b"a"), (1, b"b")]), max_term=1)
    _apply_all(checker, "n2", _entries([(1, b"a"), (1, b"b")]), max_term=1)  # agreement is fine
    with pytest.raises(SafetyViolation, match="state machine safety: n3 applied a different entry 2"):
        _apply_all(checker, "n3", _entries([(1, b"a"), (2, b"b")]), max_term=2)


def test_the_same_entry_after_a_different_history_is_caught() -> None:
    checker = SafetyChecker()
    _apply_all(checker, "n1", _entries([(1, b"a"), (1, b"b")]), max_term=1)
    # entry 2 alone is identical, but the digest covers the whole applied sequence
    with pytest.raises(SafetyViolation, match="state machine safety: n2 applied a different entry 1"):
        _apply_all(checker, "n2", _entries([(1, b"x"), (1, b"b")]), max_term=1)


def test_applying_out_of_order_or_ahead_of_every_acknowledgement_is_caught() -> None:
    checker = SafetyChecker()
    with pytest.raises(SafetyViolation, match="n1 applied entry 3 right after 1"):
        checker.on_apply("n1", Entry(term=1, index=3), 1, bytes(16), 1)
    with pytest.raises(SafetyViolation, match="n1 applied entry 2 first, but only 0 were acknowledged"):
        checker.on_apply("n1", Entry(term=1, index=2), 1, bytes(16), 1)


def test_a_restored_snapshot_that_differs_from_the_acknowledged_state_is_caught() -> None:
    checker = SafetyChecker()
    digest = _apply_all(checker, "n1", _entries([(1, b"a"), (1, b"b")]), max_term=1)
    checker.on_restore("n2", 2, digest)  # the right image is fine
    with pytest.raises(SafetyViolation, match="n3's snapshot at 2 differs"):
        checker.on_restore("n3", 2, bytes(16))
    with pytest.raises(SafetyViolation, match="restored a snapshot at 3 beyond anything acknowledged"):
        checker.on_restore("n3", 3, digest)


# --------------------------------------------------------------------------- lost acknowledged entries


def test_a_later_leader_missing_an_acknowledged_entry_is_caught() -> None:
    checker = SafetyChecker()
    # entries 1-3 acknowledged while every node was at term 1 or below
    _apply_all(checker, "n1", _entries([(1, b"a"), (1, b"b"), (1, b"c")]), max_term=1)
    assert checker.index_a_leader_must_hold(1) == 0  # a term-1 leader may be the one that wrote them
    assert checker.index_a_leader_must_hold(2) == 3
    checker.verify_leader_has("n2", 2, 3, term_in_log=1, first_index=1)  # holds it: fine
    checker.verify_leader_has("n2", 2, 3, term_in_log=0, first_index=10)  # compacted into a snapshot: fine
    # a term-2 leader whose log lacks entry 3 (term 0: no entry there), or holds another one
    with pytest.raises(
        SafetyViolation, match="leader completeness: n2, leader of term 2, has term 0 at index 3"
    ):
        checker.verify_leader_has("n2", 2, 3, term_in_log=0, first_index=1)
    with pytest.raises(
        SafetyViolation, match="has term 2 at index 3 where the acknowledged entry has term 1"
    ):
        checker.verify_leader_has("n3", 2, 3, term_in_log=2, first_index=1)


def test_a_simulation_whose_disks_forget_on_crash_loses_acknowledged_entries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Break durability (a crash wipes the node's disk, as if nothing was ever fsynced): the simulator
    must report a violation within a few seeds, or its crashes prove nothing."""
    crash = SimNode.crash

    def crash_and_forget(node: SimNode) -> None:
        crash(node)
        founding_voters = (
            ConfState(voters=("n1", "n2", "n3")) if node.id in ("n1", "n2", "n3") else ConfState()
        )
        node.storage = MemoryLogStorage(founding_voters)
        node.synced_hard_state = node.storage.hard_state

    monkeypatch.setattr(SimNode, "crash", crash_and_forget)
    options = SimOptions(nodes=3, steps=600)
    violations = []
    crashes = 0
    for seed in range(1, 31):
        result = run_seed(seed, options)
        crashes += result.stats["crashes"]
        # a group that forgot its members may also never converge; what must show is a safety violation
        if result.violation is not None and not result.violation.startswith("liveness"):
            violations.append(result.violation)
            break
    assert crashes > 0
    assert violations, f"forgetful disks went unnoticed over 30 seeds and {crashes} crashes"
    assert violations[0].startswith(("leader completeness", "election safety", "state machine safety"))


def test_a_violation_stops_the_run_and_is_reported_with_its_tick() -> None:
    simulation = Simulation(3, SimOptions(nodes=3, steps=300, trace=True))
    # a ghost that already led every term this run can reach: the first real leader is a second one
    simulation.checker.leaders_by_term.update({term: "ghost" for term in range(1, 1000)})
    result = simulation.run()
    assert result.violation is not None and result.violation.startswith("election safety: ghost and n")
    assert 0 < result.step <= 300
    assert result.trace[-1].endswith(f"VIOLATION {result.violation}")


# --------------------------------------------------------------------------- ReadIndex


def test_a_stale_read_index_is_caught() -> None:
    checker = SafetyChecker()
    checker.on_read("n1", b"read-1", read_index=7, committed_at_request=7)
    checker.on_read("n2", b"read-2", read_index=9, committed_at_request=7)
    assert checker.reads_checked == 2
    with pytest.raises(SafetyViolation, match=r"stale read: n3's read b'read-3' got index 6, but 7"):
        checker.on_read("n3", b"read-3", read_index=6, committed_at_request=7)
    assert checker.reads_checked == 2


# --------------------------------------------------------------------------- jetraft sim


def _fake_run_seed(failing: set[int], calls: list[tuple[int, SimOptions]]) -> object:
    def run(seed: int, options: SimOptions | None = None) -> SimResult:
        assert options is not None
        calls.append((seed, options))
        result = SimResult(seed, stats=Counter(committed=10, crashes=1), trace=[f"t{seed}-a", f"t{seed}-b"])
        if seed in failing:
            result.violation = f"election safety: n1 and n2 both lead term {seed}"
            result.step = 123
        return result

    return run


def test_cli_exits_one_and_names_each_failing_seed_with_its_replay_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[tuple[int, SimOptions]] = []
    monkeypatch.setattr(sim_cli, "run_seed", _fake_run_seed({41, 43}, calls))
    code = sim_cli.main(["--seeds", "4", "--first-seed", "40", "--nodes", "5", "--steps", "77"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    assert [seed for seed, _ in calls] == [40, 41, 42, 43]
    assert lines[0] == "FAIL seed=41 tick=123: election safety: n1 and n2 both lead term 41"
    assert lines[1] == "  replay: jetraft sim --seeds 1 --first-seed 41 --nodes 5 --steps 77 --trace"
    assert lines[2].startswith("FAIL seed=43 tick=123: ")
    assert lines[4].startswith("seeds=4 violations=2 committed=40 elections=0 crashes=4 ")
    assert lines[5] == "failing seeds: 41 43"
    assert len(lines) == 6  # no trace unless asked for


def test_the_replay_command_reruns_the_same_seed_with_the_same_options_and_prints_its_trace(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[tuple[int, SimOptions]] = []
    monkeypatch.setattr(sim_cli, "run_seed", _fake_run_seed({8}, calls))
    assert sim_cli.main(["--seeds", "3", "--first-seed", "7", "--nodes", "3", "--steps", "50"]) == 1
    replay = next(line for line in capsys.readouterr().out.splitlines() if "replay:" in line)
    argv = shlex.split(replay.split("replay:", 1)[1])
    assert argv[:2] == ["jetraft", "sim"]
    calls.clear()
    assert sim_cli.main(argv[2:]) == 1
    out = capsys.readouterr().out.splitlines()
    assert calls == [(8, SimOptions(nodes=3, steps=50, trace=True))]
    assert out[2:4] == ["t8-a", "t8-b"]  # the trace follows the FAIL and replay lines


def test_cli_through_the_jetraft_dispatcher_keeps_the_exit_code(monkeypatch: pytest.MonkeyPatch) -> None:
    from cli import main as cli

    monkeypatch.setattr(sim_cli, "run_seed", _fake_run_seed({2}, []))
    assert cli.main(["sim", "--seeds", "2", "--first-seed", "1", "--steps", "10"]) == 1
    assert cli.main(["sim", "--seeds", "1", "--first-seed", "1", "--steps", "10"]) == 0
