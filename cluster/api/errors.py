"""The JetStream API errors jetraft answers with, as nats-server declares them.

Each entry carries nats-server's HTTP-like `code`, its stable `err_code` and
the description (a template where nats-server fills in a detail). Clients
branch on `err_code` (nats-py maps `code` to exception classes), so both must
match nats-server 2.15's `server/errors.json`. Only the errors we use are
listed; the numbers are checked against the traces in the tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cluster.api import jsjson
from cluster.api.response_types import STREAM_INFO_TYPE


class ApiError(Exception):
    """A JetStream API error; raise it anywhere in request handling and answer with `to_json`."""

    def __init__(self, code: int, err_code: int, description: str) -> None:
        super().__init__(description)
        self.code = code
        self.err_code = err_code
        self.description = description

    def to_json(self) -> dict[str, Any]:
        # Go omits a zero err_code and an empty description
        body: dict[str, Any] = {"code": self.code}
        if self.err_code:
            body["err_code"] = self.err_code
        if self.description:
            body["description"] = self.description
        return body

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ApiError) and (self.code, self.err_code, self.description) == (
            other.code,
            other.err_code,
            other.description,
        )

    def __hash__(self) -> int:
        return hash((self.code, self.err_code, self.description))

    def __repr__(self) -> str:
        return f"ApiError({self.code}, {self.err_code}, {self.description!r})"


@dataclass(frozen=True, slots=True)
class ErrorSpec:
    """One row of the table: `spec(seq=9)` fills the template and gives the ApiError."""

    code: int
    err_code: int
    template: str

    def __call__(self, **params: Any) -> ApiError:
        return ApiError(self.code, self.err_code, self.template.format(**params) if params else self.template)

    def matches(self, error: BaseException) -> bool:
        return isinstance(error, ApiError) and error.err_code == self.err_code


class JSErrors:
    """nats-server's errors.json, the rows jetraft uses (constant names follow nats-server's)."""

    ACCOUNT_RESOURCES_EXCEEDED = ErrorSpec(400, 10002, "resource limits exceeded for account")
    BAD_REQUEST = ErrorSpec(400, 10003, "bad request")
    CLUSTER_INCOMPLETE = ErrorSpec(503, 10004, "incomplete results")
    CLUSTER_NO_PEERS = ErrorSpec(400, 10005, "{err}")
    CLUSTER_NOT_AVAILABLE = ErrorSpec(503, 10008, "JetStream system temporarily unavailable")
    CLUSTER_NOT_LEADER = ErrorSpec(500, 10009, "JetStream cluster can not handle request")
    CLUSTER_PEER_NOT_MEMBER = ErrorSpec(400, 10040, "peer not a member")
    INSUFFICIENT_RESOURCES = ErrorSpec(503, 10023, "insufficient resources")
    PEER_REMAP = ErrorSpec(503, 10075, "peer remap failed")
    PEDANTIC = ErrorSpec(400, 10157, "pedantic mode: {err}")
    INVALID_JSON = ErrorSpec(400, 10025, "invalid JSON: {err}")
    MAXIMUM_STREAMS_LIMIT = ErrorSpec(400, 10027, "maximum number of streams reached")
    MEMORY_RESOURCES_EXCEEDED = ErrorSpec(500, 10028, "insufficient memory resources available")
    MIRROR_MAX_MESSAGE_SIZE_TOO_BIG = ErrorSpec(
        400, 10030, "stream mirror must have max message size >= source"
    )
    MIRROR_WITH_SOURCES = ErrorSpec(400, 10031, "stream mirrors can not also contain other sources")
    MIRROR_WITH_SUBJECTS = ErrorSpec(400, 10034, "stream mirrors can not contain subjects")
    NO_MESSAGE_FOUND = ErrorSpec(404, 10037, "no message found")
    NOT_EMPTY_REQUEST = ErrorSpec(400, 10038, "expected an empty request payload")
    SEQUENCE_NOT_FOUND = ErrorSpec(400, 10043, "sequence {seq} not found")
    SOURCE_MAX_MESSAGE_SIZE_TOO_BIG = ErrorSpec(
        400, 10046, "stream source must have max message size >= target"
    )
    STORAGE_RESOURCES_EXCEEDED = ErrorSpec(500, 10047, "insufficient storage resources available")
    STREAM_CREATE = ErrorSpec(500, 10049, "{err}")
    STREAM_DELETE = ErrorSpec(500, 10050, "{err}")
    STREAM_GENERAL = ErrorSpec(500, 10051, "{err}")
    STREAM_INVALID_CONFIG = ErrorSpec(500, 10052, "{err}")
    STREAM_LIMITS = ErrorSpec(500, 10053, "{err}")
    STREAM_MAX_BYTES_REQUIRED = ErrorSpec(400, 10113, "account requires a stream config to have max bytes set")
    STREAM_MAX_STREAM_BYTES_EXCEEDED = ErrorSpec(400, 10122, "stream max bytes exceeds account limit max stream bytes")
    STREAM_MESSAGE_EXCEEDS_MAXIMUM = ErrorSpec(400, 10054, "message size exceeds maximum allowed")
    STREAM_MIRROR_NOT_UPDATABLE = ErrorSpec(400, 10055, "stream mirror configuration can not be updated")
    STREAM_MISMATCH = ErrorSpec(400, 10056, "stream name in subject does not match request")
    STREAM_MSG_DELETE_FAILED = ErrorSpec(500, 10057, "{err}")
    STREAM_NAME_EXIST = ErrorSpec(400, 10058, "stream name already in use with a different configuration")
    STREAM_NOT_FOUND = ErrorSpec(404, 10059, "stream not found")
    STREAM_RECONFIGURE_NOT_IN_PROGRESS = ErrorSpec(400, 10129, "stream reconfiguration not in progress")
    STREAM_NAME_EXIST_RESTORE_FAILED = ErrorSpec(400, 10130, "stream name already in use, cannot restore")
    STREAM_RESTORE = ErrorSpec(500, 10062, "restore failed: {err}")
    STREAM_SNAPSHOT = ErrorSpec(500, 10064, "snapshot failed: {err}")
    SNAPSHOT_DELIVER_SUBJECT_INVALID = ErrorSpec(400, 10015, "deliver subject not valid")
    MESSAGE_SOURCE_HDR_NOT_ALLOWED = ErrorSpec(400, 10227, "message stream source header is not allowed")
    STREAM_NOT_MATCH = ErrorSpec(400, 10060, "expected stream does not match")
    STREAM_REPLICAS_NOT_UPDATABLE = ErrorSpec(400, 10061, "Replicas configuration can not be updated")
    STREAM_SEQUENCE_NOT_MATCH = ErrorSpec(503, 10063, "expected stream sequence does not match")
    STREAM_SUBJECT_OVERLAP = ErrorSpec(400, 10065, "subjects overlap with an existing stream")
    STREAM_UPDATE = ErrorSpec(500, 10069, "{err}")
    STREAM_WRONG_LAST_MSG_ID = ErrorSpec(400, 10070, "wrong last msg ID: {id}")
    STREAM_WRONG_LAST_SEQUENCE = ErrorSpec(400, 10071, "wrong last sequence: {seq}")
    STREAM_WRONG_LAST_SEQUENCE_CONSTANT = ErrorSpec(400, 10164, "wrong last sequence")
    STREAM_REPLICAS_NOT_SUPPORTED = ErrorSpec(500, 10074, "replicas > 1 not supported in non-clustered mode")
    NOT_ENABLED = ErrorSpec(503, 10076, "JetStream not enabled")
    NOT_ENABLED_FOR_ACCOUNT = ErrorSpec(503, 10039, "JetStream not enabled for account")
    STREAM_STORE_FAILED = ErrorSpec(503, 10077, "{err}")
    STREAM_HEADER_EXCEEDS_MAXIMUM = ErrorSpec(400, 10097, "header size exceeds maximum allowed of 64k")
    STREAM_SEALED = ErrorSpec(400, 10109, "invalid operation on sealed stream")
    STREAM_PURGE_FAILED = ErrorSpec(500, 10110, "{err}")
    STREAM_ROLLUP_FAILED = ErrorSpec(500, 10111, "{err}")
    STREAM_OFFLINE = ErrorSpec(500, 10118, "stream is offline")
    STREAM_NAME_CONTAINS_PATH_SEPARATORS = ErrorSpec(
        400, 10128, "Stream name can not contain path separators"
    )
    REPLICAS_COUNT_CANNOT_BE_NEGATIVE = ErrorSpec(400, 10133, "replicas count cannot be negative")
    SOURCE_DUPLICATE_DETECTED = ErrorSpec(400, 10140, "duplicate source configuration detected")
    SOURCE_INVALID_STREAM_NAME = ErrorSpec(400, 10141, "sourced stream name is invalid")
    MIRROR_INVALID_STREAM_NAME = ErrorSpec(400, 10142, "mirrored stream name is invalid")
    MIRROR_WITH_FIRST_SEQ = ErrorSpec(400, 10143, "stream mirrors can not have first sequence configured")
    SOURCE_MULTIPLE_FILTERS_NOT_ALLOWED = ErrorSpec(
        400, 10144, "source with multiple subject transforms cannot also have a single subject filter"
    )
    SOURCE_INVALID_SUBJECT_FILTER = ErrorSpec(400, 10145, "source transform source: {err}")
    SOURCE_INVALID_TRANSFORM_DESTINATION = ErrorSpec(400, 10146, "source transform: {err}")
    SOURCE_OVERLAPPING_SUBJECT_FILTERS = ErrorSpec(400, 10147, "source filters can not overlap")
    MIRROR_MULTIPLE_FILTERS_NOT_ALLOWED = ErrorSpec(
        400, 10150, "mirror with multiple subject transforms cannot also have a single subject filter"
    )
    MIRROR_INVALID_SUBJECT_FILTER = ErrorSpec(400, 10151, "mirror transform source: {err}")
    MIRROR_OVERLAPPING_SUBJECT_FILTERS = ErrorSpec(400, 10152, "mirror subject filters can not overlap")
    MIRROR_INVALID_TRANSFORM_DESTINATION = ErrorSpec(400, 10154, "mirror transform: {err}")
    MIRROR_WITH_COUNTERS = ErrorSpec(400, 10173, "stream mirrors can not also calculate counters")
    MIRROR_WITH_MSG_SCHEDULES = ErrorSpec(400, 10186, "stream mirrors can not also schedule messages")
    MIRROR_WITH_ATOMIC_PUBLISH = ErrorSpec(400, 10198, "stream mirrors can not also use atomic publishing")
    MIRROR_WITH_BATCH_PUBLISH = ErrorSpec(400, 10209, "stream mirrors can not also use batch publishing")
    MIRROR_DURABLE_CONSUMER_CFG_INVALID = ErrorSpec(400, 10213, "stream mirror consumer config is invalid")
    SOURCE_WITH_MSG_SCHEDULES = ErrorSpec(400, 10187, "stream source can not also schedule messages")
    SOURCE_DURABLE_CONSUMER_CFG_INVALID = ErrorSpec(400, 10215, "stream source consumer config is invalid")
    SOURCE_DURABLE_CONSUMER_DUPLICATE_DETECTED = ErrorSpec(
        400, 10216, "duplicate stream source consumer detected"
    )
    STREAM_EXTERNAL_API_OVERLAP = ErrorSpec(
        400, 10021, "stream external api prefix {prefix} must not overlap with {subject}"
    )
    STREAM_EXTERNAL_DEL_PREFIX_OVERLAPS = ErrorSpec(
        400, 10022, "stream external delivery prefix {prefix} overlaps with stream subject {subject}"
    )
    STREAM_INVALID_EXTERNAL_DELIVERY_SUBJ = ErrorSpec(
        400, 10024, "stream external delivery prefix {prefix} must not contain wildcards"
    )
    STREAM_TRANSFORM_INVALID_SOURCE = ErrorSpec(400, 10155, "stream transform source: {err}")
    STREAM_TRANSFORM_INVALID_DESTINATION = ErrorSpec(400, 10156, "stream transform: {err}")
    STREAM_DUPLICATE_MESSAGE_CONFLICT = ErrorSpec(409, 10158, "duplicate message id is in process")
    MESSAGE_TTL_INVALID = ErrorSpec(400, 10165, "invalid per-message TTL")
    MESSAGE_TTL_DISABLED = ErrorSpec(400, 10166, "per-message TTL is disabled")
    STREAM_EXPECTED_LAST_SEQ_PER_SUBJECT_INVALID = ErrorSpec(
        400, 10193, "missing sequence for expected last sequence per subject"
    )
    STREAM_MIN_LAST_SEQ = ErrorSpec(412, 10180, "min last sequence")
    # -- message schedules (ADR-51) --
    MESSAGE_SCHEDULES_DISABLED = ErrorSpec(400, 10188, "message schedules is disabled")
    MESSAGE_SCHEDULES_PATTERN_INVALID = ErrorSpec(400, 10189, "message schedules pattern is invalid")
    MESSAGE_SCHEDULES_TARGET_INVALID = ErrorSpec(400, 10190, "message schedules target is invalid")
    MESSAGE_SCHEDULES_TTL_INVALID = ErrorSpec(400, 10191, "message schedules invalid per-message TTL")
    MESSAGE_SCHEDULES_ROLLUP_INVALID = ErrorSpec(400, 10192, "message schedules invalid rollup")
    MESSAGE_SCHEDULES_SOURCE_INVALID = ErrorSpec(400, 10203, "message schedules source is invalid")
    MESSAGE_SCHEDULES_SCHEDULER_INVALID = ErrorSpec(400, 10212, "message schedules invalid scheduler")
    MESSAGE_SCHEDULES_TIME_ZONE_INVALID = ErrorSpec(400, 10223, "message schedules time zone is invalid")
    # -- atomic batch publish (ADR-50) --
    ATOMIC_PUBLISH_DISABLED = ErrorSpec(400, 10174, "atomic publish is disabled")
    ATOMIC_PUBLISH_MISSING_SEQ = ErrorSpec(400, 10175, "atomic publish sequence is missing")
    ATOMIC_PUBLISH_INCOMPLETE_BATCH = ErrorSpec(400, 10176, "atomic publish batch is incomplete")
    ATOMIC_PUBLISH_UNSUPPORTED_HEADER = ErrorSpec(400, 10177, "atomic publish unsupported header used: {header}")
    ATOMIC_PUBLISH_INVALID_BATCH_ID = ErrorSpec(400, 10179, "atomic publish batch ID is invalid")
    ATOMIC_PUBLISH_TOO_LARGE_BATCH = ErrorSpec(400, 10199, "atomic publish batch is too large: {size}")
    ATOMIC_PUBLISH_INVALID_BATCH_COMMIT = ErrorSpec(400, 10200, "atomic publish batch commit is invalid")
    ATOMIC_PUBLISH_DUPLICATE_MSG_ID = ErrorSpec(
        400, 10201, "atomic publish batch contains duplicate message id"
    )
    ATOMIC_PUBLISH_TOO_MANY_INFLIGHT = ErrorSpec(429, 10210, "atomic publish too many inflight")
    # -- consumers (issue 10) --
    CONSUMER_NAME_EXIST = ErrorSpec(400, 10013, "consumer name already in use")
    CONSUMER_CREATE = ErrorSpec(500, 10012, "{err}")
    CONSUMER_NOT_FOUND = ErrorSpec(404, 10014, "consumer not found")
    CONSUMER_NAME_DURABLE_MISMATCH = ErrorSpec(
        400, 10017, "consumer name in subject does not match durable name in request"
    )
    CONSUMER_DURABLE_NAME_NOT_SET = ErrorSpec(
        400, 10018, "consumer expected to be durable but a durable name was not set"
    )
    CONSUMER_EPHEMERAL_WITH_DURABLE_NAME = ErrorSpec(
        400, 10020, "consumer expected to be ephemeral but a durable name was set in request"
    )
    CONSUMER_MAX_WAITING_NEGATIVE = ErrorSpec(400, 10087, "consumer max waiting needs to be positive")
    CONSUMER_PUSH_MAX_WAITING = ErrorSpec(400, 10080, "consumer in push mode can not set max waiting")
    CONSUMER_DELIVER_CYCLE = ErrorSpec(400, 10081, "consumer deliver subject forms a cycle")
    CONSUMER_WQ_REQUIRES_EXPLICIT_ACK_PULL = ErrorSpec(
        400, 10084, "consumer in pull mode requires explicit ack policy on workqueue stream"
    )
    CONSUMER_HB_REQUIRES_PUSH = ErrorSpec(
        400, 10088, "consumer idle heartbeat requires a push based consumer"
    )
    CONSUMER_INVALID_POLICY = ErrorSpec(400, 10094, "{err}")
    CONSUMER_INVALID_SAMPLING = ErrorSpec(
        400, 10095, "failed to parse consumer sampling configuration: {err}"
    )
    CONSUMER_WQ_REQUIRES_EXPLICIT_ACK = ErrorSpec(400, 10098, "workqueue stream requires explicit ack")
    CONSUMER_WQ_MULTIPLE_UNFILTERED = ErrorSpec(
        400, 10099, "multiple non-filtered consumers not allowed on workqueue stream"
    )
    CONSUMER_WQ_CONSUMER_NOT_UNIQUE = ErrorSpec(
        400, 10100, "filtered consumer not unique on workqueue stream"
    )
    CONSUMER_WQ_CONSUMER_NOT_DELIVER_ALL = ErrorSpec(
        400, 10101, "consumer must be deliver all on workqueue stream"
    )
    CONSUMER_NAME_TOO_LONG = ErrorSpec(400, 10102, "consumer name is too long, maximum allowed is {max}")
    CONSUMER_BAD_DURABLE_NAME = ErrorSpec(400, 10103, "durable name can not contain '.', '*', '>'")
    CONSUMER_FC_REQUIRES_PUSH = ErrorSpec(400, 10089, "consumer flow control requires a push based consumer")
    CONSUMER_DIRECT_REQUIRES_PUSH = ErrorSpec(400, 10090, "consumer direct requires a push based consumer")
    CONSUMER_MAX_PENDING_ACK_POLICY_REQUIRED = ErrorSpec(
        400, 10082, "consumer requires ack policy for max ack pending"
    )
    CONSUMER_FLOW_CONTROL_NEEDS_HEARTBEATS = ErrorSpec(
        400, 10108, "consumer with flow control also needs heartbeats"
    )
    CONSUMER_MAX_REQUEST_BATCH_NEGATIVE = ErrorSpec(400, 10114, "consumer max request batch needs to be > 0")
    CONSUMER_MAX_REQUEST_BATCH_EXCEEDED = ErrorSpec(400, 10125, "consumer max request batch exceeds server limit of {limit}")
    CONSUMER_MAX_REQUEST_EXPIRES_TOO_SMALL = ErrorSpec(
        400, 10115, "consumer max request expires needs to be >= 1ms"
    )
    CONSUMER_MAX_DELIVER_BACKOFF = ErrorSpec(
        400, 10116, "max deliver is required to be > length of backoff values"
    )
    CONSUMER_INVALID_RESET = ErrorSpec(400, 10204, "invalid reset: {err}")
    CONSUMER_MULTIPLE_FILTERS_NOT_ALLOWED = ErrorSpec(
        400, 10137, "consumer with multiple subject filters cannot use subject based API"
    )
    CONSUMER_INVALID_PRIORITY_GROUP = ErrorSpec(400, 10160, "Provided priority group does not exist for this consumer")
    CONSUMER_PRIORITY_POLICY_WITHOUT_GROUP = ErrorSpec(
        400, 10159, "Setting PriorityPolicy requires at least one PriorityGroup to be set"
    )
    CONSUMER_EMPTY_GROUP_NAME = ErrorSpec(400, 10161, "Group name cannot be an empty string")
    CONSUMER_PUSH_WITH_PRIORITY_GROUP = ErrorSpec(400, 10178, "priority groups can not be used with push consumers")
    CONSUMER_PRIORITY_GROUP_WITH_POLICY_NONE = ErrorSpec(
        400, 10196, "consumer can not have priority groups when policy is none"
    )
    CONSUMER_PINNED_TTL_WITHOUT_PRIORITY_POLICY_NONE = ErrorSpec(
        400, 10197, "PinnedTTL cannot be set when PriorityPolicy is none"
    )
    CONSUMER_INVALID_GROUP_NAME = ErrorSpec(
        400, 10162, "Valid priority group name must match A-Z, a-z, 0-9, -_/=)+ and may not exceed 16 characters"
    )
    CONSUMER_CREATE_FILTER_SUBJECT_MISMATCH = ErrorSpec(
        400, 10131, "Consumer create request did not match filtered subject from create subject"
    )
    CONSUMER_DUPLICATE_FILTER_SUBJECTS = ErrorSpec(
        400, 10136, "consumer cannot have both FilterSubject and FilterSubjects specified"
    )
    CONSUMER_DURABLE_NAME_MISMATCH = ErrorSpec(
        400, 10132, "Consumer Durable and Name have to be equal if both are provided"
    )
    CONSUMER_OVERLAPPING_SUBJECT_FILTERS = ErrorSpec(400, 10138, "consumer subject filters cannot overlap")
    CONSUMER_ALREADY_EXISTS = ErrorSpec(400, 10148, "consumer already exists")
    CONSUMER_DOES_NOT_EXIST = ErrorSpec(400, 10149, "consumer does not exist")
    CONSUMER_ACK_WAIT_NEGATIVE = ErrorSpec(400, 10183, "consumer ack wait needs to be positive")
    CONSUMER_MAX_CONSUMERS_LIMIT = ErrorSpec(400, 10026, "maximum consumers limit reached")
    CONSUMER_MAX_PENDING_ACK_EXCESS = ErrorSpec(400, 10121, "consumer max ack pending exceeds system limit of {limit}")
    CONSUMER_BACKOFF_NEGATIVE = ErrorSpec(400, 10184, "consumer backoff needs to be positive")
    CONSUMER_DESCRIPTION_TOO_LONG = ErrorSpec(400, 10107, "consumer description is too long, maximum allowed is {max}")
    CONSUMER_DELIVER_TO_WILDCARDS = ErrorSpec(400, 10079, "consumer deliver subject has wildcards")
    CONSUMER_PULL_WITH_RATE_LIMIT = ErrorSpec(400, 10086, "consumer in pull mode can not have rate limit set")
    CONSUMER_EMPTY_FILTER = ErrorSpec(400, 10139, "consumer filter in FilterSubjects cannot be empty")
    CONSUMER_ACK_FC_REQUIRES_PUSH = ErrorSpec(400, 10218, "flow control ack policy requires a push based consumer")
    CONSUMER_ACK_FC_REQUIRES_FC = ErrorSpec(400, 10219, "flow control ack policy requires flow control")
    CONSUMER_ACK_FC_REQUIRES_MAX_ACK_PENDING = ErrorSpec(400, 10220, "flow control ack policy requires max ack pending")
    CONSUMER_ACK_FC_REQUIRES_NO_ACK_WAIT = ErrorSpec(400, 10221, "flow control ack policy requires unset ack wait")
    CONSUMER_ACK_FC_REQUIRES_NO_MAX_DELIVER = ErrorSpec(400, 10222, "flow control ack policy requires unset max deliver")
    CONSUMER_INACTIVE_THRESHOLD_EXCESS = ErrorSpec(
        400, 10153, "consumer inactive threshold exceeds system limit of {limit}"
    )
    CONSUMER_REPLICAS_EXCEEDS_STREAM = ErrorSpec(
        400, 10126, "consumer config replica count exceeds parent stream"
    )


def error_response(response_type: str, error: ApiError, **trailing: Any) -> bytes:
    """`{"type":..., "error":{...}}` plus fields Go still prints beside an error (e.g. `purged`, paging)."""
    body: dict[str, Any] = {"type": response_type, "error": error.to_json()}
    body.update(trailing)
    return jsjson.dumps(body)


def plain_error(response_type: str, error: ApiError) -> bytes:
    """Error responses that carry nothing but `type` and `error` (create, update, delete, msg delete, ...)."""
    return error_response(response_type, error)


def stream_info_error(error: ApiError) -> bytes:
    # nats-server prints the (zero) paging fields after the error
    return error_response(STREAM_INFO_TYPE, error, total=0, offset=0, limit=0)
