"""The NATS client port of one node: accepts connections, sends INFO, keeps the client list.

Composed with a `Router` it is given (which cluster/ also hands to the
JetStream layer and to the route mesh): the server owns no routing itself.
"""

from __future__ import annotations

import asyncio
import base64
import secrets
import socket
import ssl
from collections.abc import Iterable
from typing import Any

from gateway.accounts import Accounts
from gateway.auth import Authenticator
from gateway.connect_options import RequestInfoPolicy
from gateway.connection import ClientConnection
from gateway.limits import Limits, ServerStats, SharedConnectionCount
from gateway.protocol import encode_info
from gateway.router import Router
from gateway.transports.listen import server_address
from gateway.transports.tls import TlsSettings, server_context

# The nats-server release whose client protocol and JetStream API we follow;
# clients gate features on it (nats-py uses the 2.9+ consumer create API).
NATS_COMPAT_VERSION = "2.15.1"


def new_server_id() -> str:
    """An id shaped like nats-server's: 'N' and 55 base32 characters."""
    return "N" + base64.b32encode(secrets.token_bytes(35)).decode()[:55]


def host_port(url: str) -> str:
    """`nats://127.0.0.1:4222` -> `127.0.0.1:4222`, the form INFO connect_urls uses."""
    return url.split("://", 1)[-1].rstrip("/")


