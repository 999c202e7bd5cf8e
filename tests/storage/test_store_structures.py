"""The index building blocks against brute-force models: SeqList, SeqSet, SubjectTree."""

from __future__ import annotations

import bisect
from array import array

from hypothesis import given, settings
from hypothesis import strategies as st

from storage.seq_list import SeqList
from storage.seq_set import CHUNK_BITS, SeqSet
from storage.subject_tree import SubjectTree
from subjects.grammar import subject_matches

# Sequences spread over a few chunks, with runs and far jumps.
seqs = st.one_of(
    st.integers(0, 300), st.integers(CHUNK_BITS - 5, CHUNK_BITS + 5), st.integers(10**6, 10**6 + 50)
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.integers(1, 60)), max_size=120),
    st.lists(st.integers(0, 70), max_size=20),
)
def test_seq_list_matches_a_sorted_list(ops: list[tuple[bool, int]], probes: list[int]) -> None:
    seq_list = SeqList()
    model: list[int] = []
    for append, value in ops:
        if append:
            seq = (model[-1] if model else 0) + value % 3 + 1
            seq_list.append(seq)
            model.append(seq)
        elif model:
            victim = model[value % len(model)] if value % 4 else model[0]
            assert seq_list.remove(victim)
            model.remove(victim)
            assert not seq_list.remove(victim)
        assert len(seq_list) == len(model)
        assert list(seq_list) == model
        if model:
            assert (seq_list.first, seq_list.last) == (model[0], model[-1])
    for probe in probes:
        after = [s for s in model if s >= probe]
        before = [s for s in model if s <= probe]
        assert seq_list.next_at_or_after(probe) == (after[0] if after else None)
        assert seq_list.last_at_or_before(probe) == (before[-1] if before else None)
        assert seq_list.count_at_or_after(probe) == len(after)
        assert list(seq_list.iter_from(probe)) == after


def test_seq_list_refuses_out_of_order_append() -> None:
    seq_list = SeqList((5,))
    try:
        seq_list.append(5)
    except ValueError:
        pass
    else:
        raise AssertionError("append of a non-increasing sequence must fail")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.booleans(), seqs), max_size=150), st.lists(seqs, max_size=15))
def test_seq_set_matches_a_python_set(ops: list[tuple[bool, int]], probes: list[int]) -> None:
    seq_set = SeqSet()
    model: set[int] = set()
    for add, seq in ops:
        if add:
            seq_set.add(seq)
            model.add(seq)
        else:
            assert seq_set.discard(seq) == (seq in model)
            model.discard(seq)
    ordered = sorted(model)
    assert len(seq_set) == len(model)
    assert list(seq_set.iter_from(0)) == ordered
    assert seq_set.first() == (ordered[0] if ordered else None)
    assert seq_set.last() == (ordered[-1] if ordered else None)
    copy = seq_set.copy()
    copy.add(10**7)
    assert 10**7 not in seq_set
    for probe in probes:
        index = bisect.bisect_left(ordered, probe)
        assert (probe in seq_set) == (probe in model)
        assert seq_set.next_at_or_after(probe) == (ordered[index] if index < len(ordered) else None)
        below = bisect.bisect_right(ordered, probe)
        assert seq_set.prev_at_or_before(probe) == (ordered[below - 1] if below else None)
        assert seq_set.count_at_or_after(probe) == len(ordered) - index
        low, high = min(probe, probe + 40), probe + 40
        assert list(seq_set.iter_range(low, high)) == [s for s in ordered if low <= s <= high]
        assert list(seq_set.missing_in(low, high)) == [s for s in range(low, high + 1) if s not in model]


