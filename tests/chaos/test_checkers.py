"""The chaos checkers on hand-written and generated histories (no cluster)."""

from __future__ import annotations

import io
import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chaos.check.history import Op, OpType, pair, parse_jsonl, write_jsonl
from chaos.check.linearizable import (
    RegisterOp,
    Verdict,
    check_key,
    check_register,
    register_ops,
    register_step,
)
from chaos.check.set_checker import check_set
from chaos.check.staleness import check_staleness

INVOKE, OK, FAIL, INFO = OpType.INVOKE, OpType.OK, OpType.FAIL, OpType.INFO


def op(
    type_: OpType, process: int, f: str, value: Any, time: int, key: str | None = "k", seq: int | None = None
) -> Op:
    return Op(type_, process, f, value, time, key=key, seq=seq)


def interval(
    process: int, f: str, arg: Any, call: int, ret: int | None, result: Any = None, outcome: OpType = OK
) -> list[Op]:
    """An operation's two records (only the invocation when `ret` is None: it never completed)."""
    records = [op(INVOKE, process, f, arg, call)]
    if ret is not None:
        records.append(op(outcome, process, f, result if f == "read" else arg, ret))
    return records


# --- set checker ---------------------------------------------------------------------------------


def test_set_checker_tells_lost_duplicated_unexpected_and_recovered_apart() -> None:
    history = [
        *interval(0, "add", 1, 0, 1),
        *interval(1, "add", 2, 0, 2),
        *interval(2, "add", 3, 1, 3, outcome=INFO),  # indeterminate, then read back: recovered
        *interval(3, "add", 4, 1, 3, outcome=INFO),  # indeterminate, not read: allowed
        *interval(4, "add", 5, 2, 4, outcome=FAIL),  # a definite failure that is read back
        *interval(5, "add", 6, 2, None),  # never completed: indeterminate
        *interval(6, "add", 7, 2, 5),  # acknowledged, never read: lost
        op(INVOKE, 9, "read", None, 10),
        op(OK, 9, "read", [1, 2, 2, 3, 5, 99], 11),
    ]
    result = check_set(history)
    assert (result.attempted, result.acknowledged, result.failed, result.indeterminate) == (7, 3, 1, 3)
    assert result.lost == [7]
    assert result.duplicated == {2: 2}
    assert result.unexpected == [99]
    assert result.failed_but_read == [5]
    assert result.recovered == 1
    assert not result.valid


def test_set_checker_is_valid_when_everything_acknowledged_is_read_once() -> None:
    history = [*interval(0, "add", 1, 0, 1), *interval(1, "add", 2, 0, 2, outcome=INFO)]
    history += [op(INVOKE, 2, "read", None, 5), op(OK, 2, "read", [1], 6)]
    result = check_set(history)
    assert result.valid and result.lost == [] and result.recovered == 0


def test_set_checker_without_a_final_read_is_not_valid() -> None:
    history = [*interval(0, "add", 1, 0, 1), op(INVOKE, 2, "read", None, 5), op(INFO, 2, "read", None, 6)]
    result = check_set(history)
    assert not result.final_read and not result.valid


@given(st.lists(st.sampled_from([OK, FAIL, INFO]), max_size=40), st.randoms(use_true_random=False))
def test_set_checker_finds_exactly_the_acknowledged_values_dropped(outcomes: list[OpType], rng: Any) -> None:
    history: list[Op] = []
    read: list[int] = []
    dropped: list[int] = []
    for value, outcome in enumerate(outcomes):
        history += interval(value, "add", value, value, value + 1, outcome=outcome)
        if outcome is OK and rng.random() < 0.2:
            dropped.append(value)
        elif outcome is OK or (outcome is INFO and rng.random() < 0.5):
            read.append(value)
    rng.shuffle(read)
    history += [op(INVOKE, 10_000, "read", None, 10_000), op(OK, 10_000, "read", read, 10_001)]
    result = check_set(history)
    assert sorted(result.lost) == dropped
    assert result.valid == (not dropped)


# --- linearizability: hand-written histories -------------------------------------------------------


def verdict(history: list[Op], time_limit: float = 10.0) -> Verdict:
    return check_register(history, time_limit=time_limit).verdict


def test_sequential_write_then_read_is_linearizable() -> None:
    assert (
        verdict([*interval(0, "write", 1, 0, 1), *interval(1, "read", None, 2, 3, result=1)])
        is Verdict.LINEARIZABLE
    )


def test_stale_read_after_a_completed_write_is_not_linearizable() -> None:
    history = [
        *interval(0, "write", 1, 0, 1),
        *interval(0, "write", 2, 2, 3),
        *interval(1, "read", None, 4, 5, result=1),
    ]
    result = check_register(history)
    assert result.verdict is Verdict.NOT_LINEARIZABLE
    failure = result.to_json()["failures"][0]
    assert failure["key"] == "k" and "read -> 1" in failure["stuck_at"]


