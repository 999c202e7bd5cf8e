"""Consumer API responses and push-consumer control frames, shaped as nats-server 2.15 sends them.

JSON builders return dicts in nats-server's field order (encode with
`cluster.api.jsjson.dumps`); frames are header blocks for header-only messages.
Trace references: 10 (KV ordered consumers), 11 (durable pull), 12 (ordered
push with flow control and idle heartbeats).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cluster.api import jsjson
from cluster.consumer.config import ConsumerConfig
from cluster.consumer.state import ConsumerState
from gateway.headers import encode_headers
from storage.nats_time import ZERO_TIME, format_rfc3339_nano

API_TYPE = "io.nats.jetstream.api.v1."
CREATE_TYPE = API_TYPE + "consumer_create_response"
INFO_TYPE = API_TYPE + "consumer_info_response"
NAMES_TYPE = API_TYPE + "consumer_names_response"
LIST_TYPE = API_TYPE + "consumer_list_response"
DELETE_TYPE = API_TYPE + "consumer_delete_response"
STEPDOWN_TYPE = API_TYPE + "consumer_leader_stepdown_response"
ACK_METRIC_TYPE = "io.nats.jetstream.metric.v1.consumer_ack"
NAMES_LIMIT = 1024
LIST_LIMIT = 256
SERVER_VERSION = "2.15.1"


@dataclass(frozen=True, slots=True)
class ConsumerView:
    """What an info response reports about one consumer, gathered by the node."""

    stream: str
    name: str
    created_ns: int
    config: ConsumerConfig
    state: ConsumerState
    num_pending: int
    num_waiting: int = 0
    cluster: dict[str, Any] | None = None
    push_bound: bool = False
    # > 0 while paused: how long until the pause ends
    pause_remaining_ns: int = 0
    # a pinned_client consumer's pin: its id, and since when (cluster/consumer/pinning.py)
    pinned_id: str = ""
    pinned_ns: int = 0


def _sequence_info(consumer_seq: int, stream_seq: int, last_active_ns: int) -> dict[str, Any]:
    out: dict[str, Any] = {"consumer_seq": consumer_seq, "stream_seq": stream_seq}
    if last_active_ns:
        out["last_active"] = format_rfc3339_nano(last_active_ns)
    return out


def consumer_info(view: ConsumerView, now_ns: int, server_version: str = SERVER_VERSION) -> dict[str, Any]:
    """The ConsumerInfo object (no `type`): as in info, create and list responses."""
    state = view.state
    out: dict[str, Any] = {
        "stream_name": view.stream,
        "name": view.name,
        "created": format_rfc3339_nano(view.created_ns),
        "config": view.config.to_json(server_version),
        "delivered": _sequence_info(
            state.delivered_consumer_seq, state.delivered_stream_seq, state.delivered_ts_ns
        ),
        "ack_floor": _sequence_info(
            state.ack_floor_consumer_seq, state.reported_ack_floor_stream_seq, state.ack_floor_ts_ns
        ),
        "num_ack_pending": state.num_ack_pending,
        "num_redelivered": state.num_redelivered,
        "num_waiting": view.num_waiting,
        "num_pending": view.num_pending,
    }
    if view.cluster is not None:
        out["cluster"] = view.cluster
    if view.push_bound:
        out["push_bound"] = True
    if view.pause_remaining_ns > 0:
        out["paused"] = True
        out["pause_remaining"] = view.pause_remaining_ns
    out["ts"] = format_rfc3339_nano(now_ns)
    if view.config.priority_groups:
        # nats-server shows the first group's state only, and Go's zero time while nobody is pinned
        group: dict[str, Any] = {"group": view.config.priority_groups[0]}
        if view.pinned_id:
            group["pinned_client_id"] = view.pinned_id
        group["pinned_ts"] = format_rfc3339_nano(view.pinned_ns) if view.pinned_id else ZERO_TIME
        out["priority_groups"] = [group]
    return out


def create_response(view: ConsumerView, now_ns: int) -> bytes:
    return jsjson.dumps({"type": CREATE_TYPE, **consumer_info(view, now_ns)})


def info_response(view: ConsumerView, now_ns: int) -> bytes:
    return jsjson.dumps({"type": INFO_TYPE, **consumer_info(view, now_ns)})


def parse_offset(payload: bytes) -> int:
    """The `offset` of a NAMES / LIST request (empty body: 0); raises RequestJSONError."""
    obj = jsjson.loads_request(payload, "JSApiConsumersRequest", objects_only=True)
    offset = max(jsjson.get_int(obj, "offset"), 0)
    jsjson.reject_unknown(obj)
    return offset


def names_response(names: list[str], offset: int) -> bytes:
    ordered = sorted(names)
    offset = min(offset, len(ordered))
    page = ordered[offset : offset + NAMES_LIMIT]
    body = {
        "type": NAMES_TYPE,
        "total": len(ordered),
        "offset": offset,
        "limit": NAMES_LIMIT,
        "consumers": page,
    }
    return jsjson.dumps(body)


def list_response(views: list[ConsumerView], offset: int, now_ns: int) -> bytes:
    ordered = sorted(views, key=lambda v: v.name)
    offset = min(offset, len(ordered))
    page = [consumer_info(v, now_ns) for v in ordered[offset : offset + LIST_LIMIT]]
    body = {
        "type": LIST_TYPE,
        "total": len(ordered),
        "offset": offset,
        "limit": LIST_LIMIT,
        "consumers": page,
    }
    return jsjson.dumps(body)


def delete_response() -> bytes:
    return jsjson.dumps({"type": DELETE_TYPE, "success": True})


def stepdown_response() -> bytes:
    return jsjson.dumps({"type": STEPDOWN_TYPE, "success": True})


# -- push consumer frames -----------------------------------------------------------------------

HDR_LAST_CONSUMER = "Nats-Last-Consumer"
HDR_LAST_STREAM = "Nats-Last-Stream"
HDR_CONSUMER_STALLED = "Nats-Consumer-Stalled"
FLOW_CONTROL_PREFIX = "$JS.FC."


def idle_heartbeat(state: ConsumerState, stalled_reply: str = "") -> bytes:
    """`100 Idle Heartbeat` with the last delivered sequences (and the flow-control reply it waits on)."""
    fields = [
        (HDR_LAST_CONSUMER, str(state.delivered_consumer_seq)),
        (HDR_LAST_STREAM, str(state.delivered_stream_seq)),
    ]
    if stalled_reply:
        fields.append((HDR_CONSUMER_STALLED, stalled_reply))
    return encode_headers(fields, status=100, description="Idle Heartbeat")


def flow_control_request() -> bytes:
    return encode_headers(status=100, description="FlowControl Request")


def flow_control_subject(stream: str, consumer: str, token: str) -> str:
    """The reply subject of a flow-control request; `token` is 4 random characters chosen by the leader."""
    return f"{FLOW_CONTROL_PREFIX}{stream}.{consumer}.{token}"


class FlowControl:
    """When to ask a push subscriber for flow control, and whether delivery must wait for its answer.

    nats-server asks once about 1 MiB is unanswered (trace 12: after 8 x 128 KiB)
    and keeps delivering while it waits, up to a bound; jetraft stops at twice
    the threshold until the reply arrives.
    """

    def __init__(self, threshold_bytes: int = 1 << 20) -> None:
        self.threshold = threshold_bytes
        self.unanswered_bytes = 0
        self.outstanding: str | None = None

    def sent(self, nbytes: int) -> bool:
        """Account for a delivered message; True when a flow-control request is due now."""
        self.unanswered_bytes += nbytes
        return self.outstanding is None and self.unanswered_bytes >= self.threshold

    def requested(self, reply: str) -> None:
        self.outstanding = reply

    def answered(self, reply: str) -> None:
        if reply == self.outstanding:
            self.outstanding = None
            self.unanswered_bytes = 0

    @property
    def stalled(self) -> bool:
        return self.outstanding is not None and self.unanswered_bytes >= 2 * self.threshold


def ack_sample(
    stream: str,
    consumer: str,
    consumer_seq: int,
    stream_seq: int,
    ack_time_ns: int,
    deliveries: int,
    event_id: str,
    now_ns: int,
) -> bytes:
    """The ack sample published on `$JS.EVENT.METRIC.CONSUMER.ACK.<stream>.<consumer>` (NOTES.md)."""
    body = {
        "type": ACK_METRIC_TYPE,
        "id": event_id,
        "timestamp": format_rfc3339_nano(now_ns),
        "stream": stream,
        "consumer": consumer,
        "consumer_seq": consumer_seq,
        "stream_seq": stream_seq,
        "ack_time": ack_time_ns,
        "deliveries": deliveries,
    }
    return jsjson.dumps(body)


def ack_sample_subject(stream: str, consumer: str) -> str:
    return f"$JS.EVENT.METRIC.CONSUMER.ACK.{stream}.{consumer}"


def should_sample(percent: int, draw: float) -> bool:
    """Sample this ack? `draw` is uniform in [0, 1) from the leader's RNG."""
    return percent > 0 and draw * 100 < percent


__all__ = [
    "ConsumerView",
    "FlowControl",
    "ack_sample",
    "ack_sample_subject",
    "consumer_info",
    "create_response",
    "delete_response",
    "flow_control_request",
    "flow_control_subject",
    "idle_heartbeat",
    "info_response",
    "list_response",
    "names_response",
    "parse_offset",
    "should_sample",
    "stepdown_response",
]
