"""Which JetStream API operation a request subject names, and who in the cluster answers it.

Clients may send any API request to any node. Every node is a member of one
queue group on the API subjects; the member a request reaches classifies it
here and hands it on over internal subjects:

- meta operations (create, update, delete, names, list, account info) go to
  the meta leader on `$JSR.M.<OP>[.<stream>]`;
- operations on one stream go to that stream's leader on `$JSR.S.<stream>.<OP>`
  when this node knows the stream, else to the meta leader, which knows
  whether it exists.

The original reply subject travels with the request, so the answer goes
straight back to the client. Direct Get is not here: replicas answer it
themselves, in queue group `_sys_`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from cluster.api import response_types as rt

API_PREFIX = "$JS.API."
# The subjects the API queue group listens on. Direct Get is excluded on purpose (a stream nobody
# serves Direct Gets for answers no-responders). The rest are there for requests nats-server takes
# and leaves unanswered (`$JS.API.FOO`, the system account's SERVER.*, META.* and ACCOUNT.*): a
# client waits out its timeout there too, rather than hearing no-responders.
API_SUBSCRIPTIONS = (
    "$JS.API.*",
    "$JS.API.STREAM.>",
    "$JS.API.CONSUMER.>",
    "$JS.API.ACCOUNT.>",
    "$JS.API.SERVER.>",
    "$JS.API.META.>",
)
API_QUEUE = "_jsapi"

META_PREFIX = "$JSR.M."
STREAM_PREFIX = "$JSR.S."


class ApiOp(enum.StrEnum):
    ACCOUNT_INFO = "ACCOUNT_INFO"
    STREAM_CREATE = "CREATE"
    STREAM_UPDATE = "UPDATE"
    STREAM_DELETE = "DELETE"
    STREAM_INFO = "INFO"
    STREAM_NAMES = "NAMES"
    STREAM_LIST = "LIST"
    STREAM_PURGE = "PURGE"
    STREAM_MSG_GET = "MSG_GET"
    STREAM_MSG_DELETE = "MSG_DELETE"
    STREAM_LEADER_STEPDOWN = "LEADER_STEPDOWN"
    STREAM_PEER_REMOVE = "PEER_REMOVE"
    STREAM_SNAPSHOT = "SNAPSHOT"
    STREAM_RESTORE = "RESTORE"
    STREAM_PEER_EVACUATE = "PEER_EVACUATE"
    STREAM_CANCEL_MOVE = "CANCEL_MOVE"
    CONSUMER = "CONSUMER"
    # internal only: meta leader -> stream leader
    CREATE_RESULT = "CREATE_RESULT"
    APPLY_UPDATE = "APPLY_UPDATE"
    LIST_ENTRY = "LIST_ENTRY"
    FETCH = "FETCH"
    RESTORE_MSGS = "RESTORE_MSGS"  # a restore's messages, at their sequences (cluster/meta/restore.py)


# Operations whose target is the meta leader whatever the stream.
META_OPS = frozenset(
    {
        ApiOp.ACCOUNT_INFO,
        ApiOp.STREAM_CREATE,
        ApiOp.STREAM_UPDATE,
        ApiOp.STREAM_DELETE,
        ApiOp.STREAM_NAMES,
        ApiOp.STREAM_LIST,
        ApiOp.STREAM_PEER_REMOVE,
        ApiOp.STREAM_SNAPSHOT,
        ApiOp.STREAM_RESTORE,
        ApiOp.STREAM_PEER_EVACUATE,
        ApiOp.STREAM_CANCEL_MOVE,
    }
)

RESPONSE_TYPES: dict[ApiOp, str] = {
    ApiOp.ACCOUNT_INFO: rt.ACCOUNT_INFO_TYPE,
    ApiOp.STREAM_CREATE: rt.STREAM_CREATE_TYPE,
    ApiOp.STREAM_UPDATE: rt.STREAM_UPDATE_TYPE,
    ApiOp.STREAM_DELETE: rt.STREAM_DELETE_TYPE,
    ApiOp.STREAM_INFO: rt.STREAM_INFO_TYPE,
    ApiOp.STREAM_NAMES: rt.STREAM_NAMES_TYPE,
    ApiOp.STREAM_LIST: rt.STREAM_LIST_TYPE,
    ApiOp.STREAM_PURGE: rt.STREAM_PURGE_TYPE,
    ApiOp.STREAM_MSG_GET: rt.MSG_GET_TYPE,
    ApiOp.STREAM_MSG_DELETE: rt.MSG_DELETE_TYPE,
    ApiOp.STREAM_LEADER_STEPDOWN: rt.LEADER_STEPDOWN_TYPE,
    ApiOp.STREAM_PEER_REMOVE: rt.PEER_REMOVE_TYPE,
    ApiOp.STREAM_SNAPSHOT: rt.STREAM_SNAPSHOT_TYPE,
    ApiOp.STREAM_RESTORE: rt.STREAM_RESTORE_TYPE,
    ApiOp.STREAM_PEER_EVACUATE: rt.PEER_EVACUATE_TYPE,
    ApiOp.STREAM_CANCEL_MOVE: rt.CANCEL_MOVE_TYPE,
    ApiOp.CONSUMER: "io.nats.jetstream.api.v1.consumer_create_response",
}

# (tokens after "$JS.API.") -> op, for the forms that end in a stream name
_STREAM_FORMS: dict[tuple[str, ...], ApiOp] = {
    ("STREAM", "CREATE"): ApiOp.STREAM_CREATE,
    ("STREAM", "UPDATE"): ApiOp.STREAM_UPDATE,
    ("STREAM", "DELETE"): ApiOp.STREAM_DELETE,
    ("STREAM", "INFO"): ApiOp.STREAM_INFO,
    ("STREAM", "PURGE"): ApiOp.STREAM_PURGE,
    ("STREAM", "MSG", "GET"): ApiOp.STREAM_MSG_GET,
    ("STREAM", "MSG", "DELETE"): ApiOp.STREAM_MSG_DELETE,
    ("STREAM", "LEADER", "STEPDOWN"): ApiOp.STREAM_LEADER_STEPDOWN,
    ("STREAM", "PEER", "REMOVE"): ApiOp.STREAM_PEER_REMOVE,
    ("STREAM", "SNAPSHOT"): ApiOp.STREAM_SNAPSHOT,
    ("STREAM", "RESTORE"): ApiOp.STREAM_RESTORE,
    ("STREAM", "PEER", "EVACUATE"): ApiOp.STREAM_PEER_EVACUATE,
    ("STREAM", "CANCEL_MOVE"): ApiOp.STREAM_CANCEL_MOVE,
}
_PLAIN_FORMS: dict[tuple[str, ...], ApiOp] = {
    ("INFO",): ApiOp.ACCOUNT_INFO,
    ("STREAM", "NAMES"): ApiOp.STREAM_NAMES,
    ("STREAM", "LIST"): ApiOp.STREAM_LIST,
}


@dataclass(frozen=True, slots=True)
class ApiRequest:
    op: ApiOp
    stream: str = ""

    @property
    def response_type(self) -> str:
        return RESPONSE_TYPES.get(self.op, rt.ERROR_TYPE)


def parse_api_subject(subject: str) -> ApiRequest | None:
    """The operation `$JS.API.<...>` names, or None for a subject jetraft does not answer."""
    if not subject.startswith(API_PREFIX):
        return None
    tokens = tuple(subject[len(API_PREFIX) :].split("."))
    plain = _PLAIN_FORMS.get(tokens)
    if plain is not None:
        return ApiRequest(plain)
    if tokens[0] == "CONSUMER":
        return ApiRequest(ApiOp.CONSUMER, tokens[2] if len(tokens) > 2 else "")
    if len(tokens) >= 2:
        op = _STREAM_FORMS.get(tokens[:-1])
        if op is not None and tokens[-1]:
            return ApiRequest(op, tokens[-1])
    return None


def meta_subject(request: ApiRequest) -> str:
    return META_PREFIX + request.op.value + ("." + request.stream if request.stream else "")


def parse_meta_subject(subject: str) -> ApiRequest | None:
    op_name, _, stream = subject[len(META_PREFIX) :].partition(".")
    try:
        return ApiRequest(ApiOp(op_name), stream)
    except ValueError:
        return None


def stream_subject(stream: str, op: ApiOp) -> str:
    return f"{STREAM_PREFIX}{stream}.{op.value}"


def stream_subscription(stream: str) -> str:
    return f"{STREAM_PREFIX}{stream}.*"


def parse_stream_subject(subject: str) -> ApiRequest | None:
    stream, _, op_name = subject[len(STREAM_PREFIX) :].partition(".")
    try:
        return ApiRequest(ApiOp(op_name), stream)
    except ValueError:
        return None
