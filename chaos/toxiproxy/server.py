"""The embedded Toxiproxy server as a library: start and stop it on the running asyncio loop."""

from __future__ import annotations

import random
from types import TracebackType

from aiohttp import web

from chaos.toxiproxy.api import create_app
from chaos.toxiproxy.collection import ProxyCollection

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8474


class ToxiproxyServer:
    """The HTTP API and every proxy it creates, in this process.

    `port=0` picks a free port; `port` and `url` tell which after `start()`.
    `stop()` closes the API, every proxy listener and every proxied connection.
    """

    def __init__(self, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, seed: int | None = None) -> None:
        self.host = host
        self.port = port
        # one generator for toxicity draws, jitter and slicing, so a seed replays them
        self.collection = ProxyCollection(random.Random(seed))
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        runner = web.AppRunner(create_app(self.collection), access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        if self.port == 0:
            server = site._server  # aiohttp exposes no public accessor for the bound port
            assert server is not None
            self.port = int(server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.collection.clear()

    async def __aenter__(self) -> ToxiproxyServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()
