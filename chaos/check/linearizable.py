"""Linearizability of a register history: the WGL search, as Porcupine implements it.

Wing and Gong's search with Lowe's memoisation ("just-in-time
linearizability"): walk the history's call and return events in time order;
at a call, try to linearize that operation now (the model accepts its result
from the current state, and this set of linearized operations with this
state was not tried before), lifting it and its return out of the list; at a
return whose operation is not linearized yet, nothing else can go first:
backtrack to the last choice. The history is linearizable when the list
empties. Registers of different keys are independent (P-compositionality),
so each key is searched on its own, which keeps every search small.

Following Jepsen: an operation that failed (`fail`) never happened and is
left out; a read whose outcome is unknown (`info`) constrains nothing and is
left out; a write or compare-and-set whose outcome is unknown may have taken
effect at any time after its invocation, or never: its return is placed after
every other event (linearizing it last is the same as it never happening, as
nothing observes the state after it).

The search is exponential in the worst case: each key's search stops at a
deadline and the verdict is then "unknown", never a guess.
"""

from __future__ import annotations

import enum
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from chaos.check.history import Op, Operation, OpType, pair

_NEVER = float("inf")


class Verdict(enum.StrEnum):
    LINEARIZABLE = "linearizable"
    NOT_LINEARIZABLE = "not-linearizable"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class RegisterOp:
    """One operation of one key's register: `f` read, write or cas; `arg` the written value or (expected,
    new); `result` a read's value; `definite` False when the outcome is unknown."""

    index: int
    f: str
    arg: Any
    result: Any
    call: float
    ret: float
    definite: bool
    process: int

    def describe(self) -> str:
        what = {"read": f"read -> {self.result!r}", "write": f"write {self.arg!r}"}.get(
            self.f, f"cas {self.arg!r}"
        )
        return f"process {self.process}: {what} [{self.call:.0f}, {self.ret:.0f}]" + (
            "" if self.definite else " (outcome unknown)"
        )


def register_step(state: Any, op: RegisterOp) -> tuple[bool, Any]:
    """The register's sequential specification: (whether `op` may happen in `state`, the state after)."""
    if op.f == "read":
        return state == op.result, state
    if op.f == "write":
        return True, op.arg
    expected, new = op.arg
    if state == expected:
        return True, new
    # a cas that did not find its value fails; only an unknown one may have done so and be kept
    return not op.definite, state


@dataclass(slots=True)
class KeyResult:
    key: str | None
    verdict: Verdict
    operations: int
    # when not linearizable: the operation whose return came with no way to linearize it, at the deepest
    # point the search reached, and the operations linearized before it there
    stuck_at: str | None = None
    linearized_before: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "key": self.key,
            "verdict": str(self.verdict),
            "operations": self.operations,
        }
        if self.stuck_at is not None:
            record["stuck_at"] = self.stuck_at
            record["linearized_before"] = self.linearized_before[-10:]
        return record


@dataclass(slots=True)
class LinearizabilityResult:
    keys: list[KeyResult]

    @property
    def verdict(self) -> Verdict:
        verdicts = {result.verdict for result in self.keys}
        if Verdict.NOT_LINEARIZABLE in verdicts:
            return Verdict.NOT_LINEARIZABLE
        if Verdict.UNKNOWN in verdicts:
            return Verdict.UNKNOWN
        return Verdict.LINEARIZABLE

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": str(self.verdict),
            "keys": len(self.keys),
            "operations": sum(result.operations for result in self.keys),
            "failures": [r.to_json() for r in self.keys if r.verdict is not Verdict.LINEARIZABLE],
        }


def register_ops(operations: Iterable[Operation]) -> dict[str | None, list[RegisterOp]]:
    """The operations the search considers, per key (see the module's rules for fail and info)."""
    by_key: dict[str | None, list[RegisterOp]] = defaultdict(list)
    for operation in operations:
        invoke = operation.invoke
        if invoke.f not in ("read", "write", "cas") or operation.outcome is OpType.FAIL:
            continue
        definite = operation.outcome is OpType.OK
        if invoke.f == "read" and not definite:
            continue
        assert operation.complete is not None or not definite
        ops = by_key[invoke.key]
        ops.append(
            RegisterOp(
                index=len(ops),
                f=invoke.f,
                arg=tuple(invoke.value) if invoke.f == "cas" else invoke.value,
                result=operation.complete.value if invoke.f == "read" and operation.complete else None,
                call=invoke.time,
                ret=operation.complete.time if definite and operation.complete else _NEVER,
                definite=definite,
                process=invoke.process,
            )
        )
    return by_key


