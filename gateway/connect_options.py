"""What a client says of itself: the options it sends in CONNECT, type-checked; and what the server says of
it to others, its ClientInfo carried with its requests as nats-server's `Nats-Request-Info` header.

nats-server adds this header (its `ClientInfo`, as JSON) where a client's request crosses into a service,
the JetStream API among them, so that whichever server answers can name the client in its API audit
advisory. Here the client's node stamps it on every publish to the subjects the node names
(`RequestInfoPolicy.prefixes`, `$JS.API.` for a JetStream node), replacing any such header the client
sent itself: a client cannot pass for another. The header travels with the request to the node that
answers it (cluster/api/audit.py reads it there).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from gateway.events import ERR_BAD_CLIENT_PROTOCOL, ERR_NO_RESPONDERS_NEEDS_HEADERS, ProtocolError
from gateway.headers import set_header

# The highest client protocol level we speak: 1 = async INFO updates (cluster connect_urls).
CLIENT_PROTOCOL = 1

_BOOL_FIELDS = ("verbose", "pedantic", "echo", "headers", "no_responders", "tls_required")
_STR_FIELDS = ("name", "lang", "version", "user", "pass", "auth_token", "jwt", "nkey", "sig")


@dataclass(frozen=True, slots=True)
class ConnectOptions:
    """nats-server's defaults before a CONNECT arrives: verbose and pedantic on, as a telnet session sees."""

    verbose: bool = True
    pedantic: bool = True
    echo: bool = True
    headers: bool = False
    no_responders: bool = False
    protocol: int = 0
    name: str = ""
    lang: str = ""
    version: str = ""
    user: str | None = None
    password: str | None = None
    auth_token: str | None = None
    nkey: str | None = None
    sig: str | None = None
    jwt: str | None = None  # a user JWT (operator mode)

    @classmethod
    def from_dict(cls, options: dict[str, Any]) -> ConnectOptions:
        """Check types the way nats-server's JSON decoding does; a missing field is false or empty."""
        for key in _BOOL_FIELDS:
            if key in options and not isinstance(options[key], bool):
                raise ProtocolError(f"invalid CONNECT: {key} must be true or false")
        for key in _STR_FIELDS:
            if key in options and options[key] is not None and not isinstance(options[key], str):
                raise ProtocolError(f"invalid CONNECT: {key} must be a string")
        protocol = options.get("protocol", 0)
        if not isinstance(protocol, int) or isinstance(protocol, bool):
            raise ProtocolError("invalid CONNECT: protocol must be an integer")
        if protocol < 0 or protocol > CLIENT_PROTOCOL:
            raise ProtocolError(ERR_BAD_CLIENT_PROTOCOL)
        headers = options.get("headers", False)
        no_responders = options.get("no_responders", False)
        if no_responders and not headers:
            raise ProtocolError(ERR_NO_RESPONDERS_NEEDS_HEADERS)
        return cls(
            verbose=options.get("verbose", False),
            pedantic=options.get("pedantic", False),
            echo=options.get("echo", True),
            headers=headers,
            no_responders=no_responders,
            protocol=protocol,
            name=options.get("name") or "",
            lang=options.get("lang") or "",
            version=options.get("version") or "",
            user=options.get("user"),
            password=options.get("pass"),
            auth_token=options.get("auth_token"),
            nkey=options.get("nkey"),
            sig=options.get("sig"),
            jwt=options.get("jwt"),
        )


# --- ClientInfo, carried with a client's requests ---------------------------------------------

REQUEST_INFO_HEADER = "Nats-Request-Info"
# Who am I: answered with the asking client's user and account, which its node stamps on the request.
USER_INFO_REQUEST = "$SYS.REQ.USER.INFO"


@dataclass(frozen=True)
class RequestInfoPolicy:
    """Which publishes get the header, and what the node says about itself in it."""

    prefixes: tuple[str, ...]
    server: str  # this node's name: ClientInfo's `server`, the server the client is connected to
    cluster: str  # the cluster name INFO shows (empty: none)
    # what follows a prefix on requests never audited, which need no stamp (Direct Get, pull requests:
    # answered with messages, not API responses): each would otherwise carry it for nothing
    unaudited: tuple[str, ...] = ()
    # what the header is for (the audits' subject, in the requester's account): while nobody listens there,
    # requests are not stamped, and cost nothing more (empty: always stamped)
    watched: str = ""

    def stamps(self, subject: str) -> bool:
        """Whether a request on `subject`, already known to start with one of `prefixes`, gets the header."""
        if not self.unaudited:
            return True
        # a loop, not any() over a generator: every Direct Get asks, and the generator tripled the cost
        for prefix in self.prefixes:
            if subject.startswith(prefix) and subject.startswith(self.unaudited, len(prefix)):
                return False
        return True

    @functools.cached_property
    def delivered_prefixes(self) -> tuple[bytes, ...]:
        """The prefixes as the subjects a connection delivers are spelled (bytes)."""
        return tuple(prefix.encode() for prefix in self.prefixes)


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
    rtt_ns: int,
    server: str,
    cluster: str,
) -> dict[str, Any]:
    """nats-server's ClientInfo of a plain NATS client, its fields in nats-server's order, empty ones left
    out as its `omitempty` does."""
    fields: list[tuple[str, Any]] = [
        ("start", start),
        ("host", host),
        ("id", client_id),
        ("acc", account),
        ("user", user),
        ("name", name),
        ("lang", lang),
        ("ver", version),
        ("rtt", rtt_ns),  # a Go Duration: nanoseconds
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


def strip_request_info(headers: bytes) -> bytes | None:
    """`headers` as the client sent them: without the `Nats-Request-Info` its node stamped (None when that
    was all), for the clients that see the request itself (a `$JS.API.>` or `>` subscriber), as nats-server
    adds it only where the request crosses into the JetStream service."""
    start = REQUEST_INFO_HEADER.lower().encode() + b":"
    kept = [part for part in headers[:-4].split(b"\r\n") if not part.lower().startswith(start)]
    if kept == [b"NATS/1.0"]:
        return None
    return b"\r\n".join(kept) + b"\r\n\r\n"


def drop_request_info(headers: bytes | None) -> bytes | None:
    """`headers` without any `Nats-Request-Info` (one a client sent claims to be someone)."""
    if headers is None or REQUEST_INFO_HEADER.lower().encode() not in headers.lower():
        return headers
    return strip_request_info(headers)
