"""The cluster port lets in only peers that prove themselves: every node holds one shared secret.

A node sends the secret as gRPC metadata on every call it makes to a peer (Raft's and the route mesh's);
the server interceptor compares it in constant time before any handler is looked up, so a caller without
it gets UNAUTHENTICATED for every method, known or not, and no Raft or route message is read from it.
The secret comes from the config file or $JETRAFT_CLUSTER_SECRET, never the command line, and is never
logged. It travels as clear text on the wire like nats-server's route credentials without TLS: the
cluster network itself must be private until the cluster port speaks TLS.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

SECRET_METADATA_KEY = "jetraft-cluster-secret"
UNAUTHENTICATED_DETAILS = "cluster authentication required"


def call_metadata(secret: str | None) -> tuple[tuple[str, str], ...]:
    """What a node sends with each call to a peer."""
    return () if secret is None else ((SECRET_METADATA_KEY, secret),)


def _presented_secret(details: grpc.HandlerCallDetails) -> str | None:
    for key, value in details.invocation_metadata or ():
        if key == SECRET_METADATA_KEY:
            return value if isinstance(value, str) else None
    return None


async def _refuse(_requests: Any, context: grpc.aio.ServicerContext) -> None:
    # Reads nothing the caller sent; one handler shape serves every kind of call.
    await context.abort(grpc.StatusCode.UNAUTHENTICATED, UNAUTHENTICATED_DETAILS)


_REFUSAL = grpc.stream_stream_rpc_method_handler(_refuse)


class ClusterAuthInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, secret: str) -> None:
        if not secret:
            raise ValueError("the cluster secret must not be empty")
        self._secret = secret.encode()

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        presented = _presented_secret(handler_call_details)
        if presented is None or not hmac.compare_digest(presented.encode(), self._secret):
            return _REFUSAL
        return await continuation(handler_call_details)

    def __repr__(self) -> str:
        return "ClusterAuthInterceptor(secret=<hidden>)"


def cluster_server_interceptors(secret: str | None) -> list[grpc.aio.ServerInterceptor]:
    return [] if secret is None else [ClusterAuthInterceptor(secret)]
