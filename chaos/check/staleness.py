"""Direct Get staleness: reads that returned an older version than one already acknowledged.

Direct Get answers from whichever replica gets the request, without a Raft
round, so it may be stale by design (nats-server's too); it is counted, not
judged. A `direct-read` (ok, `seq` = the sequence of the message returned, 0
when none was found) invoked at time t is stale when a write or cas of the
same key with a higher sequence was acknowledged before t; how stale is the
number of such acknowledged versions it missed.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from chaos.check.history import Op, OpType, pair


@dataclass(slots=True)
class StalenessResult:
    direct_reads: int = 0
    stale: int = 0
    max_versions_behind: int = 0
    stale_by_node: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "direct_reads": self.direct_reads,
            "stale": self.stale,
            "stale_fraction": round(self.stale / self.direct_reads, 4) if self.direct_reads else 0.0,
            "max_versions_behind": self.max_versions_behind,
            "stale_by_node": dict(sorted(self.stale_by_node.items())),
        }


def check_staleness(history: Iterable[Op]) -> StalenessResult:
    operations = pair(history)
    # per key: acknowledged writes as (ack time, seq), in ack time order
    acked: dict[str | None, list[tuple[int, int]]] = defaultdict(list)
    for operation in operations:
        done = operation.complete
        acknowledged = done is not None and done.type is OpType.OK and done.seq is not None
        if operation.invoke.f in ("write", "cas") and acknowledged:
            assert done is not None and done.seq is not None
            acked[operation.invoke.key].append((done.time, done.seq))
    for writes in acked.values():
        writes.sort()
    result = StalenessResult()
    by_node: Counter[str] = Counter()
    for operation in operations:
        done = operation.complete
        if operation.invoke.f != "direct-read" or done is None or done.type is not OpType.OK:
            continue
        result.direct_reads += 1
        writes = acked.get(operation.invoke.key, [])
        before = writes[: bisect.bisect_left(writes, (operation.invoke.time, -1))]
        returned = done.seq or 0
        missed = sum(1 for _, seq in before if seq > returned)
        if missed:
            result.stale += 1
            result.max_versions_behind = max(result.max_versions_behind, missed)
            by_node[done.node or "?"] += 1
    result.stale_by_node = dict(by_node)
    return result
