"""Operations as Jepsen records them, and histories as JSON lines.

Each client operation is two records with the same `process`: an `invoke`
when it is sent and a completion when its outcome is known: `ok` (it took
effect), `fail` (it certainly did not) or `info` (unknown: a timeout, a lost
connection; it may or may not have taken effect). `time` is nanoseconds since
the run started, on one monotonic clock, so intervals of different processes
compare.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any


class OpType(enum.StrEnum):
    INVOKE = "invoke"
    OK = "ok"
    FAIL = "fail"
    INFO = "info"


@dataclass(frozen=True, slots=True)
class Op:
    type: OpType
    process: int
    f: str
    value: Any
    time: int
    key: str | None = None
    node: str | None = None
    error: str | None = None
    # the stream sequence where one is known: a write's PubAck, the message a read returned
    seq: int | None = None

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "type": str(self.type),
            "process": self.process,
            "f": self.f,
            "value": self.value,
            "time": self.time,
        }
        for name in ("key", "node", "error", "seq"):
            if getattr(self, name) is not None:
                record[name] = getattr(self, name)
        return record

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> Op:
        value = record.get("value")
        return cls(
            type=OpType(record["type"]),
            process=int(record["process"]),
            f=str(record["f"]),
            value=tuple(value) if isinstance(value, list) and record["f"] == "cas" else value,
            time=int(record["time"]),
            key=record.get("key"),
            node=record.get("node"),
            error=record.get("error"),
            seq=record.get("seq"),
        )


@dataclass(frozen=True, slots=True)
class Operation:
    """One invocation paired with its completion (None when the history ended first: indeterminate)."""

    invoke: Op
    complete: Op | None

    @property
    def outcome(self) -> OpType:
        return OpType.INFO if self.complete is None else self.complete.type

    @property
    def value(self) -> Any:
        """The completion's value when it has one (a read's result), else the invocation's."""
        if self.complete is not None and self.complete.type is OpType.OK and self.complete.value is not None:
            return self.complete.value
        return self.invoke.value


def pair(history: Iterable[Op]) -> list[Operation]:
    """Each invocation with its process's next completion, in invocation order.

    A process has at most one operation in flight, as in Jepsen; a process whose operation ends in
    `info` may not be reused (its operation might still take effect), and the recorder never does.
    """
    open_: dict[int, Op] = {}
    done: list[Operation] = []
    order: dict[int, int] = {}
    for op in history:
        if op.type is OpType.INVOKE:
            if op.process in open_:
                raise ValueError(f"process {op.process} invoked {op.f} with an operation still open")
            open_[op.process] = op
            order[id(op)] = len(order)
            continue
        invoke = open_.pop(op.process, None)
        if invoke is None:
            raise ValueError(f"process {op.process} completed {op.f} without an invocation")
        done.append(Operation(invoke, op))
    done.extend(Operation(invoke, None) for invoke in open_.values())
    done.sort(key=lambda operation: (operation.invoke.time, order[id(operation.invoke)]))
    return done


def write_jsonl(ops: Iterable[Op], out: IO[str]) -> None:
    for op in ops:
        out.write(json.dumps(op.to_json(), separators=(",", ":")) + "\n")


def read_jsonl(path: str | Path) -> list[Op]:
    with open(path, encoding="utf-8") as source:
        return list(parse_jsonl(source))


def parse_jsonl(lines: Iterable[str]) -> Iterator[Op]:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield Op.from_json(json.loads(line))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"history line {number}: {exc}") from exc
