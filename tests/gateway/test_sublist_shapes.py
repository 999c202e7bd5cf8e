"""The sublist's results kept by subject shape: one entry per inbox or ack prefix, never a wrong answer."""

from __future__ import annotations

import random
from dataclasses import dataclass

from gateway.sublist import Sublist


@dataclass(frozen=True)
class Entry:
    name: str
    queue: str | None = None


def _matches(filter_: str, subject: str) -> bool:
    ftoks, stoks = filter_.split("."), subject.split(".")
    for i, ft in enumerate(ftoks):
        if ft == ">":
            return len(stoks) > i
        if i >= len(stoks):
            return False
        # a published wildcard token is literal: only a wildcard filter token matches it
        if ft != "*" and (ft != stoks[i] or stoks[i] in ("*", ">")):
            return False
    return len(ftoks) == len(stoks)


def _names(sublist: Sublist[Entry], subject: str) -> set[str]:
    result = sublist.match(subject)
    return {e.name for e in result.plain} | {e.name for _, members in result.queues for e in members}


def test_replies_to_one_inbox_share_one_result_and_leave_the_subject_cache_alone() -> None:
    sublist: Sublist[Entry] = Sublist()
    inbox = Entry("inbox")
    sublist.insert("_INBOX.abc.*", inbox)
    sublist.insert("$JS.API.>", Entry("api"))
    first = sublist.match("_INBOX.abc.1")
    assert [e.name for e in first.plain] == ["inbox"]
    for n in range(2, 500):
        assert sublist.match(f"_INBOX.abc.{n}") is first
    assert sublist.cache_len == 0
    # Another inbox prefix has no subscriber: its replies match nothing.
    assert sublist.match("_INBOX.other.1").plain == ()


def test_a_literal_filter_added_under_a_shared_prefix_is_seen_at_once() -> None:
    sublist: Sublist[Entry] = Sublist()
    sublist.insert("_INBOX.abc.*", Entry("inbox"))
    assert _names(sublist, "_INBOX.abc.7") == {"inbox"}
    sublist.insert("_INBOX.abc.7", Entry("exact"))
    assert _names(sublist, "_INBOX.abc.7") == {"inbox", "exact"}
    assert _names(sublist, "_INBOX.abc.8") == {"inbox"}
    sublist.remove("_INBOX.abc.7", Entry("exact"))
    assert _names(sublist, "_INBOX.abc.7") == {"inbox"}


def test_ack_subjects_depend_on_the_consumer_prefix_only() -> None:
    sublist: Sublist[Entry] = Sublist()
    sublist.insert("$JS.ACK.S.C1.>", Entry("c1", "q"))
    sublist.insert("$JS.ACK.S.C2.>", Entry("c2", "q"))
    one = sublist.match("$JS.ACK.S.C1.1.5.5.1700000000.0")
    assert sublist.match("$JS.ACK.S.C1.1.6.6.1700000001.3") is one
    assert _names(sublist, "$JS.ACK.S.C2.1.6.6.1700000001.3") == {"c2"}


def test_shape_results_agree_with_the_filters_under_random_changes() -> None:
    rng = random.Random(7)
    tokens = ["a", "b", "c", "*", ">"]
    filters = sorted(
        {
            ".".join(rng.choice([*tokens[:3], "*"]) for _ in range(rng.randint(1, 3)))
            + rng.choice(["", ".>", ".*"])
            for _ in range(60)
        }
    )
    subjects = sorted({".".join(rng.choice(tokens) for _ in range(rng.randint(1, 5))) for _ in range(300)})
    sublist: Sublist[Entry] = Sublist(cache_size=64)
    present: dict[str, Entry] = {}
    for step in range(3000):
        filter_ = rng.choice(filters)
        if filter_ in present and rng.random() < 0.5:
            assert sublist.remove(filter_, present.pop(filter_))
        elif filter_ not in present:
            present[filter_] = Entry(filter_)
            sublist.insert(filter_, present[filter_])
        for subject in rng.sample(subjects, 20):
            expected = {f for f in present if _matches(f, subject)}
            assert _names(sublist, subject) == expected, (step, subject)
