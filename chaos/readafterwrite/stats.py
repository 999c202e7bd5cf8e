"""Read samples and their per-(lag, path, responder) summary rows."""

from __future__ import annotations

import enum
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass


class ReadPath(enum.StrEnum):
    MSG_GET = "msg_get"
    DIRECT_GET = "direct_get"
    DIRECT_GET_MIN_LAST_SEQ = "direct_get_min_last_seq"


class Outcome(enum.StrEnum):
    MESSAGE = "message"  # a message came back (fresh or stale)
    NOT_FOUND = "not_found"  # 404: the responder does not have the key yet (stale)
    REFUSED = "refused"  # 412 Min Last Sequence: behind, and said so instead of answering
    ERROR = "error"  # timeout, no responders, any other status


@dataclass(frozen=True, slots=True)
class ReadSample:
    """One read right after a write that the stream acknowledged at `acked_seq`."""

    lag_ms: int
    path: ReadPath
    responder: str
    outcome: Outcome
    acked_seq: int
    returned_seq: int = 0
    latency_ms: float = 0.0
    # how far the responder was behind the acknowledged write (0 unless stale)
    behind_seq: int = 0
    behind_ms: float = 0.0
    # the node whose client connection the read went out on ("" when it is the responder's by design);
    # under the `random` Direct Get policy it is often not the responder: the read crossed a route
    via: str = ""

    @property
    def forwarded(self) -> bool:
        return bool(self.via) and self.via != self.responder

    @property
    def answered(self) -> bool:
        """A read that returned data (or 404): it counts towards `reads` and may be stale."""
        return self.outcome in (Outcome.MESSAGE, Outcome.NOT_FOUND)

    @property
    def stale(self) -> bool:
        return self.answered and self.returned_seq < self.acked_seq


@dataclass(frozen=True, slots=True)
class ResultRow:
    lag_ms: int
    path: str
    responder: str
    # its links carried the injected latency in this round (never at lag 0)
    lagging: bool
    # one of the nodes chosen to be lagged (whatever this round's latency), for comparing across rounds
    lag_target: bool
    reads: int
    stale: int
    stale_fraction: float
    refused: int
    errors: int
    behind_seq_p50: float
    behind_seq_p99: float
    behind_ms_p50: float
    behind_ms_p99: float
    latency_ms_p50: float
    latency_ms_p99: float
    # answered reads that reached this responder over a route from another node's client connection
    forwarded: int = 0

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile (0 for no values), so p99 of few samples is an observed value."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return float(ordered[rank - 1])


_PATH_ORDER = {path.value: index for index, path in enumerate(ReadPath)}


def local_answer_fraction(samples: Iterable[ReadSample]) -> float | None:
    """Of the answered Direct Gets, the share the node they were sent to answered itself.

    About 1 on a `local-first` cluster, about 1/responders on a `random` one; None without such reads.
    """
    direct = [s for s in samples if s.path is not ReadPath.MSG_GET and s.via and s.answered]
    if not direct:
        return None
    return round(sum(1 for s in direct if not s.forwarded) / len(direct), 4)


def summarize(samples: Iterable[ReadSample], lag_targets: Iterable[str]) -> list[ResultRow]:
    """One row per (lag, path, responder); `behind_*` percentiles are over stale reads only.

    Latency percentiles cover every read that got an answer, refusals included:
    a 412 after waiting is what the client experienced on that path.
    """
    targets = frozenset(lag_targets)
    groups: dict[tuple[int, str, str], list[ReadSample]] = defaultdict(list)
    for sample in samples:
        groups[(sample.lag_ms, sample.path.value, sample.responder)].append(sample)
    rows = []
    for (lag_ms, path, responder), group in groups.items():
        answered = [s for s in group if s.answered]
        stale = [s for s in answered if s.stale]
        timed = [s.latency_ms for s in group if s.outcome is not Outcome.ERROR]
        rows.append(
            ResultRow(
                lag_ms=lag_ms,
                path=path,
                responder=responder,
                lagging=lag_ms > 0 and responder in targets,
                lag_target=responder in targets,
                reads=len(answered),
                stale=len(stale),
                stale_fraction=round(len(stale) / len(answered), 4) if answered else 0.0,
                refused=sum(1 for s in group if s.outcome is Outcome.REFUSED),
                errors=sum(1 for s in group if s.outcome is Outcome.ERROR),
                behind_seq_p50=percentile([float(s.behind_seq) for s in stale], 0.50),
                behind_seq_p99=percentile([float(s.behind_seq) for s in stale], 0.99),
                behind_ms_p50=round(percentile([s.behind_ms for s in stale], 0.50), 2),
                behind_ms_p99=round(percentile([s.behind_ms for s in stale], 0.99), 2),
                latency_ms_p50=round(percentile(timed, 0.50), 3),
                latency_ms_p99=round(percentile(timed, 0.99), 3),
                forwarded=sum(1 for s in answered if s.forwarded),
            )
        )
    rows.sort(key=lambda r: (r.lag_ms, _PATH_ORDER.get(r.path, 99), r.responder))
    return rows
