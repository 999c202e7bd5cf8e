"""Message schedules' pure parts (cluster/stream/schedules.py) and the purge a produced message makes on
apply. nats-server's replies are compared in tests/node/test_message_schedules.py."""

from __future__ import annotations

import dataclasses
import datetime as dt
import zoneinfo

import pytest

from cluster.api.errors import JSErrors
from cluster.stream.config import StreamConfig
from cluster.stream.config_check import normalize_stream_config
from cluster.stream.entries import StoreMsg
from cluster.stream.machine import Stored, StreamStateMachine
from cluster.stream.publish import Accepted, prepare_publish
from cluster.stream.schedules import (
    SECOND_NS,
    NextFire,
    Schedule,
    ScheduleError,
    ScheduleTable,
    check_schedule_stop,
    next_fire,
    produced_header,
)
from gateway.headers import decode_headers, encode_headers
from raft.types import Entry, EntryType
from storage.memory import MemoryStreamStore

CFG = normalize_stream_config(StreamConfig(name="S", subjects=("sched.>", "out.>"), allow_msg_schedules=True))
NOW = int(dt.datetime(2026, 11, 26, 10, 30, 15, 400_000, tzinfo=dt.UTC).timestamp() * 1e9)


def at(*args: int, tz: dt.tzinfo = dt.UTC) -> int:
    return int(dt.datetime(*args, tzinfo=tz).timestamp()) * SECOND_NS


def test_a_one_off_fires_at_its_time_even_if_past_and_takes_no_zone() -> None:
    assert next_fire("@at 2026-11-26T12:00:00+01:00", None, NOW, NOW) == NextFire(at(2026, 11, 26, 11), False)
    assert next_fire("@at 2020-01-01T00:00:00Z", None, NOW, NOW) == NextFire(at(2020, 1, 1), False)
    assert next_fire("@at 2026-11-26T12:00:00Z", dt.UTC, NOW, NOW) is None
    assert next_fire("@at 2026-11-26", None, NOW, NOW) is None  # a date alone is no RFC3339 time


def test_every_counts_from_the_rounded_set_time_and_skips_missed_periods() -> None:
    set_at = at(2026, 11, 26, 10, 30, 10)
    assert next_fire("@every 2s", None, set_at, set_at) == NextFire(set_at + 2 * SECOND_NS, True)
    # a restart long after: one firing, a period from now (rounded to the second)
    assert next_fire("@every 2s", None, set_at, NOW) == NextFire(
        at(2026, 11, 26, 10, 30, 15) + 2 * SECOND_NS, True
    )
    assert next_fire("@every 999ms", None, NOW, NOW) is None
    assert next_fire("@every soon", None, NOW, NOW) is None


def test_cron_has_six_fields_seconds_first_names_and_zones() -> None:
    assert next_fire("30 * * * * *", None, NOW, NOW) == NextFire(at(2026, 11, 26, 10, 30, 30), True)
    assert next_fire("@hourly", None, NOW, NOW) == NextFire(at(2026, 11, 26, 11), True)
    assert next_fire("0 0 0 * * mon", None, NOW, NOW) == NextFire(at(2026, 11, 30), True)
    amsterdam = zoneinfo.ZoneInfo("Europe/Amsterdam")
    assert next_fire("@daily", amsterdam, NOW, NOW) == NextFire(at(2026, 11, 27, tz=amsterdam), True)
    assert next_fire("* * * * *", None, NOW, NOW) is None
    assert next_fire("61 * * * * *", None, NOW, NOW) is None


