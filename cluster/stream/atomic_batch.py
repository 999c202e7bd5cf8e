"""Atomic batch publish (ADR-50): messages staged on the leader, then stored all or none.

A client starts a batch with `Nats-Batch-Id: <id>` and `Nats-Batch-Sequence: 1`
and numbers every following message; `Nats-Batch-Commit: 1` on the last one
commits the batch with that message, `Nats-Batch-Commit: eob` commits it
without storing the end-of-batch message itself. The leader answers each staged
message with an empty reply and the commit with a PubAck carrying `batch` and
`count`. Rules, limits and error order follow nats-server 2.15 (checked side by
side in tests/node/test_atomic_batch.py):

- staging (`AtomicBatches.stage`): batch id at most 64 bytes, a parsable
  sequence, no gap, at most 1,000 messages, at most 50 batches in flight per
  stream and 1,000 per node, abandoned after 10 s without a message;
- at the commit (`BatchChecks`), for every message in order: no
  `Nats-Expected-Last-Msg-Id`; the publish checks of a lone message; no msg id
  seen before in the batch or in the stream's duplicate window; an expected
  last sequence is counted with the batch's earlier messages and allowed only
  on the first; an expected last subject sequence only for a subject the batch
  has not written yet; a roll-up of a subject only on its first message in
  the batch, of the stream only on the batch's first; a discard-new stream's
  limits hold for the whole batch.

The leader runs `BatchChecks` before proposing, for a fast answer, and every
replica runs them again when it applies the batch's one `StoreBatch` entry,
against the state at that point of the log: the authoritative decision, as for
a lone publish (cluster/stream/publish.py). A leader that loses leadership
drops its staged batches; the client's next message then gets "incomplete".

Nothing here does I/O; callers pass the clock.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Protocol

from cluster.api.errors import ApiError, JSErrors
from cluster.stream.config import Discard, StreamConfig
from cluster.stream.entries import Rollup, StoreMsg
from cluster.stream.publish import Rejected, StreamView, check_config_allows, too_big
from gateway.headers import Headers, extend_header_block
from storage.model import msg_size

HDR_BATCH_ID = "Nats-Batch-Id"
# what the leader looks for in a publish's raw header block before decoding it
HDR_BATCH_ID_BYTES = HDR_BATCH_ID.encode()
HDR_BATCH_SEQ = "Nats-Batch-Sequence"
HDR_BATCH_COMMIT = "Nats-Batch-Commit"
HDR_EXPECTED_LAST_MSG_ID = "Nats-Expected-Last-Msg-Id"

MAX_BATCH_ID_BYTES = 64
MAX_BATCH_SIZE = 1000
MAX_INFLIGHT_PER_STREAM = 50
MAX_INFLIGHT_PER_NODE = 1000
BATCH_TIMEOUT_NS = 10_000_000_000
_COMMIT_LINE = f"{HDR_BATCH_COMMIT}: 1\r\n".encode()


class AbandonReason(enum.StrEnum):
    """Why a batch was dropped, as the `stream_batch_abandoned` advisory reports it."""

    TIMEOUT = "timeout"
    LARGE = "large"
    INCOMPLETE = "incomplete"


class InflightBudget:
    """Batches in flight on this node, over every stream it leads (nats-server counts per server)."""

    def __init__(self, limit: int = MAX_INFLIGHT_PER_NODE) -> None:
        self.limit = limit
        self.count = 0

    def take(self) -> bool:
        if self.count >= self.limit:
            return False
        self.count += 1
        return True

    def give_back(self, n: int = 1) -> None:
        self.count = max(0, self.count - n)


# one process is one node; tests that build several leaders in one process pass their own
NODE_BUDGET = InflightBudget()


@dataclass(frozen=True, slots=True)
class BatchMsg:
    subject: str
    header: bytes
    payload: bytes


@dataclass(frozen=True, slots=True)
class Staged:
    """Kept for the commit: answered with an empty reply."""


@dataclass(frozen=True, slots=True)
class Refused:
    """Answered with `error`; `abandoned` says the batch it belonged to was dropped and why
    (None: no batch was dropped, or the drop is not advertised, as nats-server does)."""

    error: ApiError
    abandoned: AbandonReason | None = None


@dataclass(frozen=True, slots=True)
class Commit:
    """The batch is complete: check and store `messages` (the end-of-batch marker left out)."""

    batch_id: str
    messages: tuple[BatchMsg, ...]


StageOutcome = Staged | Refused | Commit


@dataclass(slots=True)
class _Batch:
    deadline_ns: int
    messages: list[BatchMsg] = field(default_factory=list)


def _parse_seq(raw: str | None) -> int | None:
    if raw is None:
        return None
    return int(raw) if raw.isdigit() else None


def batch_refusal(cfg: StreamConfig, header: bytes, payload: bytes) -> ApiError | None:
    """What nats-server checks of a batch message before it looks at the batch: sealed, size."""
    if cfg.sealed:
        return JSErrors.STREAM_SEALED()
    if too_big(cfg, header, payload):
        return JSErrors.STREAM_MESSAGE_EXCEEDS_MAXIMUM()
    return None


class AtomicBatches:
    """The batches one stream's leader is staging."""

    def __init__(self, budget: InflightBudget = NODE_BUDGET) -> None:
        self._budget = budget
        self._batches: dict[str, _Batch] = {}

    def __len__(self) -> int:
        return len(self._batches)

    def stage(
        self,
        cfg: StreamConfig,
        batch_id: str,
        headers: Headers,
        msg: BatchMsg,
        now_ns: int,
    ) -> StageOutcome:
        """Take one message of batch `batch_id` (non-empty); `headers` are its decoded headers."""
        if not cfg.allow_atomic:
            return Refused(JSErrors.ATOMIC_PUBLISH_DISABLED())
        if len(batch_id.encode()) > MAX_BATCH_ID_BYTES:
            return Refused(JSErrors.ATOMIC_PUBLISH_INVALID_BATCH_ID())
        seq = _parse_seq(headers.get(HDR_BATCH_SEQ))
        if seq is None:
            return Refused(JSErrors.ATOMIC_PUBLISH_MISSING_SEQ())
        commit_value = headers.get(HDR_BATCH_COMMIT)
        end_of_batch = commit_value == "eob"
        size = seq - 1 if end_of_batch else seq
        batch = self._batches.get(batch_id)
        if batch is not None and batch.deadline_ns <= now_ns:
            self._drop(batch_id)  # timed out: its advisory went when `expire` found it
            batch = None
            if seq != 1:
                return Refused(JSErrors.ATOMIC_PUBLISH_INCOMPLETE_BATCH())
        if batch is None:
            if seq != 1:
                if size > MAX_BATCH_SIZE:
                    return Refused(JSErrors.ATOMIC_PUBLISH_TOO_LARGE_BATCH(size=MAX_BATCH_SIZE))
                return Refused(JSErrors.ATOMIC_PUBLISH_INCOMPLETE_BATCH())
            if len(self._batches) >= MAX_INFLIGHT_PER_STREAM or not self._budget.take():
                return Refused(JSErrors.ATOMIC_PUBLISH_TOO_MANY_INFLIGHT())
            batch = self._batches[batch_id] = _Batch(now_ns + BATCH_TIMEOUT_NS)
        if commit_value is not None and commit_value not in ("1", "eob"):
            self._drop(batch_id)
            return Refused(JSErrors.ATOMIC_PUBLISH_INVALID_BATCH_COMMIT())
        batch.deadline_ns = now_ns + BATCH_TIMEOUT_NS
        if seq != len(batch.messages) + 1 or (seq == 1 and end_of_batch):
            self._drop(batch_id)
            return Refused(JSErrors.ATOMIC_PUBLISH_INCOMPLETE_BATCH(), AbandonReason.INCOMPLETE)
        if size > MAX_BATCH_SIZE:
            self._drop(batch_id)
            return Refused(JSErrors.ATOMIC_PUBLISH_TOO_LARGE_BATCH(size=MAX_BATCH_SIZE), AbandonReason.LARGE)
        if commit_value is None:
            batch.messages.append(msg)
            return Staged()
        messages = batch.messages
        if end_of_batch:
            # the last stored message then carries the commit header, as nats-server adds it
            last = messages[-1]
            header = extend_header_block(last.header, _COMMIT_LINE)
            messages[-1] = BatchMsg(last.subject, header, last.payload)
        else:
            messages.append(msg)
        self._drop(batch_id)
        return Commit(batch_id, tuple(messages))

    def expire(self, now_ns: int) -> list[str]:
        """Drop the batches that had no message for the timeout; their ids, for the advisories."""
        expired = [batch_id for batch_id, batch in self._batches.items() if batch.deadline_ns <= now_ns]
        for batch_id in expired:
            self._drop(batch_id)
        return expired

    def next_deadline_ns(self) -> int | None:
        return min((batch.deadline_ns for batch in self._batches.values()), default=None)

    def clear(self) -> None:
        """Leadership lost, atomic publish turned off, or the stream deleted: every batch goes."""
        self._budget.give_back(len(self._batches))
        self._batches.clear()

    def _drop(self, batch_id: str) -> None:
        if self._batches.pop(batch_id, None) is not None:
            self._budget.give_back()


