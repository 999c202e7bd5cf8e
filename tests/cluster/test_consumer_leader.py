"""A consumer's leader in one process, over a real router and store and a Raft host that commits at
once: when it wakes (a push subscriber arriving), pauses, and pull requests nobody will receive."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from cluster.api.consumer_subjects import ConsumerOp, consumer_subject
from cluster.consumer.assignment import ConsumerAssignment
from cluster.consumer.config import AckPolicy, ConsumerConfig
from cluster.consumer.config_check import normalize_consumer_config
from cluster.consumer.entries import Delivered, decode_consumer_entry
from cluster.consumer.leader import ConsumerLeader
from cluster.consumer.state import ConsumerState
from cluster.runtime.context import NodeContext
from cluster.runtime.internal_requests import InternalRequester
from cluster.runtime.metrics import NodeMetrics
from cluster.stream.config import StreamConfig
from gateway.headers import decode_headers
from gateway.router import Message, Router
from storage.config import StoreConfig
from storage.errors import CorruptStoreError
from storage.memory import MemoryStreamStore
from storage.model import MsgBatch, StoredMsg

STREAM = StreamConfig(name="S", subjects=("s.>",))
MS = 1_000_000


@dataclass
class InstantHost:
    """The Raft host as a consumer leader uses it, committing every proposal at once."""

    proposed: list[Any] = field(default_factory=list)

    async def read_index(self, group: str, timeout: float | None = None) -> int:
        return 0

    def propose_nowait(self, group: str, data: bytes) -> asyncio.Future[Any]:
        self.proposed.append(decode_consumer_entry(data))
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future

    def status(self, group: str) -> Any:
        return SimpleNamespace(voters=("n1",), last_index=len(self.proposed))

    def peer_progress(self, group: str) -> dict[str, tuple[int, bool]]:
        return {}

    def peer_silence_ns(self, group: str) -> dict[str, int]:
        return {}

    def delivered(self) -> list[int]:
        return [d.stream_seq for e in self.proposed if isinstance(e, Delivered) for d in e.deliveries]


@dataclass
class Replica:
    """What a consumer leader uses of its replica (LedConsumer)."""

    ctx: NodeContext
    assignment: ConsumerAssignment
    config: ConsumerConfig
    state: ConsumerState
    stream: Any
    name: str = "C"
    group: str = "C-group"


@asynccontextmanager
async def leading(
    config: ConsumerConfig, messages: int = 1, store: MemoryStreamStore | None = None
) -> AsyncIterator[tuple[ConsumerLeader, Router]]:
    router = Router()
    host = InstantHost()
    ctx = NodeContext(
        name="n1",
        router=router,
        host=host,  # type: ignore[arg-type]
        metrics=NodeMetrics("n1"),
        requester=InternalRequester(router, "n1"),
        data_dir=Path("/nonexistent"),
        members=("n1",),
    )
    store = store if store is not None else MemoryStreamStore(StoreConfig())
    for i in range(messages):
        store.store_msg("s.a", None, b"m%d" % i, time.time_ns())
    cfg = normalize_consumer_config(config, STREAM)
    assignment = ConsumerAssignment("S", "C", cfg.to_json(), ["n1"], 1)
    replica = Replica(
        ctx, assignment, cfg, ConsumerState(cfg.ack_policy), SimpleNamespace(store=store, group="S")
    )
    leader = ConsumerLeader(replica)  # type: ignore[arg-type]
    leader.open()
    try:
        await asyncio.wait_for(leader._ready.wait(), 5)
        yield leader, router
    finally:
        leader.close()
        await ctx.cancel_tasks()


async def loop_turns(n: int = 20) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def status(msg: Message) -> int | None:
    return decode_headers(msg.headers).status if msg.headers else None


async def test_a_push_consumer_delivers_as_soon_as_its_subscriber_arrives() -> None:
    # the router tells the leader: no timer has to run out (it polled every 50 ms before)
    async with leading(ConsumerConfig(durable_name="C", deliver_subject="deliver.c")) as (_leader, router):
        await loop_turns()  # the leader found nobody to deliver to and went to sleep
        got: list[Message] = []
        router.subscribe("deliver.c", got.append)
        await loop_turns()
        assert [m.payload for m in got] == [b"m0"]


async def test_a_push_consumer_on_a_peer_is_served_when_its_interest_arrives() -> None:
    async with leading(ConsumerConfig(durable_name="C", deliver_subject="deliver.c")) as (_leader, router):
        forwarded: list[str] = []

        class Links:
            def forward(self, peer: str, subject: str, *_args: Any, **_kw: Any) -> None:
                forwarded.append(subject)

            def rtt(self, peer: str) -> None:
                return None

            def peer_labels(self, peer: str) -> tuple[str, ...]:
                return ()

            def congested(self) -> bool:
                return False

            def when_drained(self, callback: Any) -> None:
                callback()

        router.attach_links(Links())  # type: ignore[arg-type]
        await loop_turns()
        router.set_remote_interest("n2", "deliver.*", None, 1)
        await loop_turns()
        assert forwarded == ["deliver.c"]


async def test_a_paused_pull_consumer_delivers_after_the_pause_and_says_so() -> None:
    until = time.time_ns() + 300 * MS
    config = ConsumerConfig(durable_name="C", ack_policy=AckPolicy.EXPLICIT, pause_until_ns=until)
    async with leading(config) as (leader, router):
        got: list[Message] = []
        arrived = asyncio.Event()
        router.subscribe("_INBOX.puller", lambda m: (got.append(m), arrived.set()))
        advisories: list[dict[str, Any]] = []
        router.subscribe(
            "$JS.EVENT.ADVISORY.CONSUMER.PAUSE.S.C", lambda m: advisories.append(json.loads(m.payload))
        )
        body = json.dumps({"batch": 1, "expires": 2000 * MS}).encode()
        router.publish(consumer_subject("S", "C", ConsumerOp.NEXT), body, "_INBOX.puller")
        view = leader.view()
        assert view.pause_remaining_ns > 0 and view.num_waiting == 1
        await asyncio.wait_for(arrived.wait(), 3)
        assert time.time_ns() >= until
        assert [m.payload for m in got] == [b"m0"]
        await loop_turns()
        assert [(a["paused"], a["consumer"]) for a in advisories] == [(False, "C")]
        assert leader.view().pause_remaining_ns == 0


async def test_a_paused_push_consumer_sends_only_heartbeats() -> None:
    until = time.time_ns() + 300 * MS
    config = ConsumerConfig(
        durable_name="C", deliver_subject="deliver.c", idle_heartbeat=50 * MS, pause_until_ns=until
    )
    async with leading(config) as (_leader, router):
        got: list[tuple[int, int | None, bytes]] = []
        delivered = asyncio.Event()

        def on_msg(m: Message) -> None:
            got.append((time.time_ns(), status(m), m.payload))
            if status(m) is None:
                delivered.set()

        router.subscribe("deliver.c", on_msg)
        await asyncio.wait_for(delivered.wait(), 3)
        during = [s for t, s, _ in got if t < until]
        assert during and set(during) == {100}  # heartbeats, nothing else
        assert [p for _, s, p in got if s is None] == [b"m0"]


async def test_a_pull_request_nobody_receives_is_dropped_undelivered() -> None:
    async with leading(ConsumerConfig(durable_name="C", ack_policy=AckPolicy.EXPLICIT)) as (leader, router):
        host: InstantHost = leader.ctx.host  # type: ignore[assignment]
        nobody = json.dumps({"batch": 1, "expires": 2000 * MS}).encode()
        router.publish(consumer_subject("S", "C", ConsumerOp.NEXT), nobody, "_INBOX.gone")
        await loop_turns()
        assert host.delivered() == [] and leader.view().num_waiting == 0
        got: list[Message] = []
        router.subscribe("_INBOX.here", got.append)
        router.publish(consumer_subject("S", "C", ConsumerOp.NEXT), nobody, "_INBOX.here")
        await loop_turns()
        assert [m.payload for m in got] == [b"m0"]
        assert got[0].reply is not None and got[0].reply.startswith("$JS.ACK.S.C.1.1.1.")  # first delivery
        assert host.delivered() == [1]


async def test_a_waiting_request_whose_client_left_stops_counting() -> None:
    async with leading(ConsumerConfig(durable_name="C", ack_policy=AckPolicy.EXPLICIT), messages=0) as (
        leader,
        router,
    ):
        sub = router.subscribe("_INBOX.leaving", lambda _m: None)
        body = json.dumps({"batch": 1, "expires": 5000 * MS}).encode()
        router.publish(consumer_subject("S", "C", ConsumerOp.NEXT), body, "_INBOX.leaving")
        await loop_turns()
        assert leader.view().num_waiting == 1
        router.unsubscribe(sub)
        assert leader.view().num_waiting == 0


async def test_a_no_wait_request_held_back_by_max_ack_pending_ends_at_its_next_heartbeat() -> None:
    """As nats-server's wake-up timer ends it: the client's fetch returns at the heartbeat, and
    messages freed by its acks afterwards are not sent to a request it no longer waits on."""
    config = ConsumerConfig(durable_name="C", ack_policy=AckPolicy.EXPLICIT, max_ack_pending=2)
    async with leading(config, messages=4) as (_leader, router):
        got: list[Message] = []
        ended = asyncio.Event()

        def on_reply(msg: Message) -> None:
            got.append(msg)
            if status(msg) == 404:
                ended.set()

        router.subscribe("_INBOX.fetch", on_reply)
        body = json.dumps({"batch": 4, "expires": 2000 * MS, "idle_heartbeat": 100 * MS, "no_wait": True})
        started = time.monotonic()
        router.publish(consumer_subject("S", "C", ConsumerOp.NEXT), body.encode(), "_INBOX.fetch")
        await asyncio.wait_for(ended.wait(), 1)
        assert time.monotonic() - started < 0.5, "ended at the first heartbeat, not at its expiry"
        delivered = [m for m in got if status(m) is None]
        assert [m.payload for m in delivered] == [b"m0", b"m1"]
        for msg in delivered:
            assert msg.reply is not None
            router.publish(msg.reply, b"+ACK")
        await loop_turns(50)
        assert [status(m) for m in got[2:]] == [404], "nothing more went to the ended request"


class DamagedStore(MemoryStreamStore):
    """Its message `bad` fails its checks when read (a damaged RocksDB block), until repaired."""

    def __init__(self, bad: int) -> None:
        super().__init__(StoreConfig())
        self.bad: int | None = bad

    def _check(self, msg: StoredMsg) -> StoredMsg:
        if msg.seq == self.bad:
            raise CorruptStoreError(f"stream store damaged (sequence {msg.seq})")
        return msg

    def load_msg(self, seq: int) -> StoredMsg:
        return self._check(super().load_msg(seq))

    def load_next_msg(self, filter_: str, start_seq: int) -> StoredMsg:
        return self._check(super().load_next_msg(filter_, start_seq))

    def load_batch(self, filter_: str, start_seq: int, max_msgs: int, max_bytes: int = 0) -> MsgBatch:
        batch = super().load_batch(filter_, start_seq, max_msgs, max_bytes)
        for msg in batch.messages:
            self._check(msg)
        return batch


async def test_a_damaged_message_is_never_delivered_and_the_consumer_goes_on_once_it_reads_again() -> None:
    store = DamagedStore(bad=2)
    config = ConsumerConfig(durable_name="C", deliver_subject="deliver.c")
    async with leading(config, messages=3, store=store) as (leader, router):
        got: list[Message] = []
        router.subscribe("deliver.c", got.append)
        await loop_turns()
        # the round that meets it delivers nothing: never the damaged bytes, nothing in their place
        assert [m.payload for m in got] == []
        store.bad = None  # repaired (the node reinstalled its store from a peer)
        leader.kick()
        await loop_turns()
        assert [m.payload for m in got] == [b"m0", b"m1", b"m2"]
