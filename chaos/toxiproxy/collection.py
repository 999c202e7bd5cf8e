"""Every proxy of one server, by name, with the operations the API exposes.

One lock serialises all changes, as Toxiproxy's mutexes do, so an API call
never sees (or rewires) a proxy halfway through another call.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

from chaos.toxiproxy.errors import PROXY_ALREADY_EXISTS, PROXY_NOT_FOUND, TOXIC_ALREADY_EXISTS, ApiError
from chaos.toxiproxy.proxy import Proxy
from chaos.toxiproxy.toxics import Direction, ToxicEntry, build_toxic


@dataclass(frozen=True, slots=True)
class ProxySpec:
    """What a client asks for when it creates or updates a proxy."""

    name: str
    listen: str
    upstream: str
    enabled: bool = True


@dataclass(frozen=True, slots=True)
class ToxicSpec:
    name: str
    type_name: str
    stream: Direction
    toxicity: float
    attributes: object


class ProxyCollection:
    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._proxies: dict[str, Proxy] = {}
        self.lock = asyncio.Lock()

    def proxies(self) -> list[Proxy]:
        return list(self._proxies.values())

    def get(self, name: str) -> Proxy:
        try:
            return self._proxies[name]
        except KeyError:
            raise PROXY_NOT_FOUND from None

    async def create(self, spec: ProxySpec) -> Proxy:
        async with self.lock:
            if spec.name in self._proxies:
                raise PROXY_ALREADY_EXISTS
            proxy = Proxy(spec.name, spec.listen, spec.upstream, self._rng)
            if spec.enabled:
                await proxy.start()
            self._proxies[spec.name] = proxy
            return proxy

    async def update(
        self, name: str, listen: str | None, upstream: str | None, enabled: bool | None
    ) -> Proxy:
        async with self.lock:
            proxy = self.get(name)
            await proxy.update(
                proxy.listen if listen is None else listen,
                proxy.upstream if upstream is None else upstream,
                proxy.enabled if enabled is None else enabled,
            )
            return proxy

    async def remove(self, name: str) -> None:
        async with self.lock:
            proxy = self.get(name)
            await proxy.stop()
            del self._proxies[name]

    async def populate(self, specs: list[ProxySpec]) -> tuple[list[Proxy], ApiError | None]:
        """Create or replace each proxy in order; stop at the first failure and report it with what was done.

        A proxy whose listen and upstream are unchanged is kept as it is (toxics and all).
        """
        done: list[Proxy] = []
        async with self.lock:
            for spec in specs:
                try:
                    done.append(await self._add_or_replace(spec))
                except ApiError as error:
                    return done, error
        return done, None

    async def _add_or_replace(self, spec: ProxySpec) -> Proxy:
        existing = self._proxies.get(spec.name)
        if existing is not None:
            if not existing.differs(spec.listen, spec.upstream):
                return existing
            await existing.stop()
        proxy = Proxy(spec.name, spec.listen, spec.upstream, self._rng)
        if spec.enabled:
            await proxy.start()
        self._proxies[spec.name] = proxy
        return proxy

    async def reset(self) -> None:
        """Enable every proxy and remove every toxic."""
        async with self.lock:
            for proxy in self.proxies():
                await proxy.start()
                await proxy.remove_all_toxics()

    async def clear(self) -> None:
        """Stop and forget every proxy (server shutdown)."""
        async with self.lock:
            for proxy in self.proxies():
                await proxy.stop()
            self._proxies.clear()

    # --- toxics ---------------------------------------------------------------

    async def add_toxic(self, proxy_name: str, spec: ToxicSpec) -> ToxicEntry:
        async with self.lock:
            proxy = self.get(proxy_name)
            # Toxiproxy checks the name before it decodes the attributes
            if proxy.has_toxic(spec.name):
                raise TOXIC_ALREADY_EXISTS
            entry = ToxicEntry(
                spec.name, spec.stream, spec.toxicity, build_toxic(spec.type_name, spec.attributes)
            )
            proxy.add_toxic(entry)
            return entry

    async def update_toxic(
        self, proxy_name: str, toxic_name: str, attributes: object, toxicity: float | None
    ) -> ToxicEntry:
        async with self.lock:
            proxy = self.get(proxy_name)
            current = proxy.get_toxic(toxic_name)
            entry = ToxicEntry(
                current.name,
                current.stream,
                current.toxicity if toxicity is None else toxicity,
                build_toxic(current.type_name, attributes, current.toxic),
            )
            await proxy.update_toxic(entry)
            return entry

    async def remove_toxic(self, proxy_name: str, toxic_name: str) -> None:
        async with self.lock:
            await self.get(proxy_name).remove_toxic(toxic_name)
