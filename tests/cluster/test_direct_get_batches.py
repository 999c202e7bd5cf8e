"""A long Direct Get batch goes out a slice per loop turn, in order, other requests answered in between."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from cluster.direct_get.answer import ResponderRole
from cluster.direct_get.responder import FRAMES_PER_SLICE, DirectGetResponder
from cluster.runtime.context import NodeContext
from cluster.runtime.internal_requests import InternalRequester
from cluster.runtime.metrics import NodeMetrics
from gateway.headers import decode_headers
from gateway.router import Message, Router
from storage.config import StoreConfig
from storage.memory import MemoryStreamStore

MESSAGES = 3 * FRAMES_PER_SLICE + 10


def responder_over(store: MemoryStreamStore) -> tuple[Router, DirectGetResponder]:
    router = Router()
    ctx = NodeContext(
        name="n1",
        router=router,
        host=None,  # type: ignore[arg-type]  # a responder never touches Raft
        metrics=NodeMetrics("n1"),
        requester=InternalRequester(router, "n1"),
        data_dir=Path("/nonexistent"),
        members=("n1",),
    )

    async def never(seq: int, timeout: float) -> bool:
        return False

    responder = DirectGetResponder(
        ctx,
        answers_for="S",
        store=lambda: store,
        last_seq=lambda: store.state().last_seq,
        wait_for_seq=lambda seq, timeout: asyncio.ensure_future(never(seq, timeout)),
        role=lambda: ResponderRole.LEADER,
        reply_stream="S",
    )
    responder.join()
    return router, responder


def filled_store() -> MemoryStreamStore:
    store = MemoryStreamStore(StoreConfig())
    for seq in range(1, MESSAGES + 1):
        store.store_msg(f"s.{seq % 7}", None, b"%d" % seq, seq)
    return store


def collect(router: Router, subject: str) -> list[Message]:
    got: list[Message] = []
    router.subscribe(subject, got.append)
    return got


def status(msg: Message) -> int | None:
    return decode_headers(msg.headers).status if msg.headers else None


async def test_a_long_batch_arrives_in_order_over_several_turns() -> None:
    router, _ = responder_over(filled_store())
    batch = collect(router, "batch.reply")
    router.publish("$JS.API.DIRECT.GET.S", json.dumps({"seq": 1, "batch": MESSAGES}).encode(), "batch.reply")
    assert len(batch) == FRAMES_PER_SLICE  # the first slice at once

    turns = 0
    while not batch or status(batch[-1]) != 204:
        await asyncio.sleep(0)
        turns += 1
        assert turns < 20
    assert turns >= 3
    assert [m.payload for m in batch[:-1]] == [b"%d" % seq for seq in range(1, MESSAGES + 1)]
    assert decode_headers(batch[-1].headers).get("Nats-Last-Sequence") == str(MESSAGES)


async def test_other_requests_are_answered_while_a_batch_is_going_out() -> None:
    router, _ = responder_over(filled_store())
    batch = collect(router, "batch.reply")
    single = collect(router, "single.reply")
    router.publish("$JS.API.DIRECT.GET.S", json.dumps({"seq": 1, "batch": MESSAGES}).encode(), "batch.reply")
    router.publish("$JS.API.DIRECT.GET.S.s.3", b"", "single.reply")
    assert len(single) == 1
    assert status(batch[-1]) != 204  # answered before the batch's end
    while not batch or status(batch[-1]) != 204:
        await asyncio.sleep(0)
    assert len(batch) == MESSAGES + 1


async def test_messages_removed_mid_batch_are_skipped_and_it_still_ends() -> None:
    store = filled_store()
    router, _ = responder_over(store)
    batch = collect(router, "batch.reply")
    router.publish("$JS.API.DIRECT.GET.S", json.dumps({"seq": 1, "batch": MESSAGES}).encode(), "batch.reply")
    gone = range(FRAMES_PER_SLICE + 1, FRAMES_PER_SLICE + 11)
    for seq in gone:
        store.remove_msg(seq)
    while not batch or status(batch[-1]) != 204:
        await asyncio.sleep(0)
    seqs: list[Any] = [int(m.payload) for m in batch[:-1]]
    assert seqs == [seq for seq in range(1, MESSAGES + 1) if seq not in gone]


async def test_a_batch_stops_when_its_reader_is_gone() -> None:
    store = filled_store()
    router, _ = responder_over(store)
    got: list[Message] = []
    reader = router.subscribe("batch.reply", got.append)
    router.publish("$JS.API.DIRECT.GET.S", json.dumps({"seq": 1, "batch": MESSAGES}).encode(), "batch.reply")
    router.unsubscribe(reader)
    read_from = len(got)
    loads = 0
    load_next_msg = store.load_next_msg

    def counting_load(filter_: str, start: int) -> Any:
        nonlocal loads
        loads += 1
        return load_next_msg(filter_, start)

    store.load_next_msg = counting_load  # type: ignore[method-assign]
    for _ in range(5):
        await asyncio.sleep(0)
    assert read_from == FRAMES_PER_SLICE
    assert loads == 0  # nothing more was read from the store for nobody
