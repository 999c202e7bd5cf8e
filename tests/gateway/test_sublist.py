"""The sublist: wildcard matching, queue groups merged across filters, and its match cache."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gateway.sublist import Sublist


@dataclass(frozen=True)
class Entry:
    name: str
    queue: str | None = None


def plain_names(sublist: Sublist[Entry], subject: str) -> set[str]:
    return {entry.name for entry in sublist.match(subject).plain}


@pytest.mark.parametrize(
    ("filter_", "matching", "not_matching"),
    [
        ("foo.bar", ["foo.bar"], ["foo", "foo.bar.baz", "foo.baz"]),
        ("foo.*", ["foo.bar", "foo.baz"], ["foo", "foo.bar.baz", "bar.foo"]),
        ("*.bar", ["foo.bar", "x.bar"], ["bar", "foo.bar.x"]),
        ("foo.>", ["foo.bar", "foo.bar.baz"], ["foo", "bar.foo"]),
        (">", ["a", "a.b.c"], []),
        ("*.*.c", ["a.b.c"], ["a.c", "a.b.c.d"]),
        ("a.*.>", ["a.b.c", "a.b.c.d"], ["a.b", "a"]),
    ],
)
def test_wildcards(filter_: str, matching: list[str], not_matching: list[str]) -> None:
    sublist: Sublist[Entry] = Sublist()
    sublist.insert(filter_, Entry("s"))
    for subject in matching:
        assert plain_names(sublist, subject) == {"s"}, subject
    for subject in not_matching:
        assert plain_names(sublist, subject) == set(), subject


def test_every_matching_filter_contributes_once() -> None:
    sublist: Sublist[Entry] = Sublist()
    for name, filter_ in [
        ("lit", "a.b.c"),
        ("star", "a.*.c"),
        ("tail", "a.>"),
        ("all", ">"),
        ("other", "x.>"),
    ]:
        sublist.insert(filter_, Entry(name))
    assert plain_names(sublist, "a.b.c") == {"lit", "star", "tail", "all"}
    assert len(sublist.match("a.b.c").plain) == 4
    assert len(sublist) == 5


def test_queue_members_merge_across_filters() -> None:
    sublist: Sublist[Entry] = Sublist()
    sublist.insert("jobs.*", Entry("w1", "workers"))
    sublist.insert("jobs.>", Entry("w2", "workers"))
    sublist.insert("jobs.new", Entry("a1", "audit"))
    sublist.insert("jobs.new", Entry("p"))
    result = sublist.match("jobs.new")
    groups = {name: {member.name for member in members} for name, members in result.queues}
    assert groups == {"workers": {"w1", "w2"}, "audit": {"a1"}}
    assert [entry.name for entry in result.plain] == ["p"]


def test_duplicate_insert_and_missing_remove() -> None:
    sublist: Sublist[Entry] = Sublist()
    entry = Entry("s")
    sublist.insert("a.b", entry)
    sublist.insert("a.b", entry)
    assert len(sublist) == 1
    assert not sublist.remove("a.c", entry)
    assert not sublist.remove("a.b", Entry("other"))
    assert sublist.remove("a.b", entry)
    assert not sublist.remove("a.b", entry)
    assert len(sublist) == 0
    assert plain_names(sublist, "a.b") == set()


def test_results_are_cached_until_a_matching_filter_changes() -> None:
    sublist: Sublist[Entry] = Sublist()
    sublist.insert("orders.*", Entry("star"))
    # A literal sibling makes the last token matter, so the result is kept by subject
    # (test_sublist_shapes.py covers subjects whose last tokens do not matter).
    sublist.insert("orders.old", Entry("old"))
    first = sublist.match("orders.new")
    assert sublist.match("orders.new") is first
    assert sublist.cached("orders.new") is first

    # A filter that cannot match orders.new leaves its cached result alone.
    sublist.insert("users.>", Entry("users"))
    assert sublist.cached("orders.new") is first

    # One that does (literal or wildcard) drops it, so the next match sees the change.
    sublist.insert("orders.new", Entry("literal"))
    assert sublist.cached("orders.new") is None
    assert plain_names(sublist, "orders.new") == {"star", "literal"}

    sublist.insert(">", Entry("all"))
    assert sublist.cached("orders.new") is None
    assert plain_names(sublist, "orders.new") == {"star", "literal", "all"}

    sublist.remove("orders.*", Entry("star"))
    assert plain_names(sublist, "orders.new") == {"literal", "all"}


def test_a_held_result_does_not_change_under_its_holder() -> None:
    sublist: Sublist[Entry] = Sublist()
    sublist.insert("a", Entry("one"))
    held = sublist.match("a")
    sublist.insert("a", Entry("two"))
    assert [entry.name for entry in held.plain] == ["one"]
    assert plain_names(sublist, "a") == {"one", "two"}


def test_cache_is_bounded() -> None:
    sublist: Sublist[Entry] = Sublist(cache_size=8)
    sublist.insert(">", Entry("all"))
    for i in range(50):
        assert plain_names(sublist, f"s.{i}") == {"all"}
    assert sublist.cache_len <= 8


def test_removing_the_last_entry_prunes_the_branch() -> None:
    sublist: Sublist[Entry] = Sublist()
    deep = Entry("deep")
    sublist.insert("a.b.c.d", deep)
    sublist.insert("a.>", Entry("tail"))
    sublist.remove("a.b.c.d", deep)
    assert plain_names(sublist, "a.b.c.d") == {"tail"}
    assert set(sublist._root["a"].children) == {">"}
