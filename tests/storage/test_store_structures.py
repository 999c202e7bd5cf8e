"""The index building blocks against brute-force models: SeqList, SeqSet, SubjectTree."""

from __future__ import annotations

import bisect

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