def test_read_concurrent_with_a_write_may_see_either_value() -> None:
    for seen in (1, 2):
        history = [
            *interval(0, "write", 1, 0, 1),
            *interval(0, "write", 2, 2, 6),
            *interval(1, "read", None, 3, 4, result=seen),
        ]
        assert verdict(history) is Verdict.LINEARIZABLE


def test_two_reads_must_agree_on_the_order_of_concurrent_writes() -> None:
    # both writes overlap both reads, but the reads (one after the other) see 2 then 1 then 2 again
    history = [
        *interval(0, "write", 1, 0, 20),
        *interval(1, "write", 2, 0, 20),
        *interval(2, "read", None, 1, 2, result=2),
        *interval(2, "read", None, 3, 4, result=1),
        *interval(2, "read", None, 5, 6, result=2),
    ]
    assert verdict(history) is Verdict.NOT_LINEARIZABLE


def test_cas_succeeds_only_from_its_expected_value() -> None:
    ok_history = [
        *interval(0, "write", 1, 0, 1),
        *interval(0, "cas", (1, 2), 2, 3),
        *interval(1, "read", None, 4, 5, result=2),
    ]
    assert verdict(ok_history) is Verdict.LINEARIZABLE
    bad_history = [
        *interval(0, "write", 3, 0, 1),
        *interval(0, "cas", (1, 2), 2, 3),
        *interval(1, "read", None, 4, 5, result=2),
    ]
    assert verdict(bad_history) is Verdict.NOT_LINEARIZABLE


def test_failed_operations_never_happened() -> None:
    history = [*interval(0, "write", 1, 0, 1, outcome=FAIL), *interval(1, "read", None, 2, 3, result=1)]
    assert verdict(history) is Verdict.NOT_LINEARIZABLE
    assert (
        verdict([*interval(0, "write", 1, 0, 1, outcome=FAIL), *interval(1, "read", None, 2, 3, result=None)])
        is Verdict.LINEARIZABLE
    )


def test_an_indeterminate_write_may_take_effect_late_or_never() -> None:
    late = [
        *interval(0, "write", 1, 0, 1, outcome=INFO),
        *interval(1, "read", None, 2, 3, result=None),
        *interval(1, "read", None, 4, 5, result=1),
    ]
    assert verdict(late) is Verdict.LINEARIZABLE
    never = [*interval(0, "write", 1, 0, None), *interval(1, "read", None, 2, 3, result=None)]
    assert verdict(never) is Verdict.LINEARIZABLE
    # but not before it was invoked
    early = [*interval(1, "read", None, 0, 1, result=1), *interval(0, "write", 1, 2, 3, outcome=INFO)]
    assert verdict(early) is Verdict.NOT_LINEARIZABLE


def test_an_indeterminate_read_constrains_nothing() -> None:
    history = [*interval(0, "write", 1, 0, 1), *interval(1, "read", None, 2, 3, result=7, outcome=INFO)]
    assert verdict(history) is Verdict.LINEARIZABLE


def test_keys_are_checked_independently() -> None:
    history = [
        Op(INVOKE, 0, "write", 1, 0, key="a"), Op(OK, 0, "write", 1, 1, key="a"),
        Op(INVOKE, 1, "read", None, 2, key="b"), Op(OK, 1, "read", 1, 3, key="b"),
    ]  # fmt: skip
    result = check_register(history)
    assert result.verdict is Verdict.NOT_LINEARIZABLE
    assert [(r.key, r.verdict) for r in result.keys] == [
        ("a", Verdict.LINEARIZABLE),
        ("b", Verdict.NOT_LINEARIZABLE),
    ]


def test_the_search_gives_up_with_unknown_at_its_deadline() -> None:
    # many concurrent writes of distinct values and reads that defeat the memo: a long search
    history: list[Op] = []
    for process in range(24):
        history += interval(process, "write", process, 0, 1000)
    for index in range(24):
        history += interval(100 + index, "read", None, 2 + index, 3 + index, result=(index * 7) % 24)
    history += interval(200, "read", None, 990, 991, result=-1)
    ticks = itertools.count()
    ops = register_ops(pair(history))["k"]
    result = check_key(ops, deadline=3.0, clock=lambda: float(next(ticks)))
    assert result.verdict is Verdict.UNKNOWN


# --- linearizability: generated histories, against a brute-force search ----------------------------