class BatchView(StreamView, Protocol):
    """What the commit checks read besides a lone publish's view: the stream's totals."""

    def totals(self) -> tuple[int, int]:
        """Messages and bytes stored now."""
        ...

    def subject_total(self, subject: str) -> int:
        """Messages stored now on `subject`."""
        ...


class BatchChecks:
    """A batch's messages checked in order against the stream plus the batch's earlier messages."""

    def __init__(self, cfg: StreamConfig, view: BatchView) -> None:
        self._cfg = cfg
        self._view = view
        self._msg_ids: set[str] = set()
        self._subjects: dict[str, int] = {}
        self._count = 0
        self._bytes = 0

    def check(self, entry: StoreMsg) -> Rejected | None:
        """Check the next message; None: it may be stored after the ones checked before it."""
        error = check_config_allows(self._cfg, entry) or self._state_error(entry)
        if error is not None:
            return Rejected(error)
        self._count += 1
        self._bytes += msg_size(len(entry.subject), len(entry.header), len(entry.payload))
        self._subjects[entry.subject] = self._subjects.get(entry.subject, 0) + 1
        if entry.msg_id:
            self._msg_ids.add(entry.msg_id)
        return None

    def _state_error(self, entry: StoreMsg) -> ApiError | None:
        view = self._view
        if entry.expected_last_msg_id is not None:
            return JSErrors.ATOMIC_PUBLISH_UNSUPPORTED_HEADER(header=HDR_EXPECTED_LAST_MSG_ID)
        if entry.msg_id and (
            entry.msg_id in self._msg_ids or view.duplicate_of(entry.msg_id, entry.timestamp_ns) is not None
        ):
            return JSErrors.ATOMIC_PUBLISH_DUPLICATE_MSG_ID()
        if entry.expected_last_seq is not None:
            last = view.last_seq + self._count
            if entry.expected_last_seq != last:
                return JSErrors.STREAM_WRONG_LAST_SEQUENCE(seq=last)
            if self._count:
                return JSErrors.STREAM_WRONG_LAST_SEQUENCE_CONSTANT()
        if entry.expected_last_subject_seq is not None:
            subject = entry.expected_last_subject_seq_subject or entry.subject
            if subject in self._subjects:
                return JSErrors.STREAM_WRONG_LAST_SEQUENCE_CONSTANT()
            last = view.last_seq_for_subject(subject)
            if last != entry.expected_last_subject_seq:
                return JSErrors.STREAM_WRONG_LAST_SEQUENCE(seq=last)
        if entry.rollup is Rollup.SUBJECT and entry.subject in self._subjects:
            return JSErrors.STREAM_ROLLUP_FAILED(err="batch rollup sub invalid")
        if entry.rollup is Rollup.ALL and self._count:
            return JSErrors.STREAM_ROLLUP_FAILED(err="batch rollup all invalid")
        return self._discard_new_error(entry)

    def _discard_new_error(self, entry: StoreMsg) -> ApiError | None:
        cfg = self._cfg
        if cfg.discard is not Discard.NEW:
            return None
        if cfg.max_msgs > 0 or cfg.max_bytes > 0:
            msgs, size = self._view.totals()
            msgs += self._count + 1
            size += self._bytes + msg_size(len(entry.subject), len(entry.header), len(entry.payload))
            if cfg.max_msgs > 0 and msgs > cfg.max_msgs:
                return JSErrors.STREAM_STORE_FAILED(err="maximum messages exceeded")
            if cfg.max_bytes > 0 and size > cfg.max_bytes:
                return JSErrors.STREAM_STORE_FAILED(err="maximum bytes exceeded")
        if cfg.discard_new_per_subject and cfg.max_msgs_per_subject > 0 and entry.rollup is Rollup.NONE:
            on_subject = self._view.subject_total(entry.subject) + self._subjects.get(entry.subject, 0) + 1
            if on_subject > cfg.max_msgs_per_subject:
                return JSErrors.STREAM_STORE_FAILED(err="maximum messages per subject exceeded")
        return None
