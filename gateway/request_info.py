"""The requesting client's details, carried with its request as nats-server's `Nats-Request-Info` header.

nats-server adds this header (its `ClientInfo`, as JSON) where a client's request crosses into a service,
the JetStream API among them, so that whichever server answers can name the client in its API audit
advisory. Here the client's node stamps it on every publish to the subjects the node names
(`RequestInfoPolicy.prefixes`, `$JS.API.` for a JetStream node), replacing any such header the client
sent itself: a client cannot pass for another. The header travels with the request to the node that
answers it (cluster/api/audit.py reads it there).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gateway.headers import set_header

REQUEST_INFO_HEADER = "Nats-Request-Info"


@dataclass(frozen=True)
class RequestInfoPolicy:
    """Which publishes get the header, and what the node says about itself in it."""

    prefixes: tuple[str, ...]
    server: str  # this node's name: ClientInfo's `server`, the server the client is connected to
    cluster: str  # the cluster name INFO shows (empty: none)


def client_info(
    *,
    start: str,
    host: str,
    client_id: int,
    account: str,
    user: str,
    name: str,
    lang: str,
    version: str,
    server: str,
    cluster: str,
) -> dict[str, Any]:
    """nats-server's ClientInfo of a plain NATS client, its fields in nats-server's order, empty ones left
    out as its `omitempty` does. (`rtt` is left out: this gateway does not measure a client's RTT.)"""
    fields: list[tuple[str, Any]] = [
        ("start", start),
        ("host", host),
        ("id", client_id),
        ("acc", account),
        ("user", user),
        ("name", name),
        ("lang", lang),
        ("ver", version),
        ("server", server),
        ("cluster", cluster),
        ("kind", "Client"),
        ("client_type", "nats"),
    ]
    return {key: value for key, value in fields if value}


def encode_client_info(info: dict[str, Any]) -> bytes:
    """The header's value: compact JSON on one line (a header value holds no CR or LF)."""
    return json.dumps(info, separators=(",", ":"), ensure_ascii=True).encode()


def stamp_request_info(headers: bytes | None, info_json: bytes) -> bytes:
    """`headers` (a block ending in its blank line, or None) whose `Nats-Request-Info` is `info_json`,
    whatever the client sent under that name dropped."""
    return set_header(headers, REQUEST_INFO_HEADER, info_json)


__all__ = [
    "REQUEST_INFO_HEADER",
    "RequestInfoPolicy",
    "client_info",
    "encode_client_info",
    "stamp_request_info",
]
