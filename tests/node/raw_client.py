"""A NATS client speaking the raw protocol, to compare a server's exact replies line by line."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from typing import Any

import nkeys


class RawClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, info: dict[str, Any]) -> None:
        self.reader = reader
        self.writer = writer
        self.info = info
        # the asynchronous INFOs it was sent after the first (the one after CONNECT names its account)
        self.infos: list[dict[str, Any]] = []

    @classmethod
    async def connect(
        cls, host: str, port: int, nkey_seed: bytes | None = None, user_jwt: str | None = None, **options: Any
    ) -> RawClient:
        """Connect and send CONNECT with `options`; with `nkey_seed`, sign the INFO's nonce as nats-py does
        (and with `user_jwt` too, send that JWT in place of the nkey, as a client with a creds file does)."""
        reader, writer = await asyncio.open_connection(host, port)
        line = await asyncio.wait_for(reader.readline(), 10)
        assert line.startswith(b"INFO "), line
        client = cls(reader, writer, json.loads(line[5:]))
        connect = {"verbose": False, "pedantic": False, "headers": True, "protocol": 1, **options}
        if nkey_seed is not None:
            key = nkeys.from_seed(bytearray(nkey_seed))
            if user_jwt is None:
                connect["nkey"] = key.public_key.decode()
            connect["sig"] = base64.b64encode(key.sign(client.info.get("nonce", "").encode())).decode()
        if user_jwt is not None:
            connect["jwt"] = user_jwt
        writer.write(b"CONNECT " + json.dumps(connect).encode() + b"\r\n")
        await writer.drain()
        return client

    async def exchange(self, commands: str = "") -> list[str]:
        """Send `commands` and a PING; the lines the server sent before its PONG (the PONG left out), or up
        to the end of the connection if it closed it."""
        self.writer.write(commands.encode() + b"PING\r\n")
        await self.writer.drain()
        lines: list[str] = []
        while True:
            line = await asyncio.wait_for(self.reader.readline(), 10)
            if not line:
                lines.append("<closed>")
                return lines
            text = line.decode().rstrip("\r\n")
            if text == "PONG":
                return lines
            if text.startswith("INFO "):
                self.infos.append(json.loads(text[5:]))  # cluster details or the client's account, not replies
                continue
            lines.append(text)

    async def send(self, commands: str) -> None:
        self.writer.write(commands.encode())
        await self.writer.drain()

    async def next_message(self) -> tuple[str, str]:
        """The next MSG or HMSG the server sends (an answer that comes after the PONG): its protocol line
        and its body (headers and payload), waiting up to 10 s; other lines before it are skipped."""
        while True:
            line = (await asyncio.wait_for(self.reader.readline(), 10)).decode().rstrip("\r\n")
            if not line:
                raise ConnectionError("closed before a message came")
            if line.startswith("INFO "):
                self.infos.append(json.loads(line[5:]))
            elif line.startswith(("MSG ", "HMSG ")):
                size = int(line.split()[-1])
                body = await asyncio.wait_for(self.reader.readexactly(size + 2), 10)
                return line, body[:-2].decode()

    async def read_until_closed(self) -> list[str]:
        """What the server sends until it closes the connection, sending nothing more (a PING sent after a
        refused CONNECT could reach a closed socket and reset the connection before the -ERR is read)."""
        lines: list[str] = []
        while True:
            line = await asyncio.wait_for(self.reader.readline(), 10)
            if not line:
                return [*lines, "<closed>"]
            text = line.decode().rstrip("\r\n")
            if text.startswith("INFO "):
                self.infos.append(json.loads(text[5:]))
                continue
            lines.append(text)

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()
