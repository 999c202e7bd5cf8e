import aiohttp

from cluster.node.http_server import NodeHttpServer
from cluster.runtime.metrics import NodeMetrics


async def test_healthz_and_metrics_are_served() -> None:
    metrics = NodeMetrics("n1")
    healthy = {"value": False}
    server = NodeHttpServer(
        "127.0.0.1", 0, metrics.registry, lambda: (healthy["value"], {"node": "n1", "meta_leader": None})
    )
    await server.start()
    try:
        metrics.direct_get_requests.labels("ORDERS", "n1", "follower", "ok").inc(3)
        base = f"http://127.0.0.1:{server.port}"
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{base}/healthz") as resp:
                assert resp.status == 503
                assert (await resp.json())["status"] == "unavailable"
            healthy["value"] = True
            async with session.get(f"{base}/healthz") as resp:
                assert resp.status == 200
                body = await resp.json()
                assert body == {"status": "ok", "node": "n1", "meta_leader": None}
            async with session.get(f"{base}/metrics") as resp:
                text = await resp.text()
        assert (
            'jetraft_direct_get_requests_total{node="n1",role="follower",status="ok",stream="ORDERS"} 3.0'
            in text
        )
    finally:
        await server.stop()