@st.composite
def linearizable_histories(draw: st.DrawFn) -> tuple[list[Op], list[int]]:
    """A sequential register execution (linearization point 100*i) stretched into overlapping intervals;
    also the positions of its reads."""
    count = draw(st.integers(1, 14))
    state: Any = None
    history: list[Op] = []
    reads: list[int] = []
    written = itertools.count(1)
    for i in range(count):
        point = 100 * i
        call = point - draw(st.integers(0, 250))
        ret = point + draw(st.integers(0, 250))
        kind = draw(st.sampled_from(["read", "write", "cas"]))
        if kind == "read":
            reads.append(len(history))
            history += interval(i, "read", None, call, ret, result=state)
        elif kind == "write":
            state = next(written)
            history += interval(i, "write", state, call, ret, outcome=draw(st.sampled_from([OK, OK, INFO])))
        elif state is None or draw(st.booleans()):
            history += interval(i, "cas", (-5, next(written)), call, ret, outcome=FAIL)  # found another value
        else:
            new = next(written)
            history += interval(i, "cas", (state, new), call, ret)
            state = new
    return history, reads


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(linearizable_histories())
def test_generated_linearizable_histories_are_linearizable(generated: tuple[list[Op], list[int]]) -> None:
    history, _ = generated
    assert verdict(history) is Verdict.LINEARIZABLE


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(linearizable_histories(), st.data())
def test_a_read_of_a_value_never_written_makes_them_not_linearizable(
    generated: tuple[list[Op], list[int]], data: st.DataObject
) -> None:
    history, reads = generated
    if not reads:
        return
    position = data.draw(st.sampled_from(reads))
    invoke = history[position]
    history[position + 1] = op(OK, invoke.process, "read", -1, history[position + 1].time)
    assert verdict(history) is Verdict.NOT_LINEARIZABLE


def brute_force(ops: list[RegisterOp]) -> bool:
    """Whether some order of all `ops` respects real time and the register: tries every order."""

    def search(remaining: frozenset[int], state: Any) -> bool:
        if not remaining:
            return True
        earliest_return = min(ops[i].ret for i in remaining)
        for i in remaining:
            if ops[i].call > earliest_return:
                continue  # another remaining operation returned before this one was called
            allowed, after = register_step(state, ops[i])
            if allowed and search(remaining - {i}, after):
                return True
        return False

    return search(frozenset(range(len(ops))), None)


@st.composite
def arbitrary_histories(draw: st.DrawFn) -> list[Op]:
    """Random intervals and values from a small domain: linearizable or not, by chance."""
    history: list[Op] = []
    values = st.sampled_from([None, 1, 2])
    for process in range(draw(st.integers(1, 7))):
        call = draw(st.integers(0, 20))
        ret = call + draw(st.integers(0, 20))
        kind = draw(st.sampled_from(["read", "write", "cas"]))
        if kind == "read":
            history += interval(process, "read", None, call, ret, result=draw(values))
        elif kind == "write":
            history += interval(
                process, "write", draw(values), call, ret, outcome=draw(st.sampled_from([OK, INFO]))
            )
        else:
            history += interval(
                process,
                "cas",
                (draw(values), draw(values)),
                call,
                ret,
                outcome=draw(st.sampled_from([OK, INFO])),
            )
    return history


@settings(max_examples=500)
@given(arbitrary_histories())
def test_the_search_agrees_with_trying_every_order(history: list[Op]) -> None:
    ops = register_ops(pair(history)).get("k", [])
    expected = Verdict.LINEARIZABLE if brute_force(ops) else Verdict.NOT_LINEARIZABLE
    assert verdict(history) is expected


# --- staleness and the history file ------------------------------------------------------------------


def test_direct_reads_older_than_an_acknowledged_write_are_stale() -> None:
    history = [
        op(INVOKE, 0, "write", 1, 0), op(OK, 0, "write", 1, 1, seq=5),
        op(INVOKE, 0, "write", 2, 2), op(OK, 0, "write", 2, 3, seq=9),
        op(INVOKE, 1, "direct-read", None, 4), Op(OK, 1, "direct-read", 1, 5, key="k", node="n2", seq=5),
        op(INVOKE, 1, "direct-read", None, 6), Op(OK, 1, "direct-read", 2, 7, key="k", node="n3", seq=9),
        # concurrent with a write acknowledged after it was invoked: not stale
        op(INVOKE, 2, "write", 3, 8), op(INVOKE, 1, "direct-read", None, 8),
        op(OK, 2, "write", 3, 9, seq=12), Op(OK, 1, "direct-read", 2, 10, key="k", node="n2", seq=9),
    ]  # fmt: skip
    result = check_staleness(history)
    assert (result.direct_reads, result.stale, result.max_versions_behind) == (3, 1, 1)
    assert result.stale_by_node == {"n2": 1}


history_values = st.one_of(st.none(), st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=3))


@given(
    st.lists(
        st.builds(
            Op,
            st.sampled_from(list(OpType)),
            st.integers(0, 9),
            st.sampled_from(["add", "read", "write"]),
            history_values,
            st.integers(0, 10**12),
            st.one_of(st.none(), st.text(max_size=3)),
            st.one_of(st.none(), st.sampled_from(["n1", "n2"])),
            st.one_of(st.none(), st.text(max_size=8)),
            st.one_of(st.none(), st.integers(0, 10**6)),
        ),
        max_size=20,
    )
)
def test_histories_survive_json_lines(ops: list[Op]) -> None:
    out = io.StringIO()
    write_jsonl(ops, out)
    assert list(parse_jsonl(out.getvalue().splitlines())) == ops
