"""Paged LIST answers: an empty page's total, as nats-server 2.15.1 shows it."""

from __future__ import annotations

import asyncio

import orjson

from cluster.api.lists import list_page


class NoLeaders:
    """No entry is asked for when the page is empty; any other request fails the test."""

    async def request(self, subject: str, payload: bytes, timeout: float, headers: bytes | None = None) -> None:
        raise AssertionError(f"asked {subject}")


def page(offset: int, standalone: bool) -> dict[str, object]:
    body = asyncio.run(
        list_page(NoLeaders(), "t", "consumers", ["C1", "D1"], offset, 256, str, standalone=standalone)  # type: ignore[arg-type]
    )
    return orjson.loads(body)


def test_a_page_past_the_end_shows_total_0_in_a_cluster() -> None:
    # a 3-node nats-server answered CONSUMER.LIST with offset 10 over two consumers: total 0
    assert page(10, standalone=False) == {"type": "t", "total": 0, "offset": 2, "limit": 256, "consumers": []}


def test_a_page_past_the_end_shows_the_count_on_a_standalone_server() -> None:
    # a single nats-server answered the same request with total 2
    assert page(10, standalone=True)["total"] == 2