class GatewayServer:
    def __init__(
        self,
        router: Router,
        *,
        name: str,
        host: str = "127.0.0.1",
        port: int = 0,
        limits: Limits | None = None,
        auth: Authenticator | None = None,
        advertise: str | None = None,
        info_extra: dict[str, Any] | None = None,
        version: str = NATS_COMPAT_VERSION,
        tls: TlsSettings | None = None,
        accounts: Accounts | None = None,
        reuse_port: bool = False,
        client_ids: tuple[int, int] = (1, 1),
        shared_connections: SharedConnectionCount | None = None,
    ) -> None:
        """`client_ids`: (first, step) of the ids this port gives its clients; a node's workers each
        take their own residue (worker i of N: i+1, i+1+N, ...) so no two workers give the same cid.
        `shared_connections`: the count max_connections holds against when other processes share the
        port (None: this port's own clients)."""
        self.router = router
        # several processes listening on one port (a node's workers); the kernel spreads new connections
        self.reuse_port = reuse_port
        self.name = name
        self.host = host
        self.port = port
        self.limits = limits or Limits()
        self.auth = auth
        self.server_id = new_server_id()
        self.stats = ServerStats()
        self._advertise = advertise
        self._version = version
        self._info_extra = dict(info_extra or {})
        self._cluster_urls: list[str] = []
        self._clients: dict[int, ClientConnection] = {}
        self._shared_connections = shared_connections
        # the clients counted in the shared count, each given back once when it goes
        self._shared_counted: set[int] = set()
        first_client_id, self._client_id_step = client_ids
        self._next_client_id = first_client_id - self._client_id_step
        self._server: asyncio.Server | None = None
        self._info: dict[str, Any] = {}
        self.tls = tls
        # which publishes carry their client's details (Nats-Request-Info): set by a JetStream node
        self.request_info: RequestInfoPolicy | None = None
        # Several accounts: each connection maps its client's subjects (None: one space, nothing to map).
        self.accounts = accounts if accounts is not None and len(accounts.accounts) > 1 else None
        # The context each connection upgrades with after its INFO (None: no TLS, or TLS before INFO).
        self.tls_upgrade: ssl.SSLContext | None = None
        # the account nats-server calls the system account (`acc_is_sys` in a client's connect INFO)
        self.system_account: str | None = None

    async def start(self, listening: socket.socket | None = None) -> None:
        """Serve on `listening` (bound already, gateway/transports/listen.py), or bind host and port now."""
        loop = asyncio.get_running_loop()
        handshake_first: ssl.SSLContext | None = None
        if self.tls is not None:
            context = server_context(self.tls)
            if self.tls.handshake_first:
                handshake_first = context
            else:
                self.tls_upgrade = context
        self._server = await loop.create_server(
            self._new_connection,
            ssl=handshake_first,
            ssl_handshake_timeout=self.tls.timeout if handshake_first is not None and self.tls else None,
            **server_address(listening, self.host, self.port, reuse_port=self.reuse_port),
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._rebuild_info()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for client in list(self._clients.values()):
            client.close()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    def stop_accepting(self) -> None:
        """Lame duck mode's first step: no new client is taken; the connected ones stay."""
        if self._server is not None:
            self._server.close()

    def announce_lame_duck(self) -> None:
        """Tell every client this server is leaving, as nats-server's lame duck INFO does: `ldm` true and
        no connect_urls (a client should not be pointed back here); later clients see it too."""
        self._info_extra["ldm"] = True
        self._rebuild_info()
        for client in list(self._clients.values()):
            client.send_info(encode_info(self._info))

    @property
    def connect_urls(self) -> list[str]:
        """INFO's connect_urls: this node's client address and the other nodes' (empty alone)."""
        return list(self._info.get("connect_urls", []))

    @property
    def version(self) -> str:
        """The nats-server version this port announces in INFO."""
        return self._version

    @property
    def client_url(self) -> str:
        return self._advertise or f"nats://{self.host}:{self.port}"

    @property
    def clients(self) -> list[ClientConnection]:
        return list(self._clients.values())

    def _new_connection(self) -> ClientConnection:
        self._next_client_id += self._client_id_step
        self.stats.connections_total += 1
        return ClientConnection(self, self._next_client_id)

    def new_websocket_connection(self) -> ClientConnection:
        """A client of the WebSocket port (gateway/transports/websocket.py): its TLS, if any, is the listener's."""
        client = self._new_connection()
        client.websocket = True
        return client

    def admit(self, client: ClientConnection) -> bool:
        """Register `client` unless max_connections is reached (0: no limit; below 0: no client at all),
        counting it where the count is shared; whether it was."""
        limit = self.limits.max_connections
        if limit < 0:
            return False
        if limit > 0:
            shared = self._shared_connections
            if shared is None:
                if len(self._clients) >= limit:
                    return False
            elif shared.try_add(limit):
                self._shared_counted.add(client.client_id)
            else:
                return False
        self._clients[client.client_id] = client
        return True

    def unregister(self, client: ClientConnection) -> None:
        if self._clients.pop(client.client_id, None) is not None:
            self.stats.add_closed(client.account_name, client)
        if client.client_id in self._shared_counted:
            self._shared_counted.discard(client.client_id)
            assert self._shared_connections is not None
            self._shared_connections.remove()

    # --- INFO ---------------------------------------------------------------------------

    def set_cluster_urls(self, urls: Iterable[str]) -> None:
        """The other nodes' client URLs; clients get them in INFO connect_urls (and an INFO update now)."""
        cluster = sorted({host_port(url) for url in urls} - {host_port(self.client_url)})
        if cluster == self._cluster_urls:
            return
        self._cluster_urls = cluster
        self._rebuild_info()
        for client in list(self._clients.values()):
            client.send_info(encode_info(self._info))

    def _rebuild_info(self) -> None:
        info: dict[str, Any] = {
            "server_id": self.server_id,
            "server_name": self.name,
            "version": self._version,
            "proto": 1,
            "host": self.host,
            "port": self.port,
            "headers": True,
            "max_payload": self.limits.max_payload,
        }
        if self.auth is not None:
            info["auth_required"] = True
        if self.tls is not None:
            info["tls_required"] = True
            if self.tls.verify:
                info["tls_verify"] = True
        if self._cluster_urls and not self._info_extra.get("ldm"):
            info["connect_urls"] = [host_port(self.client_url), *self._cluster_urls]
        info.update(self._info_extra)
        self._info = info

    def _client_info(self, client: ClientConnection) -> dict[str, Any]:
        """The server's INFO as `client` is told it."""
        info = {**self._info, "client_id": client.client_id, "client_ip": client.remote_ip}
        if client.websocket:  # TLS is the WebSocket listener's, never asked for in the protocol
            info.pop("tls_required", None)
            info.pop("tls_verify", None)
        return info

    def info_bytes(self, client: ClientConnection) -> bytes:
        info = self._client_info(client)
        if client.nonce:
            info["nonce"] = client.nonce
        return encode_info(info)

    def connect_info_bytes(self, client: ClientConnection) -> bytes:
        """The INFO nats-server sends after its first PONG to a client's CONNECT: the server's, with the
        account the client is bound to (`remote_account`) and whether it is the system account."""
        info = self._client_info(client)
        info["connect_info"] = True
        info["remote_account"] = client.account_name
        if client.account_name == self.system_account:
            info["acc_is_sys"] = True
        return encode_info(info)
