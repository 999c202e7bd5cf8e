"""Message schedules (ADR-51, `allow_msg_schedules`): the rules, the clock arithmetic and the table.

A schedule is a stored message whose `Nats-Schedule` header holds `@at <RFC3339>`
(once), `@every <Go duration>` (at least 1 s), a 6-field cron spec with
seconds first, or a predefined `@hourly`-style name; `Nats-Schedule-Target`
names the stream subject that receives what it produces. The last message on
a subject is that subject's schedule: a schedule is stored as a subject
roll-up, so publishing a new one replaces the old.

When a schedule is due, the stream leader stores a produced message on the
target (cluster/stream/scheduler.py): the schedule's body and headers (or those
of the last message on `Nats-Schedule-Source`, when there is one) without the
schedule's own, expectation, msg-id, TTL and roll-up headers, plus
`Nats-Scheduler: <schedule subject>` and `Nats-Schedule-Next`: the next time
it fires (RFC3339, UTC) or `purge`, which makes every replica purge the
schedule subject when it applies the produced message (a client may send the
same pair to stop a schedule). `Nats-Schedule-TTL` and `Nats-Schedule-Rollup`
become the produced message's `Nats-TTL` and `Nats-Rollup`. Each rule, error
and header follows nats-server 2.15 (checked side by side in
tests/node/test_message_schedules.py).

Nothing here does I/O; callers pass the clock.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass

from cluster.api.errors import ApiError, JSErrors
from cluster.stream.config import StreamConfig
from storage.msg_ttl import InvalidTTLError, parse_go_duration, parse_ttl, slice_header
from storage.nats_time import format_rfc3339_nano, parse_rfc3339_nano
from subjects.grammar import filters_overlap, is_valid_subject

HDR_SCHEDULE = b"Nats-Schedule"
HDR_TARGET = b"Nats-Schedule-Target"
HDR_SOURCE = b"Nats-Schedule-Source"
HDR_TTL = b"Nats-Schedule-TTL"
HDR_TIME_ZONE = b"Nats-Schedule-Time-Zone"
HDR_ROLLUP = b"Nats-Schedule-Rollup"
HDR_NEXT = b"Nats-Schedule-Next"
HDR_SCHEDULER = b"Nats-Scheduler"
NEXT_PURGE = "purge"
# the headers a produced message does not inherit from its schedule (by prefix, as nats-server strips them)
_DROPPED_PREFIXES = ("Nats-Schedule", "Nats-Expected-")
_DROPPED = ("Nats-Msg-Id", "Nats-TTL", "Nats-Rollup")

SECOND_NS = 1_000_000_000
_PREDEFINED = {
    "@yearly": "0 0 0 1 1 *",
    "@annually": "0 0 0 1 1 *",
    "@monthly": "0 0 0 1 * *",
    "@weekly": "0 0 0 * * 0",
    "@daily": "0 0 0 * * *",
    "@midnight": "0 0 0 * * *",
    "@hourly": "0 0 * * * *",
}


class ScheduleError(Exception):
    def __init__(self, error: ApiError) -> None:
        super().__init__(error.description)
        self.error = error


@dataclass(frozen=True, slots=True)
class NextFire:
    at_ns: int
    repeat: bool


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode(errors="replace")


def schedule_zone(header: bytes) -> dt.tzinfo | None:
    """`Nats-Schedule-Time-Zone`: None when absent; an empty or unknown zone is refused (10223)."""
    raw = _text(slice_header(HDR_TIME_ZONE, header))
    if raw is None:
        return None
    if raw == "UTC":
        return dt.UTC
    if raw == "Local":
        return dt.datetime.now().astimezone().tzinfo
    try:
        return zoneinfo.ZoneInfo(raw) if raw else _bad_zone()
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return _bad_zone()


def _bad_zone() -> dt.tzinfo:
    raise ScheduleError(JSErrors.MESSAGE_SCHEDULES_TIME_ZONE_INVALID())


def _round_second(ns: int) -> int:
    """Go's Time.Round(time.Second): halves round up."""
    return (ns + SECOND_NS // 2) // SECOND_NS * SECOND_NS


def next_fire(pattern: str, zone: dt.tzinfo | None, ts_ns: int, now_ns: int) -> NextFire | None:
    """When a schedule set at `ts_ns` fires next, seen at `now_ns`; None for a pattern nats-server refuses.

    A repeating schedule whose next time has passed fires once, a period from now, not once per
    missed period (as after a restart)."""
    if pattern.startswith("@at "):
        if zone is not None:
            return None
        try:
            return NextFire(parse_rfc3339_nano(pattern[4:]), repeat=False)
        except ValueError:
            return None
    if pattern.startswith("@every "):
        if zone is not None:
            return None
        try:
            every = parse_go_duration(pattern[7:])
        except ValueError:
            return None
        if every < SECOND_NS:
            return None
        at = _round_second(ts_ns) + every
        if at < now_ns:
            at = _round_second(now_ns) + every
        return NextFire(at, repeat=True)
    spec = _PREDEFINED.get(pattern, pattern)
    at = _cron_next(spec, zone, ts_ns)
    if at is not None and at < now_ns:
        at = _cron_next(spec, zone, _round_second(now_ns))
    return None if at is None else NextFire(at, repeat=True)


def _cron_next(spec: str, zone: dt.tzinfo | None, after_ns: int) -> int | None:
    """The first time after `after_ns` matching a 6-field cron spec (seconds first), in `zone` (UTC)."""
    if len(spec.split()) != 6:
        return None
    # imported at the first cron schedule, not at every node's start: croniter's import (with its check of
    # the platform's word size, which runs `file` in a subprocess) was 60 ms of each start
    from croniter import croniter

    start = dt.datetime.fromtimestamp(after_ns // SECOND_NS, zone or dt.UTC)
    try:
        nxt = croniter(spec, start, second_at_beginning=True).get_next(dt.datetime)
    except (ValueError, KeyError, OverflowError):  # croniter's CroniterError is a ValueError
        return None
    return int(nxt.timestamp()) * SECOND_NS


def check_schedule(cfg: StreamConfig, subject: str, header: bytes, now_ns: int) -> bytes | None:
    """The checks of a publish holding `Nats-Schedule`, in nats-server's order; raises ScheduleError.

    Returns the header block to store (with `Nats-Rollup: sub` added when the publisher left it
    out), or None when the header block holds no schedule."""
    raw = slice_header(HDR_SCHEDULE, header)
    if raw is None:
        return None
    try:
        zone = schedule_zone(header)
        fire = next_fire(raw.decode(errors="replace"), zone, now_ns, now_ns)
    except ScheduleError as exc:
        raise ScheduleError(exc.error if cfg.allow_msg_schedules else JSErrors.MESSAGE_SCHEDULES_DISABLED()) from None
    if fire is None:
        raise ScheduleError(
            JSErrors.MESSAGE_SCHEDULES_PATTERN_INVALID()
            if cfg.allow_msg_schedules
            else JSErrors.MESSAGE_SCHEDULES_DISABLED()
        )
    if not cfg.allow_msg_schedules:
        raise ScheduleError(JSErrors.MESSAGE_SCHEDULES_DISABLED())
    ttl = _text(slice_header(HDR_TTL, header))
    if ttl:
        try:
            parse_ttl(ttl)
        except InvalidTTLError:
            raise ScheduleError(JSErrors.MESSAGE_SCHEDULES_TTL_INVALID()) from None
    rollup = _text(slice_header(HDR_ROLLUP, header))
    if rollup and rollup != "sub":
        raise ScheduleError(JSErrors.MESSAGE_SCHEDULES_ROLLUP_INVALID())
    if ttl and not cfg.allow_msg_ttl:
        raise ScheduleError(JSErrors.MESSAGE_TTL_DISABLED())
    target = _text(slice_header(HDR_TARGET, header)) or ""
    if not target or not is_valid_subject(target) or target == subject:
        raise ScheduleError(JSErrors.MESSAGE_SCHEDULES_TARGET_INVALID())
    source = _text(slice_header(HDR_SOURCE, header)) or ""
    if source and (source in (target, subject) or not is_valid_subject(source)):
        raise ScheduleError(JSErrors.MESSAGE_SCHEDULES_SOURCE_INVALID())
    if not any(filters_overlap(s, target) for s in cfg.subjects):
        raise ScheduleError(JSErrors.MESSAGE_SCHEDULES_TARGET_INVALID())
    if source and not any(filters_overlap(s, source) for s in cfg.subjects):
        raise ScheduleError(JSErrors.MESSAGE_SCHEDULES_SOURCE_INVALID())
    own_rollup = _text(slice_header(b"Nats-Rollup", header))
    if own_rollup is None:
        return header[:-2] + b"Nats-Rollup: sub\r\n\r\n"
    if own_rollup != "sub":
        raise ScheduleError(JSErrors.MESSAGE_SCHEDULES_ROLLUP_INVALID())
    return header


def check_schedule_stop(
    cfg: StreamConfig, subject: str, header: bytes, last_header_on: Callable[[str], bytes | None] | None
) -> None:
    """A client's `Nats-Schedule-Next` (only `purge`, with `Nats-Scheduler` naming another subject
    that holds a schedule or nothing) or a lone `Nats-Scheduler`; raises ScheduleError (10212).

    `last_header_on(subject)`: the header block of the subject's last message (b"" without
    headers), None when it has none; None to skip that check (no applied state at hand)."""
    nxt = _text(slice_header(HDR_NEXT, header))
    scheduler = _text(slice_header(HDR_SCHEDULER, header))
    if nxt is None:
        if scheduler is not None:
            raise ScheduleError(JSErrors.MESSAGE_SCHEDULES_SCHEDULER_INVALID())
        return
    if nxt != NEXT_PURGE or not scheduler or scheduler == subject or not is_valid_subject(scheduler):
        raise ScheduleError(JSErrors.MESSAGE_SCHEDULES_SCHEDULER_INVALID())
    if not cfg.allow_msg_schedules:
        raise ScheduleError(JSErrors.MESSAGE_SCHEDULES_DISABLED())
    if last_header_on is not None:
        last = last_header_on(scheduler)
        if last is not None and slice_header(HDR_SCHEDULE, last) is None:
            raise ScheduleError(JSErrors.MESSAGE_SCHEDULES_SCHEDULER_INVALID())


def scheduler_to_purge(header: bytes) -> str | None:
    """The schedule subject a stored message stops (`Nats-Schedule-Next: purge` + `Nats-Scheduler`)."""
    if _text(slice_header(HDR_NEXT, header)) != NEXT_PURGE:
        return None
    return _text(slice_header(HDR_SCHEDULER, header)) or None


@dataclass(frozen=True, slots=True)
class Schedule:
    """A stored schedule message, as the leader reads it back to run it."""

    subject: str
    seq: int
    pattern: str
    zone: dt.tzinfo | None
    target: str
    source: str
    ttl: str
    rollup: str


def read_schedule(subject: str, seq: int, header: bytes | None) -> Schedule | None:
    """The schedule a stored message holds; None when it holds none, or one nats-server would drop."""
    if not header:
        return None
    pattern = _text(slice_header(HDR_SCHEDULE, header))
    target = _text(slice_header(HDR_TARGET, header))
    if not pattern or not target:
        return None
    try:
        zone = schedule_zone(header)
    except ScheduleError:
        return None
    ttl = _text(slice_header(HDR_TTL, header)) or ""
    if ttl:
        try:
            parse_ttl(ttl)
        except InvalidTTLError:
            return None
    rollup = _text(slice_header(HDR_ROLLUP, header)) or ""
    source = _text(slice_header(HDR_SOURCE, header)) or ""
    return Schedule(subject, seq, pattern, zone, target, source, ttl, rollup)


def produced_header(schedule: Schedule, header: bytes | None, fire: NextFire | None) -> bytes:
    """The header block of what `schedule` stores on its target when it fires: `header` (the
    schedule's, or its source message's) without the inherited headers, with the scheduler's.
    `fire`: when it fires next (None: it was a one-off, which the produced message purges)."""
    lines = []
    if header:
        for line in header.split(b"\r\n")[1:]:
            name = line.partition(b":")[0].decode(errors="replace")
            if not line or name.startswith(_DROPPED_PREFIXES) or name in _DROPPED:
                continue
            lines.append(line)
    lines.append(b"Nats-Scheduler: " + schedule.subject.encode())
    nxt = NEXT_PURGE if fire is None or not fire.repeat else format_rfc3339_nano(fire.at_ns)
    lines.append(b"Nats-Schedule-Next: " + nxt.encode())
    if schedule.ttl:
        lines.append(b"Nats-TTL: " + schedule.ttl.encode())
    if schedule.rollup:
        lines.append(b"Nats-Rollup: " + schedule.rollup.encode())
    return b"NATS/1.0\r\n" + b"".join(line + b"\r\n" for line in lines) + b"\r\n"


def announced_next_ns(header: bytes | None) -> int | None:
    """The next firing a produced message announced (`Nats-Schedule-Next: <RFC3339>`), or None."""
    raw = _text(slice_header(HDR_NEXT, header))
    if not raw or raw == NEXT_PURGE:
        return None
    try:
        return parse_rfc3339_nano(raw)
    except ValueError:
        return None


class ScheduleTable:
    """The leader's schedules: when each fires next, and which have a produced message in flight."""

    def __init__(self) -> None:
        self._due: dict[str, tuple[int, int]] = {}  # schedule subject -> (seq, fire at)
        self._inflight: set[str] = set()

    def __len__(self) -> int:
        return len(self._due)

    def put(self, subject: str, seq: int, at_ns: int) -> None:
        self._due[subject] = (seq, at_ns)
        self._inflight.discard(subject)

    def remove(self, subject: str) -> None:
        self._due.pop(subject, None)
        self._inflight.discard(subject)

    def fired(self, subject: str, at_ns: int | None) -> None:
        """A produced message of `subject` was applied: it fires next at `at_ns` (None: it stopped)."""
        if at_ns is None:
            self.remove(subject)
            return
        entry = self._due.get(subject)
        if entry is not None:
            self._due[subject] = (entry[0], at_ns)
        self._inflight.discard(subject)

    def retry(self, subject: str, at_ns: int) -> None:
        """The produced message could not be stored: fire again at `at_ns`."""
        self.fired(subject, at_ns)

    def take_due(self, now_ns: int) -> list[tuple[str, int, int]]:
        """(subject, seq, fire time) of the schedules due now, marked in flight, oldest seq first."""
        due = [
            (subject, seq, at)
            for subject, (seq, at) in self._due.items()
            if at <= now_ns and subject not in self._inflight
        ]
        due.sort(key=lambda item: item[1])
        self._inflight.update(subject for subject, _, _ in due)
        return due

    def next_deadline_ns(self) -> int | None:
        return min((at for subject, (_, at) in self._due.items() if subject not in self._inflight), default=None)
