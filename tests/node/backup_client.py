"""A client's side of STREAM.SNAPSHOT and STREAM.RESTORE, as the nats CLI does them, for tests that run
against jetraft and nats-server alike."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import nats

from tests.pipeline.servers import request_when_served

TIMEOUT = 10.0


@dataclass
class Snapshot:
    answer: dict[str, Any]  # the SNAPSHOT answer: config and state, or an error
    archive: bytes = b""
    acked: list[int] = field(default_factory=list)  # the sizes of the chunks that asked for an ack
    status: str | None = None  # the end marker's Status header (None: an empty message without one)


async def take_snapshot(nc: nats.NATS, stream: str, **options: Any) -> Snapshot:
    """Ask for a snapshot of `stream` (options: chunk_size, no_consumers, jsck...), ack every chunk that
    asks, and keep what came until the end marker (bounded)."""
    inbox = nc.new_inbox()
    taken = Snapshot({})
    archive = bytearray()
    ended: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()

    async def on_chunk(msg: Any) -> None:
        if not msg.data:
            if not ended.done():
                ended.set_result((msg.headers or {}).get("Status"))
            return
        archive.extend(msg.data)
        if msg.reply:
            taken.acked.append(len(msg.data))
            await nc.publish(msg.reply, b"")

    sub = await nc.subscribe(inbox, cb=on_chunk)
    try:
        body = json.dumps({"deliver_subject": inbox, **options}).encode()
        reply = await nc.request(f"$JS.API.STREAM.SNAPSHOT.{stream}", body, timeout=TIMEOUT)
        taken.answer = json.loads(reply.data)
        if "error" not in taken.answer:
            taken.status = await asyncio.wait_for(ended, TIMEOUT)
    finally:
        await sub.unsubscribe()
    taken.archive = bytes(archive)
    return taken


async def restore_archive(
    nc: nats.NATS, stream: str, config: dict[str, Any], archive: bytes, chunk: int = 4096
) -> dict[str, Any]:
    """Restore `archive` as `stream` with `config`: the final (STREAM.CREATE-shaped) answer."""
    body = json.dumps({"config": config}).encode()
    answer = json.loads((await nc.request(f"$JS.API.STREAM.RESTORE.{stream}", body, timeout=TIMEOUT)).data)
    deliver = answer["deliver_subject"]
    for offset in range(0, len(archive), chunk):
        # a clustered nats-server's restore subject is the new stream leader's, which the client's
        # server may hear of a moment after the answer
        ack = await request_when_served(nc, deliver, archive[offset : offset + chunk], timeout=TIMEOUT)
        assert ack.data == b"", ack.data
    final = await nc.request(deliver, b"", timeout=60)
    result: dict[str, Any] = json.loads(final.data)
    return result
