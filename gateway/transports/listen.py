"""Client-facing listening sockets bound at a node's first moment, before its imports.

A Python node takes about a second from exec to serving (imports, then the services), against
nats-server's few milliseconds. A client that reconnects to a restarting node (a rolling upgrade, a
crash, nats-py's own reconnect tests) found its port refusing connections for that second, and then
waited out its reconnect delay (two seconds in nats-py) before trying again. Bound first, the port
takes the connection into its backlog at once, and the client's INFO (or WebSocket upgrade answer)
comes as soon as the node serves, as with systemd's socket activation. What a client can do on the
connection is what it could do before: nothing is answered until the node is up.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from dataclasses import dataclass
from typing import Any

# as asyncio's create_server listens
LISTEN_BACKLOG = 100


def bind_listening_socket(host: str, port: int, *, reuse_port: bool) -> socket.socket | None:
    """A socket listening on `host:port` as `loop.create_server` binds one (SO_REUSEADDR, and SO_REUSEPORT
    when the port is shared by a node's workers), or None when `host` is a name to resolve: create_server
    then binds it later, as before. OSError when the port is taken."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)  # as create_server: IPv6 only
        try:
            sock.bind((host, port))
        except OSError as exc:  # in create_server's words, which a node's failed start has always logged
            raise OSError(
                exc.errno, f"error while attempting to bind on address {(host, port)!r}: {str(exc.strerror).lower()}"
            ) from None
        sock.listen(LISTEN_BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


def server_address(listening: socket.socket | None, host: str, port: int, *, reuse_port: bool) -> dict[str, Any]:
    """`loop.create_server`'s address arguments: the socket bound early, or the host and port to bind now
    (SO_REUSEPORT when the port is shared by a node's workers)."""
    if listening is not None:
        return {"sock": listening}
    return {"host": host, "port": port, "reuse_port": reuse_port or None}


@dataclass(slots=True)
class EarlyListeners:
    """The sockets a node bound before starting, for its client port and its WebSocket port (None: bound
    when each starts). A listener takes its socket and owns it from then on (the event loop's server
    closes it); `close` releases what no listener took (a start that failed first). Taking clears the
    field, so a socket is never closed twice: its descriptor may by then be another file's."""

    client: socket.socket | None = None
    websocket: socket.socket | None = None

    def take_client(self) -> socket.socket | None:
        sock, self.client = self.client, None
        return sock

    def take_websocket(self) -> socket.socket | None:
        sock, self.websocket = self.websocket, None
        return sock

    def close(self) -> None:
        for sock in (self.take_client(), self.take_websocket()):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.close()
