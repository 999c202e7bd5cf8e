"""A leader answering for the meta leader waits until its node has reconciled the meta index asked for."""

from __future__ import annotations

import asyncio

from cluster.runtime.meta_progress import MetaProgress, meta_index_of, with_meta_index
from gateway.headers import decode_headers, encode_headers


async def test_reached_waits_for_the_reconciler_to_get_there() -> None:
    progress = MetaProgress()
    waiting = asyncio.create_task(progress.reached(7, timeout=5))
    await asyncio.sleep(0)
    progress.advance(6)
    await asyncio.sleep(0)
    assert not waiting.done()
    progress.advance(9)
    assert await waiting
    progress.advance(3)  # never goes back
    assert progress.reconciled == 9 and await progress.reached(9, timeout=0)


async def test_reached_gives_up_after_the_timeout() -> None:
    assert not await MetaProgress().reached(1, timeout=0.05)


def test_the_index_travels_in_a_header_beside_the_clients_own() -> None:
    assert meta_index_of(None) == 0 and meta_index_of(encode_headers([("X", "1")])) == 0
    alone = with_meta_index(None, 42)
    assert meta_index_of(alone) == 42
    client = encode_headers([("Nats-Required-Api-Level", "1")])
    both = with_meta_index(client, 7)
    assert decode_headers(both).fields == [("Nats-Required-Api-Level", "1"), ("Jetraft-Meta-Index", "7")]
    assert meta_index_of(both) == 7
