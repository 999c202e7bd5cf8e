"""The set checker for a queue workload: every acknowledged value is read back exactly once.

The workload adds unique values (`f: "add"`) and, once every fault has
healed, reads everything back (`f: "read"`, an ok whose value is the list
read, duplicates kept). Against the last such read:

- lost: acknowledged (`ok`) but not read back: acknowledged data lost;
- duplicated: read back more than once;
- unexpected: read back but never added by anyone;
- failed but read: added with a definite failure (`fail`) yet present: the
  client was told it did not happen;
- recovered: indeterminate (`info`, or never completed) and present, which is
  allowed: the add may have taken effect before the client lost sight of it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from chaos.check.history import Op, OpType, pair


@dataclass(slots=True)
class SetResult:
    attempted: int = 0
    acknowledged: int = 0
    failed: int = 0
    indeterminate: int = 0
    read_count: int = 0
    lost: list[Any] = field(default_factory=list)
    duplicated: dict[Any, int] = field(default_factory=dict)
    unexpected: list[Any] = field(default_factory=list)
    failed_but_read: list[Any] = field(default_factory=list)
    recovered: int = 0
    final_read: bool = False

    @property
    def valid(self) -> bool:
        return self.final_read and not (
            self.lost or self.duplicated or self.unexpected or self.failed_but_read
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "final_read": self.final_read,
            "attempted": self.attempted,
            "acknowledged": self.acknowledged,
            "failed": self.failed,
            "indeterminate": self.indeterminate,
            "read_count": self.read_count,
            "recovered": self.recovered,
            "lost_count": len(self.lost),
            "lost": self.lost[:100],
            "duplicated_count": len(self.duplicated),
            "duplicated": [[value, count] for value, count in list(self.duplicated.items())[:100]],
            "unexpected": self.unexpected[:100],
            "failed_but_read": self.failed_but_read[:100],
        }


def check_set(history: Iterable[Op]) -> SetResult:
    result = SetResult()
    outcome: dict[Any, OpType] = {}
    final: list[Any] | None = None
    for operation in pair(history):
        if operation.invoke.f == "add":
            value = operation.invoke.value
            if value in outcome:
                raise ValueError(f"value {value!r} added twice: the workload must add unique values")
            outcome[value] = operation.outcome
        elif operation.invoke.f == "read" and operation.outcome is OpType.OK:
            final = list(operation.complete.value if operation.complete is not None else [])
    result.attempted = len(outcome)
    counts = Counter(outcome.values())
    result.acknowledged = counts[OpType.OK]
    result.failed = counts[OpType.FAIL]
    result.indeterminate = counts[OpType.INFO]
    if final is None:
        return result
    result.final_read = True
    result.read_count = len(final)
    seen = Counter(final)
    result.duplicated = {value: count for value, count in seen.items() if count > 1}
    for value, kind in outcome.items():
        present = value in seen
        if kind is OpType.OK and not present:
            result.lost.append(value)
        elif kind is OpType.FAIL and present:
            result.failed_but_read.append(value)
        elif kind is OpType.INFO and present:
            result.recovered += 1
    result.unexpected = [value for value in seen if value not in outcome]
    return result
