"""A worker's way to its node's monitoring endpoints: its supervisor's HTTP port, which merges every
worker's bodies into the node's (supervisor_http.py).

The worker that answers a `$SYS.REQ.SERVER...` request for the node (cluster/node/sys_requests.py)
asks here, so the answer is the node's, as one nats-server's is its server's. The supervisor tells
each worker where to ask and the node's server id in its environment.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

if TYPE_CHECKING:  # imported at the first question (get): a worker starts without importing aiohttp
    import aiohttp

NODE_HTTP_ENV = "JETRAFT_NODE_HTTP"
NODE_SERVER_ID_ENV = "JETRAFT_NODE_SERVER_ID"
# a request the supervisor does not count in /varz's http_req_stats: nats-server's $SYS requests are
# not HTTP requests
SYS_REQUEST_HEADER = "Jetraft-Sys-Request"
# the supervisor asks every worker with its own 2 s bound; this one only guards against a lost supervisor
ASK_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class NodeSettings:
    """What the supervisor tells its workers about the node they make up."""

    http_address: str
    server_id: str

    def environment(self) -> dict[str, str]:
        return {NODE_HTTP_ENV: self.http_address, NODE_SERVER_ID_ENV: self.server_id}

    @classmethod
    def from_environment(cls) -> NodeSettings | None:
        """None for a process no supervisor started (a node of one worker)."""
        address, server_id = os.environ.get(NODE_HTTP_ENV), os.environ.get(NODE_SERVER_ID_ENV)
        return cls(address, server_id) if address and server_id else None


class NodeEndpoints:
    """The node's endpoints, asked over HTTP (sys_requests.NodeMonitoring)."""

    def __init__(self, name: str, settings: NodeSettings) -> None:
        self.name = name
        self.server_id = settings.server_id
        self._base = f"http://{settings.http_address}"
        self._session: aiohttp.ClientSession | None = None

    async def get(self, path: str, query: Mapping[str, str]) -> tuple[int, Any]:
        """(status, the JSON body, or the error text) of `path?query`; (0, reason) when the supervisor
        could not be asked."""
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=ASK_TIMEOUT))
        url = f"{self._base}{path}?{urlencode(query)}" if query else f"{self._base}{path}"
        try:
            async with self._session.get(url, headers={SYS_REQUEST_HEADER: "1"}) as resp:
                text = await resp.text()
                status = resp.status
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            return 0, repr(exc)
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