tokens = st.sampled_from(["a", "b", "c", "$KV", "x1"])
subjects = st.lists(tokens, min_size=1, max_size=4).map(".".join)
filters = st.lists(st.one_of(tokens, st.just("*")), min_size=1, max_size=4).flatmap(
    lambda parts: st.sampled_from([".".join(parts), ".".join([*parts, ">"]), ">"])
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), subjects), max_size=60), st.lists(filters, max_size=10))
def test_subject_tree_matches_brute_force(ops: list[tuple[bool, str]], probes: list[str]) -> None:
    tree = SubjectTree()
    model: set[str] = set()
    for insert, subject in ops:
        if insert:
            tree.insert(subject)
            model.add(subject)
        else:
            assert tree.remove(subject) == (subject in model)
            model.discard(subject)
        assert len(tree) == len(model)
    assert sorted(tree) == sorted(model)
    for filter_ in probes:
        assert sorted(tree.match(filter_)) == sorted(s for s in model if subject_matches(filter_, s))


# One step on a SeqList: append a run of consecutive sequences after a gap, remove one (the first,
# the last, or any), or remove every other one (which makes runs into more runs than a plain array
# is worth), so that lists cross between their two representations both ways.
seq_list_steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 3), st.integers(1, 60)),
        st.tuples(
            st.sampled_from(["remove", "remove_first", "remove_last", "thin"]),
            st.integers(0, 10**6),
            st.just(0),
        ),
    ),
    max_size=80,
)


def _check_against(seq_list: SeqList, model: list[int], probes: list[int]) -> None:
    assert len(seq_list) == len(model)
    if model:
        assert (seq_list.first, seq_list.last) == (model[0], model[-1])
    for probe in probes:
        at = bisect.bisect_left(model, probe)
        upto = bisect.bisect_right(model, probe)
        assert seq_list.next_at_or_after(probe) == (model[at] if at < len(model) else None)
        assert seq_list.last_at_or_before(probe) == (model[upto - 1] if upto else None)
        assert seq_list.count_at_or_after(probe) == len(model) - at
        assert list(seq_list.iter_from(probe)) == model[at:]


@settings(max_examples=300, deadline=None)
@given(seq_list_steps, st.lists(st.integers(0, 3000), max_size=12))
def test_seq_list_runs_match_a_sorted_list(steps: list[tuple[str, int, int]], probes: list[int]) -> None:
    seq_list = SeqList()
    model: list[int] = []
    for kind, first, second in steps:
        if kind == "append":
            start = (model[-1] if model else 0) + first + 1
            for seq in range(start, start + second):
                seq_list.append(seq)
                model.append(seq)
        elif kind == "thin":
            for victim in model[first % 2 :: 2]:
                assert seq_list.remove(victim)
            del model[first % 2 :: 2]
        elif model:
            victim = {
                "remove": model[first % len(model)],
                "remove_first": model[0],
                "remove_last": model[-1],
            }[kind]
            assert seq_list.remove(victim)
            model.remove(victim)
            assert not seq_list.remove(victim)
        assert list(seq_list) == model
        assert list(seq_list.runs()) == _model_runs(model)
        _check_against(seq_list, model, [*probes, first, model[-1] + 1 if model else 0])
    rebuilt = SeqList.from_runs(
        array("Q", (start for start, _ in seq_list.runs())), array("Q", (n for _, n in seq_list.runs()))
    )
    assert list(rebuilt) == model
    assert list(SeqList.from_array(array("Q", model))) == model


def _model_runs(model: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for seq in model:
        if runs and runs[-1][0] + runs[-1][1] == seq:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((seq, 1))
    return runs


def test_seq_list_of_consecutive_sequences_takes_constant_room() -> None:
    consecutive = SeqList()
    for seq in range(1, 100_001):
        consecutive.append(seq)
    assert consecutive.nbytes <= 64
    for seq in range(1, 50_001):  # limits trimming the front
        consecutive.remove(seq)
    assert consecutive.nbytes <= 64 and len(consecutive) == 50_000 and consecutive.first == 50_001


def test_seq_list_of_interleaved_sequences_takes_no_more_than_an_array() -> None:
    interleaved = SeqList()
    for seq in range(1, 200_001, 2):  # another subject has every other message
        interleaved.append(seq)
    assert interleaved.nbytes <= 8 * 100_000
    assert interleaved.count_at_or_after(100_000) == 50_000
