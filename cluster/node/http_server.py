"""The node's HTTP side: nats-server's monitoring endpoints and `/metrics` for Prometheus.

The bodies come from a `MonitoringEndpoints` (cluster/node/monitoring.py builds them from the
node's state); this module only maps paths and query strings to them and answers as nats-server
does: JSON, `?callback=` for JSONP, HTTP 400 with a plain-text reason for a bad query.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from cluster.node.http_listener import Handler, HttpListener, HttpRequest, HttpResponse


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
        self._listener: HttpListener | None = None

    @property
    def port(self) -> int:
        return self._port

    async def start(self) -> None:
        monitor = self._monitor
        routes: dict[str, Handler] = {"/": self._index, "/healthz": self._healthz, "/metrics": self._metrics}
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
            routes[path] = self._json_endpoint(path, build)
        self._listener = HttpListener(self._host, self._port, routes)
        await self._listener.start()
        self._port = self._listener.port

    async def stop(self) -> None:
        if self._listener is not None:
            await self._listener.stop()
            self._listener = None

    def _json_endpoint(self, path: str, build: Callable[[Mapping[str, str]], dict[str, Any]]) -> Handler:
        async def handle(request: HttpRequest) -> HttpResponse:
            self._monitor.count(path)
            try:
                body = build(request.query)
            except QueryError as exc:
                return HttpResponse.text(400, str(exc))
            return json_reply(request, body, 200)

        return handle

    async def _index(self, _request: HttpRequest) -> HttpResponse:
        self._monitor.count("/")
        return index_page()

    async def _healthz(self, request: HttpRequest) -> HttpResponse:
        self._monitor.count("/healthz")
        try:
            status, body = self._monitor.healthz(request.query)
        except QueryError as exc:
            return HttpResponse.text(400, str(exc))
        return json_reply(request, body, status)

    async def _metrics(self, _request: HttpRequest) -> HttpResponse:
        if self._before_metrics is not None:
            self._before_metrics()
        return HttpResponse(200, generate_latest(self._registry), CONTENT_TYPE_LATEST)


INDEX_PATHS = ("varz", "connz", "routez", "gatewayz", "leafz", "subsz", "accountz", "accstatz", "jsz", "healthz")


def index_page() -> HttpResponse:
    """The page at `/`: a link to each endpoint, as nats-server's, and to /metrics."""
    links = "".join(f'<a href="./{p}">{p}</a><br/>' for p in (*INDEX_PATHS, "metrics"))
    return HttpResponse.text(200, f"<html><body>{links}</body></html>", "text/html; charset=utf-8")


def json_reply(request: HttpRequest, body: dict[str, Any], status: int) -> HttpResponse:
    """nats-server's JSON: indented two spaces; wrapped as `callback(...)` when asked (JSONP)."""
    text = json.dumps(body, indent=2, ensure_ascii=False)
    callback = request.query.get("callback")
    if callback:
        return HttpResponse.text(status, f"{callback}({text})", "application/javascript; charset=utf-8")
    return HttpResponse.text(status, text, "application/json; charset=utf-8")
