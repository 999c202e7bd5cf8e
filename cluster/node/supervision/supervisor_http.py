"""nats-server's monitoring endpoints on a several-worker node's HTTP port, served by its supervisor.

Each request is asked of every worker's own HTTP port at once (each ask bounded by the supervisor's
client timeout) and the answers merged into the node's (merged_monitoring.py, merged_jetstream.py,
merged_lists.py). The query is checked here first, in the order one node checks it, so a bad one
gets the same 400; paging is done after the merge (the workers are asked for the first
`offset + limit`). A worker that does not answer is left out and named in `unanswered_workers`;
none answering is a 503.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import urlencode

from cluster.node.http_listener import Handler, HttpRequest, HttpResponse
from cluster.node.http_server import QueryError, bool_param, index_page, int_param, json_reply
from cluster.node.supervision.merged_bodies import Bodies, NodeIdentity, with_unanswered
from cluster.node.supervision.merged_jetstream import merged_jsz
from cluster.node.supervision.merged_lists import CONNZ_SORTS, merged_connz, merged_subsz
from cluster.node.supervision.merged_monitoring import (
    merged_accountz,
    merged_accstatz,
    merged_gatewayz,
    merged_leafz,
    merged_routez,
    merged_varz,
)
from cluster.node.supervision.node_endpoints import SYS_REQUEST_HEADER
from storage.nats_time import format_rfc3339_nano

DEFAULT_LIST_LIMIT = 1024

# every worker's answer to one path: (HTTP status, body), or None where it gave none in time
AskWorkers = Callable[[str], Awaitable[dict[str, tuple[int, bytes] | None]]]


class NoWorkerAnswered(Exception):
    pass


def forwarded(query: Mapping[str, str], **changes: str | None) -> dict[str, str]:
    """The query a worker is asked: the client's (each key's first value, as one node reads it)
    without `callback` (the JSONP wrapping is the supervisor's), with `changes` (None drops a key)."""
    out: dict[str, str] = {}
    for key, value in query.items():
        out.setdefault(key, value)
    out.pop("callback", None)
    for key, change in changes.items():
        if change is None:
            out.pop(key, None)
        else:
            out[key] = change
    return out


def _list_page(query: Mapping[str, str]) -> tuple[int, int]:
    offset = max(int_param(query, "offset", 0), 0)
    limit = int_param(query, "limit", DEFAULT_LIST_LIMIT)
    return offset, limit if limit > 0 else DEFAULT_LIST_LIMIT


class NodeMonitoringEndpoints:
    """The node's /, /varz, /connz, /subsz, /routez, /jsz, /gatewayz, /leafz, /accountz, /accstatz."""

    def __init__(self, node: NodeIdentity, ask: AskWorkers) -> None:
        self.node = node
        self._ask = ask
        self._requests: dict[str, int] = {}

    def count(self, path: str) -> None:
        """A request on `path`, for /varz's http_req_stats (the node's port, not the workers')."""
        self._requests[path] = self._requests.get(path, 0) + 1

    def routes(self) -> dict[str, Handler]:
        """Each endpoint's path and handler (the supervisor adds /healthz and /metrics)."""
        builders: dict[str, Callable[[Mapping[str, str]], Awaitable[dict[str, Any]]]] = {
            "/varz": self._varz,
            "/connz": self._connz,
            "/subsz": self._subsz,
            "/subscriptionsz": self._subsz,
            "/routez": self._routez,
            "/jsz": self._jsz,
            "/gatewayz": self._simple("/gatewayz", merged_gatewayz),
            "/leafz": self._simple("/leafz", merged_leafz),
            "/accountz": self._simple("/accountz", merged_accountz),
            "/accstatz": self._simple("/accstatz", merged_accstatz),
        }
        routes: dict[str, Handler] = {"/": self._index}
        for path, build in builders.items():
            routes[path] = self._endpoint(path, build)
        return routes

    async def _index(self, _request: HttpRequest) -> HttpResponse:
        self.count("/")
        return index_page()

    def _endpoint(
        self, path: str, build: Callable[[Mapping[str, str]], Awaitable[dict[str, Any]]]
    ) -> Handler:
        async def handle(request: HttpRequest) -> HttpResponse:
            if not request.has_header(SYS_REQUEST_HEADER):  # a worker answering a $SYS request, not HTTP
                self.count(path)
            try:
                body = await build(request.query)
            except QueryError as exc:
                return HttpResponse.text(400, str(exc))
            except NoWorkerAnswered:
                return HttpResponse.text(503, f"no worker of node {self.node.name} answered")
            return json_reply(request, body, 200)

        return handle

    async def _gather(self, path: str, query: Mapping[str, str]) -> tuple[Bodies, list[str]]:
        """The workers' bodies for `path?query`, and the workers that gave none. A worker's 400 is
        the query's fault, the same on every worker: it is the answer."""
        answers = await self._ask(f"{path}?{urlencode(query)}" if query else path)
        bodies: dict[str, dict[str, Any]] = {}
        unanswered = []
        for worker, answer in answers.items():
            if answer is not None and answer[0] == 400:
                raise QueryError(answer[1].decode(errors="replace"))
            body = None
            if answer is not None and answer[0] == 200:
                try:
                    body = json.loads(answer[1])
                except ValueError:
                    body = None
            if isinstance(body, dict):
                bodies[worker] = body
            else:
                unanswered.append(worker)
        if not bodies:
            raise NoWorkerAnswered
        return bodies, unanswered

    def _simple(
        self, path: str, merge: Callable[[NodeIdentity, Bodies, str], dict[str, Any]]
    ) -> Callable[[Mapping[str, str]], Awaitable[dict[str, Any]]]:
        async def build(query: Mapping[str, str]) -> dict[str, Any]:
            bodies, unanswered = await self._gather(path, forwarded(query))
            return with_unanswered(merge(self.node, bodies, _now()), unanswered)

        return build

    async def _varz(self, query: Mapping[str, str]) -> dict[str, Any]:
        (varz, missing), (routez, _) = await asyncio.gather(
            self._gather("/varz", forwarded(query)), self._gather("/routez", forwarded(query))
        )
        body = merged_varz(self.node, varz, routez, self._requests, time.time_ns())
        return with_unanswered(body, missing)

    async def _routez(self, query: Mapping[str, str]) -> dict[str, Any]:
        bodies, unanswered = await self._gather("/routez", forwarded(query))
        return with_unanswered(merged_routez(self.node, bodies, _now()), unanswered)

    async def _connz(self, query: Mapping[str, str]) -> dict[str, Any]:
        offset, limit = _list_page(query)
        bool_param(query, "subs")
        bool_param(query, "auth")
        sort = query.get("sort", "") or "cid"
        if sort not in CONNZ_SORTS:
            raise QueryError(f"invalid sorting option: {sort}")
        int_param(query, "cid", 0)
        asked = forwarded(query, offset="0", limit=str(offset + limit))
        bodies, unanswered = await self._gather("/connz", asked)
        return with_unanswered(merged_connz(self.node, bodies, offset, limit, sort, _now()), unanswered)

    async def _subsz(self, query: Mapping[str, str]) -> dict[str, Any]:
        offset, limit = _list_page(query)
        with_subs = bool_param(query, "subs")
        asked = forwarded(query, offset="0", limit=str(offset + limit))
        bodies, unanswered = await self._gather("/subsz", asked)
        return with_unanswered(merged_subsz(self.node, bodies, offset, limit, with_subs, _now()), unanswered)

    async def _jsz(self, query: Mapping[str, str]) -> dict[str, Any]:
        for name in ("streams", "consumers", "config"):
            bool_param(query, name)
        leader_only = bool_param(query, "leader-only")
        bool_param(query, "accounts")
        # the learners (every worker but 0) never lead the meta group: leadership is judged here
        bodies, unanswered = await self._gather("/jsz", forwarded(query, **{"leader-only": None}))
        return with_unanswered(merged_jsz(self.node, bodies, leader_only, _now()), unanswered)


def _now() -> str:
    return format_rfc3339_nano(time.time_ns())
