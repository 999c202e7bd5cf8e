import itertools

import pytest

from subjects.first_token_index import FirstTokenIndex
from subjects.grammar import (
    filters_overlap,
    is_message_subject,
    is_subset_filter,
    is_valid_filter,
    is_valid_subject,
    subject_matches,
)


@pytest.mark.parametrize("subject", ["a", "a.b", "ORDERS.new.1", "$JS.API.INFO", "_INBOX.x.y"])
def test_valid_subjects(subject: str) -> None:
    assert is_valid_subject(subject)
    assert is_valid_filter(subject)


@pytest.mark.parametrize("subject", ["", ".", "a.", ".a", "a..b", "a b", "a\tb", "a.*", "a.>", "*", ">"])
def test_invalid_literal_subjects(subject: str) -> None:
    assert not is_valid_subject(subject)


@pytest.mark.parametrize("filter_", ["a.*", "a.>", "*", ">", "*.b.>"])
def test_valid_filters(filter_: str) -> None:
    assert is_valid_filter(filter_)


@pytest.mark.parametrize("filter_", ["a.>.b", "a..*", "", "a >"])
def test_invalid_filters(filter_: str) -> None:
    assert not is_valid_filter(filter_)


@pytest.mark.parametrize(
    ("filter_", "subject", "expected"),
    [
        ("a.*", "a.b", True),
        ("a.*", "a.b.c", False),
        ("a.>", "a.b.c", True),
        ("a.>", "a", False),
        (">", "x.y", True),
        ("*.b", "a.b", True),
        ("a.b", "a.b", True),
        ("a.b", "a.c", False),
    ],
)
def test_subject_matches(filter_: str, subject: str, expected: bool) -> None:
    assert subject_matches(filter_, subject) is expected


def test_overlap_and_subset() -> None:
    assert filters_overlap("a.*", "a.b")
    assert filters_overlap("a.>", "*.b.c")
    assert not filters_overlap("a.*", "b.*")
    assert not filters_overlap("a.*", "a.b.c")
    assert filters_overlap("a.b", "a.b") and filters_overlap("a.>", "a.>")
    assert not filters_overlap("a.b", "a.c") and not filters_overlap("a.b", "a.b.c")
    assert is_subset_filter("a.b", "a.*")
    assert is_subset_filter("a.b.c", "a.>")
    assert not is_subset_filter("a.*", "a.b")
    assert not is_subset_filter("a.>", "a.*")


def test_overlap_agrees_with_matching_on_every_small_subject() -> None:
    # the literal shortcut and the token walk give what brute force gives: some subject matches both
    tokens = ("a", "b", "*", ">")
    filters = [".".join(p) for n in (1, 2, 3) for p in itertools.product(tokens, repeat=n)]
    filters = [f for f in filters if ">" not in f[:-1]]
    subjects = [".".join(p) for n in (1, 2, 3, 4) for p in itertools.product(("a", "b", "c"), repeat=n)]
    for a in filters:
        for b in filters:
            brute = any(subject_matches(a, s) and subject_matches(b, s) for s in subjects)
            assert filters_overlap(a, b) is brute, (a, b)


@pytest.mark.parametrize(
    ("subject", "expected"),
    [
        ("a.b", True),
        ("a.*", True),  # nats-server stores `*` and `>` tokens as literal tokens (checked on 2.15.1)
        ("a.>.b", True),
        (">", True),
        ("a..b", False),  # matches no subscription: no responders
        ("a.", False),
        ("", False),
        ("a b", False),
        ("a\tb", False),
    ],
)
def test_message_subjects(subject: str, expected: bool) -> None:
    assert is_message_subject(subject) is expected


def test_first_token_index_names_every_owner_whose_filters_overlap() -> None:
    # owners of one or two small filters each; for every query the candidates hold every owner with an
    # overlapping filter (so the create's overlap check misses nobody), and only owners that may overlap
    tokens = ("a", "b", "*", ">")
    filters = [".".join(p) for n in (1, 2) for p in itertools.product(tokens, repeat=n)]
    filters = [f for f in filters if ">" not in f[:-1]]
    owned = {f"o{i}": (f,) for i, f in enumerate(filters)}
    owned.update({f"pair{i}": (a, b) for i, (a, b) in enumerate(itertools.combinations(filters[:8], 2))})
    index = FirstTokenIndex()
    for owner, theirs in owned.items():
        index.set(owner, theirs)
    queries = [(f,) for f in filters] + [("c",), ("c.d",), ("a", "c"), ()]
    for query in queries:
        overlapping = {
            owner for owner, theirs in owned.items() if any(filters_overlap(q, t) for q in query for t in theirs)
        }
        candidates = index.candidates(query)
        assert overlapping <= candidates, query
        if query and all(q.partition(".")[0] not in ("*", ">") for q in query):
            # a literal first token: an owner none of whose filters starts with it or a wildcard is left out
            heads = {q.partition(".")[0] for q in query} | {"*", ">"}
            assert all(any(t.partition(".")[0] in heads for t in owned[o]) for o in candidates), query


def test_first_token_index_follows_changes_and_removals() -> None:
    index = FirstTokenIndex()
    index.set("s1", ("orders.>",))
    index.set("s2", ("*.x",))
    index.set("s3", ("items", "orders.new"))
    assert index.candidates(("orders.1",)) == {"s1", "s2", "s3"}
    assert index.candidates(("items.1",)) == {"s2", "s3"}
    assert index.candidates(("*",)) == {"s1", "s2", "s3"}
    index.set("s3", ("items",))  # a changed config: orders.new is gone
    assert index.candidates(("orders.1",)) == {"s1", "s2"}
    index.remove("s2")
    index.set("s1", ())  # a stream without subjects (a mirror) leaves the index
    assert index.candidates(("orders.1",)) == set()
    assert index.candidates((">",)) == {"s3"}
    index.remove("s9")  # unknown: nothing happens


def test_message_subjects_against_their_definition() -> None:
    """Every string of up to five characters from the ones that matter: non-empty tokens, no whitespace."""
    alphabet = ("a", ".", "*", ">", " ", "\t", "\r", "\n")
    for length in range(6):
        for chars in itertools.product(alphabet, repeat=length):
            subject = "".join(chars)
            defined = (
                bool(subject) and "" not in subject.split(".") and not any(c in subject for c in " \t\r\n")
            )
            assert is_message_subject(subject) is defined, repr(subject)