def test_a_produced_message_drops_the_schedule_headers_and_names_its_scheduler() -> None:
    schedule = Schedule("sched.a", 3, "@every 1s", None, "out.a", "", "5m", "sub")
    header = encode_headers(
        [
            ("Nats-Schedule", "@every 1s"),
            ("Nats-Schedule-Target", "out.a"),
            ("Nats-Msg-Id", "m"),
            ("Nats-Expected-Last-Sequence", "2"),
            ("Nats-Rollup", "sub"),
            ("Nats-TTL", "1h"),
            ("Custom", "kept"),
        ]
    )
    produced = decode_headers(produced_header(schedule, header, NextFire(at(2026, 11, 26, 10, 30, 16), True)))
    assert produced.fields == [
        ("Custom", "kept"),
        ("Nats-Scheduler", "sched.a"),
        ("Nats-Schedule-Next", "2026-11-26T10:30:16Z"),
        ("Nats-TTL", "5m"),
        ("Nats-Rollup", "sub"),
    ]
    once = decode_headers(produced_header(dataclasses.replace(schedule, ttl="", rollup=""), None, None))
    assert once.fields == [("Nats-Scheduler", "sched.a"), ("Nats-Schedule-Next", "purge")]


@pytest.mark.parametrize(
    ("fields", "last", "error"),
    [
        ([("Nats-Schedule-Next", "later"), ("Nats-Scheduler", "sched.a")], None, "scheduler"),
        ([("Nats-Schedule-Next", "purge"), ("Nats-Scheduler", "out.x")], None, "scheduler"),  # itself
        ([("Nats-Scheduler", "sched.a")], None, "scheduler"),
        ([("Nats-Schedule-Next", "purge"), ("Nats-Scheduler", "sched.a")], b"", "scheduler"),  # no schedule
        ([("Nats-Schedule-Next", "purge"), ("Nats-Scheduler", "sched.a")], None, None),  # nothing there
    ],
)
def test_stopping_a_schedule(fields: list[tuple[str, str]], last: bytes | None, error: str | None) -> None:
    header = encode_headers(fields)
    if error is None:
        check_schedule_stop(CFG, "out.x", header, lambda subject: last)
        return
    with pytest.raises(ScheduleError) as raised:
        check_schedule_stop(CFG, "out.x", header, lambda subject: last)
    assert raised.value.error == JSErrors.MESSAGE_SCHEDULES_SCHEDULER_INVALID()


def test_the_table_hands_out_due_schedules_once_until_they_fired() -> None:
    table = ScheduleTable()
    table.put("sched.b", 2, 100)
    table.put("sched.a", 1, 50)
    assert table.next_deadline_ns() == 50
    assert table.take_due(100) == [("sched.a", 1, 50), ("sched.b", 2, 100)]
    assert table.take_due(1000) == [] and table.next_deadline_ns() is None  # in flight
    table.fired("sched.a", 1050)
    table.fired("sched.b", None)  # a one-off, purged
    assert len(table) == 1 and table.take_due(2000) == [("sched.a", 1, 1050)]


def test_a_schedule_is_stored_as_a_roll_up_and_a_purge_header_stops_it_on_apply() -> None:
    machine = StreamStateMachine(MemoryStreamStore(), CFG, sync_writes=False)
    schedule = encode_headers([("Nats-Schedule", "@every 1s"), ("Nats-Schedule-Target", "out.a")])
    decisions = [prepare_publish(CFG, "sched.a", schedule, b"s", NOW + n, machine) for n in range(2)]
    entries = []
    for n, decision in enumerate(decisions):
        assert isinstance(decision, Accepted)
        assert decode_headers(decision.entry.header).get("Nats-Rollup") == "sub"
        entries.append(Entry(term=1, index=n + 1, type=EntryType.NORMAL, data=decision.entry.encode()))
    machine.apply(entries)
    assert machine.store.state().messages == 1  # the second schedule replaced the first
    stop = encode_headers([("Nats-Schedule-Next", "purge"), ("Nats-Scheduler", "sched.a")])
    (result,) = machine.apply(
        [Entry(term=1, index=3, type=EntryType.NORMAL, data=StoreMsg("out.a", stop, b"", NOW + 5).encode())]
    )
    assert isinstance(result, Stored)
    assert machine.last_header_on("sched.a") is None
    assert machine.store.state().messages == 1
