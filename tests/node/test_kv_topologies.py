"""ADR-8's bucket topologies and the object store, driven by nats-py, against a 3-node nats-server 2.15.1
cluster and a 3-node jetraft cluster: what a client sees must agree.

- an aggregate bucket (a stream sourcing another bucket's keys through a subject transform, with no
  subjects of its own: read-only), read and watched as a bucket of its own;
- a writable aggregate, which takes puts of its own beside the copied keys;
- a mirror of a bucket with `mirror_direct`, which answers the origin bucket's Direct Gets;
- an object store: multi-chunk objects of several MB, list, watch, metadata, delete, seal."""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
from collections.abc import Iterator
from typing import Any

import nats
import pytest
from nats.js.api import ObjectMeta

from local.cluster import node_available
from tests.pipeline.servers import NATS_SERVER, JetStreamTarget, side_by_side

pytestmark = pytest.mark.skipif(
    not (node_available() and NATS_SERVER.exists()), reason="needs `jetraft node` and nats-server"
)

TIMEOUT = 10.0
KEYS = {"NEW.1": b"one", "NEW.2": b"two", "OLD.1": b"old"}


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, JetStreamTarget]]:
    with side_by_side(tmp_path_factory) as started:
        yield started


async def _api(nc: nats.NATS, subject: str, body: Any) -> Any:
    reply = await nc.request(subject, json.dumps(body).encode(), timeout=TIMEOUT)
    return json.loads(reply.data)


async def _initial_values(watcher: Any) -> list[Any]:
    """What a watcher delivers before its end-of-initial-values marker (None), at most 10 entries."""
    values = []
    for _ in range(10):
        entry = await watcher.updates(timeout=TIMEOUT)
        if entry is None:
            return values
        values.append(
            (
                getattr(entry, "key", None) or getattr(entry, "name", None),
                entry.value if hasattr(entry, "value") else None,
            )
        )
    raise AssertionError(f"no end of initial values after {values}")


def _kv_stream(bucket: str, **extra: Any) -> dict[str, Any]:
    """A bucket's stream as ADR-8 and the clients configure it (history 1, direct gets, roll-ups)."""
    return {
        "name": f"KV_{bucket}",
        "subjects": [],
        "max_msgs_per_subject": 1,
        "allow_rollup_hdrs": True,
        "deny_delete": True,
        "allow_direct": True,
        "discard": "new",
        "num_replicas": 3,
        "storage": "file",
        **extra,
    }


async def _until_copied(js: Any, stream: str, messages: int) -> None:
    """Sources and mirrors copy asynchronously: wait (bounded) for `messages` to arrive."""
    for _ in range(200):
        try:
            if (await js.stream_info(stream)).state.messages >= messages:
                return
        except nats.js.errors.NotFoundError:
            pass  # nats-server: an R1 stream just created may not be known to every server yet
        await asyncio.sleep(0.05)
    raise AssertionError(f"{stream} never reached {messages} messages")


