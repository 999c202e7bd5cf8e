"""The options a client sends in CONNECT, type-checked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.events import ERR_BAD_CLIENT_PROTOCOL, ERR_NO_RESPONDERS_NEEDS_HEADERS, ProtocolError

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
        )
