"""The staleness bound a copy derives from where its source said it was (a mirror's leader, from its
origin's fetch answers; followers' positions come from the nodes' beacons, tests/cluster/test_positions.py)."""

from cluster.direct_get.staleness import WINDOW_NS, StalenessTracker

MS = 1_000_000


def test_caught_up_with_a_beacon_means_at_most_its_age() -> None:
    tracker = StalenessTracker(started_ns=0)
    tracker.observe(last_seq=10, sent_ns=1_000 * MS)
    tracker.observe(last_seq=20, sent_ns=1_050 * MS)
    # applied 20: everything the leader had at 1050 ms
    assert tracker.staleness_ns(applied_seq=20, now_ns=1_060 * MS) == 10 * MS
    # applied only 15: caught up with the 1000 ms beacon, not the 1050 ms one
    assert tracker.staleness_ns(applied_seq=15, now_ns=1_060 * MS) == 60 * MS


def test_a_cut_off_follower_grows_stale_without_new_beacons() -> None:
    tracker = StalenessTracker(started_ns=0)
    tracker.observe(last_seq=5, sent_ns=100 * MS)
    assert tracker.staleness_ns(5, now_ns=150 * MS) == 50 * MS
    assert tracker.staleness_ns(5, now_ns=900 * MS) == 800 * MS


def test_behind_every_beacon_counts_as_beyond_the_window() -> None:
    tracker = StalenessTracker(started_ns=0)
    tracker.observe(last_seq=50, sent_ns=100 * MS)
    assert tracker.staleness_ns(applied_seq=49, now_ns=110 * MS) >= WINDOW_NS
    # a fresh replica that has heard nothing is not trusted either
    assert StalenessTracker(started_ns=0).staleness_ns(0, now_ns=1 * MS) >= WINDOW_NS


def test_late_beacons_are_ignored_and_old_ones_expire() -> None:
    tracker = StalenessTracker(started_ns=0)
    tracker.observe(last_seq=7, sent_ns=200 * MS)
    tracker.observe(last_seq=3, sent_ns=100 * MS)  # arrived out of order: dropped
    assert tracker.staleness_ns(applied_seq=3, now_ns=210 * MS) >= WINDOW_NS
    later = 200 * MS + 2 * WINDOW_NS
    tracker.observe(last_seq=8, sent_ns=later - MS)
    assert tracker.staleness_ns(applied_seq=8, now_ns=later) == MS

