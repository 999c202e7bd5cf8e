"""Which stored groups and stores a node removes after catching up with the meta group."""

from __future__ import annotations

from cluster.meta.leftovers import find_leftovers

GROUPS = [
    "_meta_", "S-A-1", "S-A-2", "C-A-w-3", "C-A-w-4", "S-B-5", "X/_meta_", "X/S-A-1", "X/C-A-w-3",
]  # fmt: skip
STORES = ["A-1", "A-2", "B-5", "X/A-1"]


def test_the_home_account_removes_only_its_own_unwanted_replicas() -> None:
    found = find_leftovers(
        tag="",
        stored_groups=GROUPS,
        stored_stores=STORES,
        wanted_groups={"S-A-2", "C-A-w-4"},
        wanted_stores={"A-2"},
        running_groups={"S-B-5"},  # running without an assignment (being removed): not ours to drop
        open_stores={"B-5"},
    )
    # never the meta group, never another account's, never what runs or is open
    assert found.groups == ["C-A-w-3", "S-A-1"]
    assert found.stores == ["A-1"]


def test_an_account_removes_only_its_tagged_names() -> None:
    found = find_leftovers(
        tag="X/",
        stored_groups=GROUPS,
        stored_stores=STORES,
        wanted_groups={"X/S-A-1"},
        wanted_stores={"X/A-1"},
        running_groups=set(),
        open_stores=set(),
    )
    assert found.groups == ["X/C-A-w-3"]
    assert found.stores == []
