"""nats-server's `websocket { }` settings, as jetraft serves them, and its checks of a page's Origin.

Read by the config (cluster/node) without starting anything; the listener is gateway/transports/websocket.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from gateway.transports.tls import TlsSettings

# headers a `headers { }` block may not set on the upgrade's answer (nats-server's list)
_RESERVED_HEADERS = frozenset({"host", "content-length", "connection", "upgrade", "nats-no-masking"})


@dataclass(frozen=True, slots=True)
class WebSocketSettings:
    """nats-server's `websocket { }` block, the part jetraft serves."""

    port: int
    host: str | None = None  # None: the node's own address
    no_tls: bool = False
    tls: TlsSettings | None = None
    compression: bool = False
    # a browser's page may connect only from the node's own origin (scheme, host and port of the request)
    same_origin: bool = False
    # ... or only from these origins ("https://app.example.com:8443"); empty: any origin
    allowed_origins: tuple[str, ...] = ()
    # seconds a new connection has to finish its HTTP upgrade; 0: no limit
    handshake_timeout: float = 0.0
    # added to every upgrade's answer
    headers: tuple[tuple[str, str], ...] = ()

    def listen_host(self, node_host: str) -> str:
        """The address the port listens on: its own `host`, else the node's."""
        return self.host or node_host

    def problem(self) -> str | None:
        """nats-server's refusal of these settings, or None."""
        if self.tls is None and not self.no_tls:
            return "websocket requires TLS configuration"
        for origin in self.allowed_origins:
            try:
                parse_origin(origin)
            except ValueError as exc:
                return f"unable to parse allowed origin{exc}"
        for name, _ in self.headers:
            lowered = name.lower()
            if lowered in _RESERVED_HEADERS:
                return f'websocket: invalid header "{name}" not allowed'
            if lowered.startswith("sec-websocket-"):
                return f'websocket: invalid header "{name}", "Sec-WebSocket-" prefix not allowed'
        return None


def parse_origin(origin: str, *, allowed: bool = True) -> tuple[str, str, str]:
    """(scheme, host, port) of an origin URL, the port filled in from the scheme as nats-server does. For an
    allowed origin, a ValueError's message is nats-server's reason (after "unable to parse allowed origin")."""
    parts = urlsplit(origin)
    if not origin.startswith("/") and not (parts.scheme and origin.startswith(f"{parts.scheme}:")):
        raise ValueError(f': parse "{origin}": invalid URI for request')
    if allowed and parts.scheme not in ("http", "https"):
        raise ValueError(f' "{origin}": allowed origins must be absolute URLs with http or https scheme')
    if allowed and not parts.netloc:
        raise ValueError(f' "{origin}": host is required')
    host, port = _host_and_port(parts.netloc, tls=parts.scheme == "https")
    return parts.scheme, host, port


def _host_and_port(netloc: str, *, tls: bool) -> tuple[str, str]:
    """Host and port of `host:port`, `[v6]:port` or a bare host, the scheme's port when there is none
    (nats-server's wsGetHostAndPort)."""
    if netloc.startswith("["):
        end = netloc.find("]")
        host, rest = netloc[1:end], netloc[end + 1 :]
        port = rest[1:] if rest.startswith(":") else ""
    elif netloc.count(":") == 1:
        host, port = netloc.split(":")
    else:
        host, port = netloc, ""
    return host.lower(), port or ("443" if tls else "80")


def origin_refusal(settings: WebSocketSettings, origin: str | None, request_host: str, tls: bool) -> str | None:
    """Why a WebSocket upgrade from a page of `origin` is refused (nats-server's checkOrigin), or None. No
    Origin header is allowed: only browsers send one, and any other client could send any."""
    if not settings.same_origin and not settings.allowed_origins:
        return None
    if not origin:
        return None
    try:
        scheme, host, port = parse_origin(origin, allowed=False)
    except ValueError as exc:
        return str(exc).lstrip(": ")  # the reason alone, without the prefix it has after "allowed origin"
    if settings.same_origin:
        request_host_only, request_port = _host_and_port(request_host, tls=tls)
        if (host, port, scheme.lower()) != (request_host_only, request_port, "https" if tls else "http"):
            return "not same origin"
    if settings.allowed_origins:
        for allowed in settings.allowed_origins:
            allowed_scheme, allowed_host, allowed_port = parse_origin(allowed)
            if (allowed_scheme, allowed_host, allowed_port) == (scheme, host, port):
                return None
        return "not in the allowed list"
    return None
