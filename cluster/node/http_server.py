"""The node's HTTP side: nats-server's monitoring endpoints and `/metrics` for Prometheus.

The bodies come from a `MonitoringEndpoints` (cluster/node/monitoring.py builds them from the
node's state); this module only maps paths and query strings to them and answers as nats-server
does: JSON, `?callback=` for JSONP, HTTP 400 with a plain-text reason for a bad query.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


class QueryError(ValueError):
    """A query parameter nats-server would refuse; the text is what it answers (HTTP 400)."""


def int_param(query: Mapping[str, str], name: str, default: int) -> int:
    """An integer parameter, as nats-server decodes it (its error text when it is none)."""
    text = query.get(name)
    if text is None or text == "":
        return default
    try:
        return int(text)
    except ValueError as exc:
        raise QueryError(
            f"Error decoding int for '{name}': strconv.Atoi: parsing \"{text}\": invalid syntax"
        ) from exc


def bool_param(query: Mapping[str, str], name: str) -> bool:
    """A boolean parameter, with Go's strconv.ParseBool spellings (and nats-server's `detail`)."""
    text = query.get(name, "")
    if text in ("", "0", "false", "f", "F", "FALSE", "False"):
        return False
    if text in ("1", "true", "t", "T", "TRUE", "True", "detail"):
        return True
    raise QueryError(
        f"Error decoding boolean for '{name}': strconv.ParseBool: parsing \"{text}\": invalid syntax"
    )


class MonitoringEndpoints(Protocol):
    def count(self, path: str) -> None: ...

    def healthz(self, query: Mapping[str, str]) -> tuple[int, dict[str, Any]]: ...

    def varz(self) -> dict[str, Any]: ...

    def connz(self, query: Mapping[str, str]) -> dict[str, Any]: ...

    def subsz(self, query: Mapping[str, str]) -> dict[str, Any]: ...

    def routez(self) -> dict[str, Any]: ...

    def jsz(self, query: Mapping[str, str]) -> dict[str, Any]: ...

    def gatewayz(self) -> dict[str, Any]: ...

    def leafz(self) -> dict[str, Any]: ...

    def accountz(self, query: Mapping[str, str]) -> dict[str, Any]: ...

    def accstatz(self, query: Mapping[str, str]) -> dict[str, Any]: ...


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class NodeHttpServer:
    """Serves monitoring and metrics on one port; start() binds, stop() releases it."""

    def __init__(
        self,
        host: str,
        port: int,
        registry: CollectorRegistry,
        monitor: MonitoringEndpoints,
        before_metrics: Callable[[], None] | None = None,
    ) -> None:
        """`before_metrics`: sets the gauges read from the node's state, when a scrape asks for them."""
        self._host = host
        self._before_metrics = before_metrics
        self._port = port
        self._registry = registry
        self._monitor = monitor
        self._runner: web.AppRunner | None = None

    @property
    def port(self) -> int:
        return self._port

    async def start(self) -> None:
        monitor = self._monitor
        app = web.Application()
        app.router.add_get("/", self._index)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/metrics", self._metrics)
        endpoints: dict[str, Callable[[Mapping[str, str]], dict[str, Any]]] = {
            "/varz": lambda _query: monitor.varz(),
            "/connz": monitor.connz,
            "/subsz": monitor.subsz,
            "/subscriptionsz": monitor.subsz,
            "/routez": lambda _query: monitor.routez(),
            "/jsz": monitor.jsz,
            "/gatewayz": lambda _query: monitor.gatewayz(),
            "/leafz": lambda _query: monitor.leafz(),
            "/accountz": monitor.accountz,
            "/accstatz": monitor.accstatz,
        }
        for path, build in endpoints.items():
            app.router.add_get(path, self._json_endpoint(path, build))
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        if self._port == 0:
            server = site._server  # aiohttp exposes no public accessor for the bound port
            assert server is not None
            self._port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _json_endpoint(self, path: str, build: Callable[[Mapping[str, str]], dict[str, Any]]) -> Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            self._monitor.count(path)
            try:
                body = build(request.query)
            except QueryError as exc:
                return web.Response(status=400, text=str(exc))
            return json_reply(request, body, 200)

        return handle

    async def _index(self, _request: web.Request) -> web.Response:
        self._monitor.count("/")
        return index_page()

    async def _healthz(self, request: web.Request) -> web.StreamResponse:
        self._monitor.count("/healthz")
        try:
            status, body = self._monitor.healthz(request.query)
        except QueryError as exc:
            return web.Response(status=400, text=str(exc))
        return json_reply(request, body, status)

    async def _metrics(self, _request: web.Request) -> web.Response:
        if self._before_metrics is not None:
            self._before_metrics()
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


INDEX_PATHS = ("varz", "connz", "routez", "gatewayz", "leafz", "subsz", "accountz", "accstatz", "jsz", "healthz")


def index_page() -> web.Response:
    """The page at `/`: a link to each endpoint, as nats-server's, and to /metrics."""
    links = "".join(f'<a href="./{p}">{p}</a><br/>' for p in (*INDEX_PATHS, "metrics"))
    return web.Response(text=f"<html><body>{links}</body></html>", content_type="text/html")


def json_reply(request: web.Request, body: dict[str, Any], status: int) -> web.Response:
    """nats-server's JSON: indented two spaces; wrapped as `callback(...)` when asked (JSONP)."""
    text = json.dumps(body, indent=2, ensure_ascii=False)
    callback = request.query.get("callback")
    if callback:
        return web.Response(status=status, text=f"{callback}({text})", content_type="application/javascript")
    return web.Response(status=status, text=text, content_type="application/json")
