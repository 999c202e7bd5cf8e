"""Membership change under load: STREAM.PEER.REMOVE, asked of whichever node answers first."""

from __future__ import annotations

import json

from chaos.run.clients import PinnedClient, outcome_of


async def remove_peer(clients: list[PinnedClient], stream: str, peer: str, timeout: float = 5.0) -> str:
    """Ask the meta leader to replace `peer` among the stream's replicas; its answer (or the last error)."""
    request = json.dumps({"peer": peer}).encode()
    last_error = "no client"
    for client in clients:
        try:
            reply = await client.nc.request(f"$JS.API.STREAM.PEER.REMOVE.{stream}", request, timeout=timeout)
        except Exception as exc:  # that node cannot reach the meta leader now; ask the next
            last_error = outcome_of(exc)[1]
            continue
        return f"peer-remove {peer}: {reply.data.decode(errors='replace')}"
    return f"peer-remove {peer}: {last_error}"


async def stream_placement(clients: list[PinnedClient], stream: str) -> tuple[str | None, list[str]]:
    """The stream's leader and its replicas (leader first), as the first node that answers STREAM.INFO says."""
    for client in clients:
        try:
            info = await client.js.stream_info(stream)
        except Exception:  # that node cannot say now; ask the next
            continue
        cluster = info.cluster
        if cluster is None:
            continue
        replicas = [peer.name for peer in (cluster.replicas or []) if peer.name]
        leader = cluster.leader or None
        return leader, ([leader] if leader else []) + replicas
    return None, []
