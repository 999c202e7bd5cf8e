"""A scripted JetStream stand-in on a core nats-server, for the cases a real server will not produce
on demand: a replica that is behind, a server without Direct Get batches, jetraft's reply headers
and its `412 Min Last Sequence`.

It answers STREAM.INFO and STREAM.MSG.GET (the leader's coherent view: every message) and
DIRECT.GET (a replica's view: only messages up to `visible_last`, which `catch_up_after` can
raise after some requests). Requests come in through nats-py; replies go out as raw HPUB
frames over a second connection, since nats-py cannot send a status line.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import nats
import nats.aio.client
import orjson

from gateway.headers import encode_headers
from subjects.grammar import subject_matches


@dataclass
class FakeMessage:
    seq: int
    subject: str
    data: bytes
    headers: list[tuple[str, str]] = field(default_factory=list)

    @property
    def time(self) -> str:
        return f"2026-01-02T03:04:{self.seq % 60:02d}.123456789Z"


class RawPublisher:
    """Publishes pre-encoded header blocks (status lines included) over a plain TCP connection."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._writer: asyncio.StreamWriter | None = None
        self._reader: asyncio.StreamReader | None = None

    async def connect(self) -> None:
        parts = urlsplit(self._url)
        self._reader, self._writer = await asyncio.open_connection(parts.hostname, parts.port)
        await self._reader.readline()  # INFO
        self._writer.write(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\nPING\r\n')
        await self._writer.drain()
        while (await self._reader.readline()).strip() != b"PONG":
            pass

    async def hpub(self, subject: str, header_block: bytes, payload: bytes = b"") -> None:
        assert self._writer is not None
        total = len(header_block) + len(payload)
        self._writer.write(
            f"HPUB {subject} {len(header_block)} {total}\r\n".encode() + header_block + payload + b"\r\n"
        )
        await self._writer.drain()

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


@dataclass
class FakeJetStream:
    url: str
    stream: str
    messages: list[FakeMessage]
    allow_direct: bool = True
    batch_support: bool = True
    visible_last: int = 0  # the replica's last sequence; 0 means it has everything
    catch_up_after: int | None = None  # after this many Direct Gets the replica has everything
    jetraft_headers: bool = False
    node: str = "fake-1"
    direct_requests: list[dict[str, object]] = field(default_factory=list)
    leader_requests: list[dict[str, object]] = field(default_factory=list)

    async def start(self) -> None:
        self._nc: nats.aio.client.Client = await nats.connect(self.url)
        self._raw = RawPublisher(self.url)
        await self._raw.connect()
        await self._nc.subscribe(f"$JS.API.STREAM.INFO.{self.stream}", cb=self._stream_info)
        await self._nc.subscribe(f"$JS.API.STREAM.MSG.GET.{self.stream}", cb=self._msg_get)
        if self.allow_direct:
            # nats-server reserves the _sys_ queue name, so the stand-in subscribes without one.
            await self._nc.subscribe(f"$JS.API.DIRECT.GET.{self.stream}", cb=self._direct_get)
        await self._nc.flush()

    async def stop(self) -> None:
        await self._raw.close()
        await self._nc.close()

    @property
    def last_seq(self) -> int:
        return self.messages[-1].seq if self.messages else 0

    def replica_last(self) -> int:
        if self.catch_up_after is not None and len(self.direct_requests) > self.catch_up_after:
            return self.last_seq
        return self.visible_last or self.last_seq

    async def _stream_info(self, msg: nats.aio.msg.Msg) -> None:
        state = {
            "messages": len(self.messages),
            "first_seq": self.messages[0].seq if self.messages else 0,
            "last_seq": self.last_seq,
        }
        config = {"name": self.stream, "subjects": [">"], "allow_direct": self.allow_direct}
        await msg.respond(
            orjson.dumps(
                {"type": "io.nats.jetstream.api.v1.stream_info_response", "config": config, "state": state}
            )
        )

    def _matching(self, start: int, subject: str | None, upto: int) -> list[FakeMessage]:
        return [
            m
            for m in self.messages
            if start <= m.seq <= upto and (subject is None or subject_matches(subject, m.subject))
        ]

    async def _msg_get(self, msg: nats.aio.msg.Msg) -> None:
        request = orjson.loads(msg.data)
        self.leader_requests.append(request)
        found = self._matching(int(request.get("seq", 1)), request.get("next_by_subj"), self.last_seq)
        if not found:
            error = {"code": 404, "err_code": 10037, "description": "no message found"}
            await msg.respond(orjson.dumps({"error": error}))
            return
        first = found[0]
        await msg.respond(
            orjson.dumps({"message": {"subject": first.subject, "seq": first.seq, "time": first.time}})
        )

    def _extra(self, replica_last: int) -> list[tuple[str, str]]:
        if not self.jetraft_headers:
            return []
        return [
            ("Jetraft-Node", self.node),
            ("Jetraft-Role", "follower"),
            ("Jetraft-Last-Sequence", str(replica_last)),
        ]

    async def _direct_get(self, msg: nats.aio.msg.Msg) -> None:
        request = orjson.loads(msg.data)
        self.direct_requests.append(request)
        replica_last = self.replica_last()
        min_last_seq = int(request.get("min_last_seq", 0))
        if self.jetraft_headers and min_last_seq > replica_last:
            await self._raw.hpub(
                msg.reply, encode_headers(self._extra(replica_last), 412, "Min Last Sequence")
            )
            return
        subject = request.get("next_by_subj")
        matching = self._matching(int(request["seq"]), subject, replica_last)
        batch = int(request.get("batch", 0))
        if not matching:
            await self._raw.hpub(
                msg.reply, encode_headers(self._extra(replica_last), 404, "Message Not Found")
            )
            return
        if not self.batch_support or batch == 0:
            await self._raw.hpub(
                msg.reply, self._message_block(matching[0], None, None, replica_last), matching[0].data
            )
            return
        sent = matching[:batch]
        last = 0
        for index, message in enumerate(sent):
            pending = len(matching) - index - 1
            await self._raw.hpub(
                msg.reply, self._message_block(message, pending, last, replica_last), message.data
            )
            last = message.seq
        pending = len(matching) - len(sent)
        fields = [
            ("Nats-Num-Pending", str(pending)),
            ("Nats-Last-Sequence", str(last)),
            *self._extra(replica_last),
        ]
        await self._raw.hpub(msg.reply, encode_headers(fields, 204, "EOB"))

    def _message_block(
        self, message: FakeMessage, pending: int | None, last: int | None, replica_last: int
    ) -> bytes:
        fields = [
            *message.headers,
            ("Nats-Stream", self.stream),
            ("Nats-Subject", message.subject),
            ("Nats-Sequence", str(message.seq)),
            ("Nats-Time-Stamp", message.time),
        ]
        if pending is not None:
            fields += [("Nats-Num-Pending", str(pending)), ("Nats-Last-Sequence", str(last))]
        return encode_headers(fields + self._extra(replica_last))


def numbered_messages(count: int) -> list[FakeMessage]:
    return [FakeMessage(seq, f"fake.{seq % 3}", f"m{seq}".encode()) for seq in range(1, count + 1)]
