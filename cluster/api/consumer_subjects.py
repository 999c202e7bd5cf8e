"""Which consumer API operation a `$JS.API.CONSUMER.>` subject names, and where it is answered.

Creating, deleting, pausing, unpinning, listing and naming consumers change or read the meta
group: they go to the meta leader on `$JSR.MC.<tail>` (the tail after
`$JS.API.CONSUMER.`, so the create forms keep their filter tokens). INFO,
MSG.NEXT, RESET and LEADER.STEPDOWN are the consumer leader's: they go to
`$JSR.C.<stream>.<consumer>.<OP>` when this node knows the consumer, else to
the meta leader, which answers "consumer not found" or passes them on.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from cluster.api.errors import ApiError, error_response
from storage.nats_time import ZERO_TIME

CONSUMER_API_PREFIX = "$JS.API.CONSUMER."
META_CONSUMER_PREFIX = "$JSR.MC."
CONSUMER_PREFIX = "$JSR.C."


class ConsumerOp(enum.StrEnum):
    CREATE = "CREATE"
    DELETE = "DELETE"
    NAMES = "NAMES"
    LIST = "LIST"
    INFO = "INFO"
    NEXT = "NEXT"
    STEPDOWN = "STEPDOWN"
    PAUSE = "PAUSE"
    UNPIN = "UNPIN"
    RESET = "RESET"
    # internal: meta leader -> consumer leader
    CREATE_RESULT = "CREATE_RESULT"
    LIST_ENTRY = "LIST_ENTRY"
    # answered (empty) once the leader's node has applied the meta index the request names
    APPLIED = "APPLIED"
    # the leader's whole state, for a stream snapshot that includes its consumers
    ARCHIVE = "ARCHIVE"


META_CONSUMER_OPS = frozenset(
    {
        ConsumerOp.CREATE,
        ConsumerOp.DELETE,
        ConsumerOp.NAMES,
        ConsumerOp.LIST,
        ConsumerOp.PAUSE,
        ConsumerOp.UNPIN,
    }
)

RESPONSE_TYPES = {
    ConsumerOp.CREATE: "io.nats.jetstream.api.v1.consumer_create_response",
    ConsumerOp.DELETE: "io.nats.jetstream.api.v1.consumer_delete_response",
    ConsumerOp.NAMES: "io.nats.jetstream.api.v1.consumer_names_response",
    ConsumerOp.LIST: "io.nats.jetstream.api.v1.consumer_list_response",
    ConsumerOp.INFO: "io.nats.jetstream.api.v1.consumer_info_response",
    ConsumerOp.NEXT: "io.nats.jetstream.api.v1.consumer_getnext_response",
    ConsumerOp.STEPDOWN: "io.nats.jetstream.api.v1.consumer_leader_stepdown_response",
    ConsumerOp.PAUSE: "io.nats.jetstream.api.v1.consumer_pause_response",
    ConsumerOp.UNPIN: "io.nats.jetstream.api.v1.consumer_unpin_response",
    ConsumerOp.RESET: "io.nats.jetstream.api.v1.consumer_reset_response",
}
# what Go still prints after the error in some responses (the zero values of their other fields)
# what nats-server's response structs print after the error (fields without omitempty)
_PAGED_NONE = {"total": 0, "offset": 0, "limit": 0, "consumers": []}
_ERROR_TRAILERS: dict[ConsumerOp, dict[str, Any]] = {
    ConsumerOp.PAUSE: {"paused": False, "pause_until": ZERO_TIME},
    ConsumerOp.NAMES: _PAGED_NONE,
    ConsumerOp.LIST: _PAGED_NONE,
    ConsumerOp.RESET: {"reset_seq": 0},
}


@dataclass(frozen=True, slots=True)
class ConsumerRequest:
    op: ConsumerOp
    stream: str
    consumer: str = ""
    # the subject tail after "$JS.API.CONSUMER." (create forms are parsed from it again)
    tail: str = ""

    @property
    def response_type(self) -> str:
        return RESPONSE_TYPES.get(self.op, "io.nats.jetstream.api.v1.error_response")

    def error_body(self, error: ApiError) -> bytes:
        """The error answer to this request, shaped as nats-server's for its operation."""
        return error_response(self.response_type, error, **_ERROR_TRAILERS.get(self.op, {}))


def parse_consumer_subject(subject: str) -> ConsumerRequest | None:
    if not subject.startswith(CONSUMER_API_PREFIX):
        return None
    tail = subject[len(CONSUMER_API_PREFIX) :]
    tokens = tail.split(".")
    head = tokens[0]
    if head == "CREATE" and len(tokens) >= 2:
        return ConsumerRequest(ConsumerOp.CREATE, tokens[1], tokens[2] if len(tokens) > 2 else "", tail)
    if head == "DURABLE" and len(tokens) == 4 and tokens[1] == "CREATE":
        return ConsumerRequest(ConsumerOp.CREATE, tokens[2], tokens[3], tail)
    if head in ("NAMES", "LIST") and len(tokens) == 2:
        return ConsumerRequest(ConsumerOp(head), tokens[1], "", tail)
    if head in ("INFO", "DELETE") and len(tokens) == 3:
        return ConsumerRequest(ConsumerOp(head), tokens[1], tokens[2], tail)
    if head == "MSG" and len(tokens) == 4 and tokens[1] == "NEXT":
        return ConsumerRequest(ConsumerOp.NEXT, tokens[2], tokens[3], tail)
    if head in ("PAUSE", "UNPIN", "RESET") and len(tokens) == 3:
        return ConsumerRequest(ConsumerOp(head), tokens[1], tokens[2], tail)
    if head == "LEADER" and len(tokens) == 4 and tokens[1] == "STEPDOWN":
        return ConsumerRequest(ConsumerOp.STEPDOWN, tokens[2], tokens[3], tail)
    return None


def meta_consumer_subject(request: ConsumerRequest) -> str:
    return META_CONSUMER_PREFIX + request.tail


def consumer_subject(stream: str, consumer: str, op: ConsumerOp) -> str:
    return f"{CONSUMER_PREFIX}{stream}.{consumer}.{op.value}"


def consumer_subscription(stream: str, consumer: str) -> str:
    return f"{CONSUMER_PREFIX}{stream}.{consumer}.*"


def parse_internal_consumer_subject(subject: str) -> tuple[str, str, ConsumerOp] | None:
    parts = subject[len(CONSUMER_PREFIX) :].split(".")
    if len(parts) != 3:
        return None
    try:
        return parts[0], parts[1], ConsumerOp(parts[2])
    except ValueError:
        return None
