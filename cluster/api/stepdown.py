"""Where a leader stepdown may hand leadership: a LEADER.STEPDOWN request's `placement`, read as
nats-server 2.15.1 reads it (getStepDownPreferredPlacement).

The body is read only when it starts like a JSON object (nats-server's isJSONObjectOrArray); a
placement's `preferred` names the one peer to take over, else its `cluster` and `tags` narrow the
connected peers that may. No peer left: 10005, in nats-server's words. jetraft's nodes form one
cluster, named CLUSTER_NAME; a peer's tags are those it announced on its route.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cluster.api import jsjson
from cluster.api.errors import JSErrors


def stepdown_candidates(
    payload: bytes,
    me: str,
    voters: Sequence[str],
    peer_tags: Callable[[str], Sequence[str] | None],
    cluster_name: str,
) -> list[str] | None:
    """The peers a placement allows to take over (None: the request has no placement, any may);
    raises ApiError 10025 for a body nats-server refuses, 10005 when no peer fits."""
    try:
        obj = jsjson.loads_request(payload, "JSApiLeaderStepdownRequest", objects_only=True)
        value = obj.get("placement")
        if value is not None and not isinstance(value, dict):
            raise jsjson.type_error(obj, "placement", value, "server.Placement")
        placement = None if value is None else jsjson.nested_object(obj, "placement", value)
        cluster = tags = preferred = None
        if placement is not None:
            cluster = jsjson.get_str(placement, "cluster")
            tags = jsjson.get_str_list(placement, "tags")
            preferred = jsjson.get_str(placement, "preferred")
        jsjson.reject_unknown(obj)
    except jsjson.RequestJSONError as exc:
        raise JSErrors.INVALID_JSON(err=str(exc)) from None
    if placement is None:
        return None
    if preferred:
        if preferred == me:
            raise JSErrors.CLUSTER_NO_PEERS(err=f'preferred server "{preferred}" is already leader')
        if preferred not in voters:
            raise JSErrors.CLUSTER_NO_PEERS(err=f'preferred server "{preferred}" not known')
        return [preferred]
    candidates = []
    for peer in voters:
        announced = peer_tags(peer)
        if peer == me or announced is None:  # ourselves, or a peer not connected
            continue
        if cluster and cluster != cluster_name:
            continue
        if not set(tags or ()) <= set(announced):
            continue
        candidates.append(peer)
    if not candidates:
        raise JSErrors.CLUSTER_NO_PEERS(err="no replacement peer connected")
    return candidates


__all__ = ["stepdown_candidates"]
