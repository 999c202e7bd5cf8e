"""Resetting a consumer to a stream sequence (`$JS.API.CONSUMER.RESET.<stream>.<consumer>`), as
nats-server 2.15.1 does it: an empty body starts over after the ack floor, a `seq` anywhere a
deliver-all consumer may go, no lower than a by-start consumer's start; the answer is the consumer's
info with the sequence it now starts at (`reset_seq`).

The body is read by json.Unmarshal (unknown fields pass; Go's words carry no offset). On an interest
stream the messages below the new start that no other consumer wants go once the reset is applied
(`StreamReplica.consumer_reset`); a work-queue stream keeps what a reset skips, as nats-server does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cluster.api import jsjson
from cluster.api.errors import JSErrors
from cluster.consumer.config import ConsumerConfig, DeliverPolicy

RESET_TYPE = "io.nats.jetstream.api.v1.consumer_reset_response"


def parse_reset_seq(payload: bytes) -> int:
    """The sequence a RESET asks for (0: after the ack floor); raises ApiError 10025."""
    if not payload:
        return 0
    try:
        obj = jsjson.unmarshal_request(payload, "JSApiConsumerResetRequest")
        return jsjson.get_int(obj, "seq", unsigned=True)
    except jsjson.RequestJSONError as exc:
        raise JSErrors.INVALID_JSON(err=str(exc)) from None


def reset_seq(
    requested: int, cfg: ConsumerConfig, ack_floor_stream_seq: int, seq_from_time: Callable[[int], int]
) -> int:
    """Where the consumer starts over; raises ApiError 10204 where nats-server refuses."""
    if requested == 0:
        seq = ack_floor_stream_seq + 1
    elif cfg.deliver_policy is DeliverPolicy.ALL:
        seq = requested
    elif cfg.deliver_policy is DeliverPolicy.BY_START_SEQUENCE:
        if requested < cfg.opt_start_seq:
            raise JSErrors.CONSUMER_INVALID_RESET(err="below start seq")
        seq = requested
    elif cfg.deliver_policy is DeliverPolicy.BY_START_TIME and cfg.opt_start_time_ns is not None:
        if requested < seq_from_time(cfg.opt_start_time_ns):
            raise JSErrors.CONSUMER_INVALID_RESET(err="below start time")
        seq = requested
    else:
        raise JSErrors.CONSUMER_INVALID_RESET(err="not allowed")
    return max(seq, 1)


def reset_response(info: dict[str, Any], seq: int) -> bytes:
    return jsjson.dumps({"type": RESET_TYPE, **info, "reset_seq": seq})


__all__ = ["RESET_TYPE", "parse_reset_seq", "reset_response", "reset_seq"]
