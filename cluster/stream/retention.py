"""Workqueue and interest retention: which stream messages may go after consumers acknowledge them.

Pure decisions the stream's leader applies by proposing deletes (so replicas
agree), fed by the `acked` sequences of consumer apply results:

- workqueue: a message goes as soon as the one consumer that sees it acks it
  (or TERMs it); filters never overlap there (cluster/consumer/config_check.py refuses it);
- interest: a message goes once no consumer whose filters match it still
  `wants` it (has not yet delivered-and-acked it), and at once when there is
  no consumer with interest at all (also when the last consumer is deleted).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from subjects.grammar import subject_matches


@dataclass(frozen=True, slots=True)
class Interest:
    """One consumer as retention sees it: its subject filters (none: every subject), and whether it
    still `wants` a stream sequence (has yet to deliver or have it acked; the consumer state's `wants`)."""

    filters: tuple[str, ...]
    wants: Callable[[int], bool]

    def matches(self, subject: str) -> bool:
        return not self.filters or any(subject_matches(f, subject) for f in self.filters)


def workqueue_removals(acked: Iterable[int]) -> tuple[int, ...]:
    """The stream sequences a workqueue stream drops after these acks."""
    return tuple(sorted(set(acked)))


def interest_done(stream_seq: int, subject: str, consumers: Sequence[Interest]) -> bool:
    """True when no consumer still needs the message at `stream_seq` on `subject`."""
    return not any(c.matches(subject) and c.wants(stream_seq) for c in consumers)


def interest_removals(
    candidates: Iterable[tuple[int, str]], consumers: Sequence[Interest]
) -> tuple[int, ...]:
    """Of (seq, subject) candidates (e.g. just acked ones, or every message when a consumer is
    deleted), those an interest stream may drop now."""
    return tuple(sorted(seq for seq, subject in candidates if interest_done(seq, subject, consumers)))


__all__ = ["Interest", "interest_done", "interest_removals", "workqueue_removals"]