class _Entry:
    """A call or return event in the doubly linked list the search lifts operations out of."""

    __slots__ = ("match", "next", "op", "prev")

    def __init__(self, op: RegisterOp | None) -> None:
        self.op = op
        self.match: _Entry | None = None  # on a call: its return
        self.prev: _Entry | None = None
        self.next: _Entry | None = None


def _event_list(ops: list[RegisterOp]) -> _Entry:
    """The sentinel head of the list of events in time order; at equal times calls come first (concurrent)."""
    events: list[tuple[float, int, int, _Entry]] = []
    for op in ops:
        call, ret = _Entry(op), _Entry(op)
        call.match = ret
        events.append((op.call, 0, op.index, call))
        events.append((op.ret, 1, op.index, ret))
    events.sort(key=lambda event: event[:3])
    head = _Entry(None)
    last = head
    for *_, entry in events:
        last.next, entry.prev = entry, last
        last = entry
    return head


def _lift(call: _Entry) -> None:
    ret = call.match
    assert call.prev is not None and ret is not None and ret.prev is not None
    call.prev.next = call.next
    if call.next is not None:
        call.next.prev = call.prev
    ret.prev.next = ret.next
    if ret.next is not None:
        ret.next.prev = ret.prev


def _unlift(call: _Entry) -> None:
    ret = call.match
    assert call.prev is not None and ret is not None and ret.prev is not None
    ret.prev.next = ret
    if ret.next is not None:
        ret.next.prev = ret
    call.prev.next = call
    if call.next is not None:
        call.next.prev = call


def check_key(
    ops: list[RegisterOp],
    deadline: float,
    key: str | None = None,
    initial: Any = None,
    step: Callable[[Any, RegisterOp], tuple[bool, Any]] = register_step,
    clock: Callable[[], float] = time.monotonic,
) -> KeyResult:
    """Search one key's history; UNKNOWN if `clock()` passes `deadline` first."""
    head = _event_list(ops)
    state = initial
    linearized = 0  # bit i: operation i is linearized
    tried: set[tuple[int, Any]] = set()
    choices: list[tuple[_Entry, Any]] = []
    deepest: tuple[int, RegisterOp | None, list[RegisterOp]] = (-1, None, [])
    entry = head.next
    steps = 0
    while head.next is not None:
        steps += 1
        if steps % 4096 == 0 and clock() > deadline:
            return KeyResult(key, Verdict.UNKNOWN, len(ops))
        assert entry is not None
        op = entry.op
        assert op is not None
        if entry.match is not None:  # a call: try to linearize it here
            allowed, after = step(state, op)
            if allowed:
                with_op = linearized | (1 << op.index)
                if (with_op, after) not in tried:
                    tried.add((with_op, after))
                    choices.append((entry, state))
                    state, linearized = after, with_op
                    _lift(entry)
                    entry = head.next
                    continue
            entry = entry.next
            continue
        # a return whose operation is not linearized: undo the last choice and try the next call
        if len(choices) > deepest[0]:
            deepest = (len(choices), op, [chosen.op for chosen, _ in choices if chosen.op is not None])
        if not choices:
            return _not_linearizable(key, ops, deepest)
        entry, state = choices.pop()
        assert entry.op is not None
        linearized &= ~(1 << entry.op.index)
        _unlift(entry)
        entry = entry.next
    return KeyResult(key, Verdict.LINEARIZABLE, len(ops))


def _not_linearizable(
    key: str | None, ops: list[RegisterOp], deepest: tuple[int, RegisterOp | None, list[RegisterOp]]
) -> KeyResult:
    _, stuck, before = deepest
    return KeyResult(
        key,
        Verdict.NOT_LINEARIZABLE,
        len(ops),
        stuck_at=stuck.describe() if stuck is not None else None,
        linearized_before=[op.describe() for op in before],
    )


def check_register(
    history: Iterable[Op], time_limit: float = 60.0, initial: Any = None
) -> LinearizabilityResult:
    """Every key's register history searched on its own; `time_limit` seconds in all."""
    deadline = time.monotonic() + time_limit
    by_key = register_ops(pair(history))
    results = [check_key(ops, deadline, key, initial) for key, ops in sorted(by_key.items(), key=_key_order)]
    return LinearizabilityResult(results)


def _key_order(item: tuple[str | None, list[RegisterOp]]) -> str:
    return "" if item[0] is None else str(item[0])