async def _topologies(url: str) -> list[Any]:
    nc = await nats.connect(url, max_reconnect_attempts=0)
    js = nc.jetstream()
    seen: list[Any] = []
    try:
        orders = await js.create_key_value(bucket="ORDERS", replicas=3, history=1, direct=True)
        for key, value in KEYS.items():
            await orders.put(key, value)
        transform = {"src": "$KV.ORDERS.NEW.>", "dest": "$KV.NEW_ORDERS.NEW.>"}
        aggregate = _kv_stream(
            "NEW_ORDERS",
            deny_purge=True,
            allow_rollup_hdrs=False,
            sources=[{"name": "KV_ORDERS", "subject_transforms": [transform]}],
        )
        created = await _api(nc, "$JS.API.STREAM.CREATE.KV_NEW_ORDERS", aggregate)
        seen.append(created.get("error"))
        await _until_copied(js, "KV_NEW_ORDERS", 2)
        new_orders = await js.key_value("NEW_ORDERS")
        seen.append([(await new_orders.get(key)).value for key in ("NEW.1", "NEW.2")])
        seen.append(sorted(await new_orders.keys()))
        try:
            await new_orders.put("NEW.3", b"three")
            seen.append("put accepted")
        except nats.js.errors.NoStreamResponseError:
            seen.append("read-only: no stream takes the put")
        # a key changed at the origin reaches the aggregate's watchers
        watcher = await new_orders.watch("NEW.>")
        seen.append(await _initial_values(watcher))
        await orders.put("NEW.1", b"uno")
        update = await watcher.updates(timeout=TIMEOUT)
        seen.append((update.key, update.value, update.bucket))
        await watcher.stop()

        writable = _kv_stream(
            "ALL_ORDERS",
            subjects=["$KV.ALL_ORDERS.>"],
            sources=[
                {
                    "name": "KV_ORDERS",
                    "subject_transforms": [{"src": "$KV.ORDERS.>", "dest": "$KV.ALL_ORDERS.>"}],
                }
            ],
        )
        seen.append((await _api(nc, "$JS.API.STREAM.CREATE.KV_ALL_ORDERS", writable)).get("error"))
        await _until_copied(js, "KV_ALL_ORDERS", 3)
        all_orders = await js.key_value("ALL_ORDERS")
        await all_orders.put("LOCAL.1", b"mine")
        seen.append(sorted(await all_orders.keys()))

        mirror = {
            "name": "MIRROR_ORDERS",
            "mirror": {"name": "KV_ORDERS"},
            "mirror_direct": True,
            "num_replicas": 1,
            "storage": "file",
        }
        seen.append((await _api(nc, "$JS.API.STREAM.CREATE.MIRROR_ORDERS", mirror)).get("error"))
        await _until_copied(js, "MIRROR_ORDERS", 3)
        # the mirror joins the origin's Direct Get responders: asked often enough, it answers too
        answered_by: set[str] = set()
        for _ in range(200):
            reply = await nc.request("$JS.API.DIRECT.GET.KV_ORDERS.$KV.ORDERS.OLD.1", b"", timeout=TIMEOUT)
            assert reply.data == b"old"
            answered_by.add((reply.headers or {}).get("Nats-Stream", ""))
            if "MIRROR_ORDERS" in answered_by:
                break
        seen.append("MIRROR_ORDERS" in answered_by and answered_by <= {"KV_ORDERS", "MIRROR_ORDERS"})
        return seen
    finally:
        await nc.close()


async def _objects(url: str) -> list[Any]:
    nc = await nats.connect(url, max_reconnect_attempts=0)
    js = nc.jetstream()
    seen: list[Any] = []
    try:
        store = await js.create_object_store("FILES", replicas=3)
        watcher = await store.watch()
        seen.append(await _initial_values(watcher))
        big = random.Random(7).randbytes(5 * 1024 * 1024 + 123)  # several chunks of 128 KiB
        info = await store.put("big.bin", big, meta=ObjectMeta(name="big.bin", description="five MB"))
        seen.append((info.name, info.size, info.chunks, info.digest, info.description))
        update = await watcher.updates(timeout=TIMEOUT)
        seen.append((update.name, update.size, update.deleted))
        got = await store.get("big.bin")
        seen.append(hashlib.sha256(got.data or b"").hexdigest() == hashlib.sha256(big).hexdigest())
        await store.put("small.txt", b"hello")
        await store.update_meta("small.txt", ObjectMeta(name="small.txt", description="described"))
        seen.append(sorted((o.name, o.size, o.description) for o in await store.list()))
        await store.delete("big.bin")
        seen.append(sorted((o.name, bool(o.deleted)) for o in await store.list(ignore_deletes=False)))
        await store.seal()
        seen.append((await store.status()).sealed)
        try:
            await store.put("late.txt", b"too late")
            seen.append("put after seal accepted")
        except nats.js.errors.Error as exc:
            seen.append(type(exc).__name__)
        await watcher.stop()
        return seen
    finally:
        await nc.close()


@pytest.mark.parametrize("scenario", [_topologies, _objects], ids=["kv-topologies", "object-store"])
async def test_as_on_nats_server(clusters: dict[str, JetStreamTarget], scenario: Any) -> None:
    expected = await scenario(clusters["nats-server"].urls[0])
    got = await scenario(clusters["jetraft"].urls[0])
    assert got == expected
