"""The sink's bound on publishes awaiting a PubAck, against a stand-in that holds every ack back.

The stand-in answers only once the sink has gone quiet (it stalls on its
window), so the number it holds at that moment is exactly what the sink had
in flight.
"""

from __future__ import annotations

import asyncio

import nats
import nats.aio.msg
import orjson

from pipeline.nats_client import connect
from pipeline.options import WriteOptions
from pipeline.sink import OutgoingMessage, PublishSummary, publish_all

QUIET = 0.05  # seconds without a new publish after which the sink counts as stalled


class HoldingAcker:
    """PubAck responder that holds publishes until none arrives for QUIET seconds, then acks them all."""

    def __init__(self) -> None:
        self.held: list[nats.aio.msg.Msg] = []
        self.most_held = 0
        self.acked = 0
        self._release: asyncio.TimerHandle | None = None

    async def on_publish(self, msg: nats.aio.msg.Msg) -> None:
        self.held.append(msg)
        self.most_held = max(self.most_held, len(self.held))
        if self._release is not None:
            self._release.cancel()
        self._release = asyncio.get_running_loop().call_later(
            QUIET, lambda: asyncio.ensure_future(self.ack_all())
        )

    async def ack_all(self) -> None:
        held, self.held = self.held, []
        for msg in held:
            self.acked += 1
            await msg.respond(orjson.dumps({"stream": "WINDOW", "seq": self.acked}))


async def test_publishes_in_flight_never_exceed_max_in_flight(core_nats: str) -> None:
    acker = HoldingAcker()
    responder = await nats.connect(core_nats)
    await responder.subscribe("window.>", cb=acker.on_publish)
    await responder.flush()
    options = WriteOptions.parse({"servers": core_nats, "max_in_flight": "8", "ack_timeout": "10"})
    messages = [OutgoingMessage(f"window.{i % 3}", b"x", []) for i in range(60)]
    nc = await connect([core_nats], 5.0)
    try:
        summary = await publish_all(nc, iter(messages), options, "0", PublishSummary(0))
    finally:
        await nc.close()
        await responder.close()
    assert summary.stored == 60 and acker.acked == 60
    assert acker.most_held == 8, f"the sink had {acker.most_held} publishes in flight, bound 8"
