"""Unpinning a consumer's pinned client (`$JS.API.CONSUMER.UNPIN.<stream>.<consumer>`), as nats-server
2.15.1 answers it: after the same checks, in the same order: the stream, the consumer, then the body
(read by json.Unmarshal: unknown fields pass, Go's words carry no offset), its group set (10025) and
well-formed (10162), and one of the consumer's groups (10160). Then the consumer's leader, which holds
the pin (cluster/consumer/pinning.py), releases it if there is one (a consumer of another policy has
none) and announces CONSUMER.UNPINNED either way, as nats-server does.
"""

from __future__ import annotations

from collections.abc import Sequence

from cluster.api import jsjson
from cluster.api.errors import JSErrors
from cluster.consumer.config import is_valid_group_name

UNPIN_TYPE = "io.nats.jetstream.api.v1.consumer_unpin_response"


def parse_unpin_group(payload: bytes) -> str:
    """The group an UNPIN request names; raises ApiError 10025 or 10162."""
    try:
        obj = jsjson.unmarshal_request(payload, "JSApiConsumerUnpinRequest")
        group = jsjson.get_str(obj, "group")
    except jsjson.RequestJSONError as exc:
        raise JSErrors.INVALID_JSON(err=str(exc)) from None
    if not group:
        raise JSErrors.INVALID_JSON(err="consumer group not specified")
    if not is_valid_group_name(group):
        raise JSErrors.CONSUMER_INVALID_GROUP_NAME()
    return group


def unpin(groups: Sequence[str], group: str) -> bytes:
    """The answer for a consumer of priority `groups`: 10160 when `group` is not one of them, else
    success (releasing the pin is the consumer leader's part)."""
    if group not in groups:
        raise JSErrors.CONSUMER_INVALID_PRIORITY_GROUP()
    return jsjson.dumps({"type": UNPIN_TYPE})


__all__ = ["UNPIN_TYPE", "parse_unpin_group", "unpin"]
