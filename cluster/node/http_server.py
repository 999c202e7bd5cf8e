"""The node's HTTP side: `/healthz` for orchestration and `/metrics` for Prometheus."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

HealthProbe = Callable[[], tuple[bool, dict[str, Any]]]


class NodeHttpServer:
    """Serves health and metrics on one port; start() binds, stop() releases it."""

    def __init__(self, host: str, port: int, registry: CollectorRegistry, health: HealthProbe) -> None:
        self._host = host
        self._port = port
        self._registry = registry
        self._health = health
        self._runner: web.AppRunner | None = None

    @property
    def port(self) -> int:
        return self._port

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/metrics", self._metrics)
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

    async def _healthz(self, _request: web.Request) -> web.Response:
        ok, details = self._health()
        return web.json_response(
            {"status": "ok" if ok else "unavailable", **details}, status=200 if ok else 503
        )

    async def _metrics(self, _request: web.Request) -> web.Response:
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
