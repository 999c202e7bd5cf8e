"""Records a run's operations as they happen, in memory and as JSON lines on disk."""

from __future__ import annotations

import json
import time
from typing import IO, Any

from chaos.check.history import Op, OpType


class HistoryRecorder:
    """One clock for every process (nanoseconds since the recorder was made); each op goes to `out` at once,
    so a run that dies still leaves its history."""

    def __init__(self, out: IO[str] | None = None) -> None:
        self.ops: list[Op] = []
        self.out = out
        self._started = time.monotonic_ns()

    def now(self) -> int:
        return time.monotonic_ns() - self._started

    def _record(self, op: Op) -> Op:
        self.ops.append(op)
        if self.out is not None:
            self.out.write(json.dumps(op.to_json(), separators=(",", ":")) + "\n")
        return op

    def invoke(
        self, process: int, f: str, value: Any = None, key: str | None = None, node: str | None = None
    ) -> Op:
        return self._record(Op(OpType.INVOKE, process, f, value, self.now(), key=key, node=node))

    def complete(
        self,
        invoke: Op,
        type_: OpType,
        value: Any = None,
        seq: int | None = None,
        error: str | None = None,
        node: str | None = None,
    ) -> Op:
        return self._record(
            Op(type_, invoke.process, invoke.f, value, self.now(), key=invoke.key, node=node or invoke.node,
               error=error, seq=seq)
        )  # fmt: skip

    def flush(self) -> None:
        if self.out is not None:
            self.out.flush()
