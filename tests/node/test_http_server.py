from collections.abc import Mapping
from typing import Any

import aiohttp

from cluster.node.http_server import NodeHttpServer, QueryError
from cluster.runtime.metrics import NodeMetrics


class _Endpoints:
    """Bodies that say which endpoint and query built them, so the test can see the routing."""

    def __init__(self) -> None:
        self.healthy = False
        self.counted: list[str] = []

    def count(self, path: str) -> None:
        self.counted.append(path)

    def healthz(self, query: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        if self.healthy:
            return 200, {"status": "ok", "node": "n1", "meta_leader": None}
        return 503, {"status": "unavailable", "status_code": 503, "error": "no meta leader"}

    def varz(self) -> dict[str, Any]:
        return {"endpoint": "varz"}

    def connz(self, query: Mapping[str, str]) -> dict[str, Any]:
        if query.get("sort") == "bad":
            raise QueryError("invalid sorting option: bad")
        return {"endpoint": "connz", **query}

    def subsz(self, query: Mapping[str, str]) -> dict[str, Any]:
        return {"endpoint": "subsz", **query}

    def routez(self) -> dict[str, Any]:
        return {"endpoint": "routez"}

    def jsz(self, query: Mapping[str, str]) -> dict[str, Any]:
        return {"endpoint": "jsz", **query}

    def gatewayz(self) -> dict[str, Any]:
        return {"endpoint": "gatewayz"}

    def leafz(self) -> dict[str, Any]:
        return {"endpoint": "leafz"}

    def accountz(self, query: Mapping[str, str]) -> dict[str, Any]:
        return {"endpoint": "accountz", **query}

    def accstatz(self, query: Mapping[str, str]) -> dict[str, Any]:
        return {"endpoint": "accstatz", **query}


async def test_monitoring_endpoints_and_metrics_are_served() -> None:
    metrics = NodeMetrics("n1")
    endpoints = _Endpoints()
    server = NodeHttpServer("127.0.0.1", 0, metrics.registry, endpoints)
    await server.start()
    try:
        metrics.direct_get_requests.labels("ORDERS", "n1", "follower", "ok").inc(3)
        base = f"http://127.0.0.1:{server.port}"
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{base}/healthz") as resp:
                assert resp.status == 503
                assert (await resp.json())["status"] == "unavailable"
            endpoints.healthy = True
            async with session.get(f"{base}/healthz") as resp:
                assert resp.status == 200
                body = await resp.json()
                assert body == {"status": "ok", "node": "n1", "meta_leader": None}
            for path in ("varz", "routez", "gatewayz", "leafz"):
                async with session.get(f"{base}/{path}") as resp:
                    assert resp.status == 200
                    assert await resp.json() == {"endpoint": path}
            async with session.get(f"{base}/jsz?streams=true&consumers=1") as resp:
                assert await resp.json() == {"endpoint": "jsz", "streams": "true", "consumers": "1"}
            async with session.get(f"{base}/accstatz?unused=1") as resp:
                assert await resp.json() == {"endpoint": "accstatz", "unused": "1"}
            async with session.get(f"{base}/subsz?subs=1") as resp:
                assert await resp.json() == {"endpoint": "subsz", "subs": "1"}
            async with session.get(f"{base}/connz?sort=bad") as resp:
                assert resp.status == 400
                assert await resp.text() == "invalid sorting option: bad"
            async with session.get(f"{base}/varz?callback=cb") as resp:
                assert (await resp.text()).startswith("cb({")
            async with session.get(f"{base}/metrics") as resp:
                text = await resp.text()
        assert (
            'jetraft_direct_get_requests_total{node="n1",role="follower",status="ok",stream="ORDERS"} 3.0'
            in text
        )
        assert endpoints.counted.count("/varz") == 2 and "/healthz" in endpoints.counted
    finally:
        await server.stop()
