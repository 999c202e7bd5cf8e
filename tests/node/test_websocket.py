"""The client protocol over WebSocket (`websocket { }`), side by side with nats-server 2.15.1: nats-py over
`ws://` and `wss://` subscribes, publishes with headers, requests and publishes to a stream, and /varz
shows the port as nats-server's does. Before, jetraft refused the block ("not supported yet"), so browser
clients and `ws://` URLs had nothing to talk to."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import ssl
import time
import urllib.request
from pathlib import Path
from typing import Any

import nats
import pytest
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Message,
    Ping,
    Pong,
    Request,
    TextMessage,
)
from wsproto.extensions import PerMessageDeflate

from cluster.node.config import ConfigError, NodeConfig, load_nats_conf
from local.ports import HOST, free_port_base
from tests.gateway.throwaway_ca import Certificates, make_certificates
from tests.node.config_file_node import node_from_config
from tests.node.reference_server import nats_server_from_config


async def what_a_websocket_client_sees(url: str, tls: ssl.SSLContext | None = None) -> dict[str, Any]:
    nc = await nats.connect(url, tls=tls, connect_timeout=10)
    try:
        seen: dict[str, Any] = {"tls_required": nc._server_info.get("tls_required", False)}
        sub = await nc.subscribe("ws.echo")
        await nc.flush()
        await nc.publish("ws.echo", b"over websocket", headers={"k": "v"})
        msg = await sub.next_msg(timeout=5)
        seen["message"] = (msg.subject, msg.data, dict(msg.headers or {}))

        async def answer(request: Any) -> None:
            await request.respond(request.data.upper())

        await nc.subscribe("ws.service", cb=answer)
        await nc.flush()
        seen["reply"] = (await nc.request("ws.service", b"shout", timeout=5)).data
        js = nc.jetstream(timeout=10)
        await js.add_stream(name="WS", subjects=["ws.stream.>"])
        seen["ack"] = [(await js.publish("ws.stream.a", b"kept")).seq for _ in range(2)]
        big = bytes(range(256)) * 2048  # 512 KiB: more than one WebSocket frame's worth on any path
        await nc.publish("ws.echo", big)
        seen["big"] = (await sub.next_msg(timeout=10)).data == big
        return seen
    finally:
        await nc.close()


def varz_websocket(http_port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://{HOST}:{http_port}/varz", timeout=10) as resp:
        return json.load(resp)["websocket"]


async def test_nats_py_over_websocket_sees_what_nats_server_shows(tmp_path: Path) -> None:
    reference, ours = tmp_path / "ref", tmp_path / "jetraft"
    reference.mkdir()
    ours.mkdir()
    ws_port, http_port = free_port_base(2), free_port_base(1)
    block = f"websocket {{ host: {HOST}, port: {ws_port}, no_tls: true }}\n"
    async with nats_server_from_config(
        reference, f"http: {HOST}:{http_port}\njetstream {{ store_dir: '{reference / 'js'}' }}\n{block}"
    ):
        theirs = await what_a_websocket_client_sees(f"ws://{HOST}:{ws_port}")
        their_varz = await asyncio.to_thread(varz_websocket, http_port)
    async with node_from_config(ours, block) as node:
        mine = await what_a_websocket_client_sees(f"ws://{HOST}:{ws_port}")
        my_varz = await asyncio.to_thread(varz_websocket, node.http_port)
    assert theirs["message"] == ("ws.echo", b"over websocket", {"k": "v"}) and theirs["big"]
    assert mine == theirs
    assert my_varz == their_varz == {"host": HOST, "port": ws_port, "no_tls": True}


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("ca"))


async def test_wss_with_the_listeners_tls(tmp_path: Path, certs: Certificates) -> None:
    ws_port = free_port_base(1)
    block = (
        f"websocket {{ host: {HOST}, port: {ws_port}, "
        f"tls {{ cert_file: '{certs.server_cert}', key_file: '{certs.server_key}' }} }}\n"
    )
    context = ssl.create_default_context(cafile=str(certs.ca))
    async with node_from_config(tmp_path, block):
        seen = await what_a_websocket_client_sees(f"wss://{HOST}:{ws_port}", tls=context)
    assert seen["reply"] == b"SHOUT" and seen["ack"] == [1, 2] and seen["big"]
    assert seen["tls_required"] is False  # the TLS is the listener's, never an upgrade inside the protocol


@pytest.mark.parametrize(
    ("block", "error"),
    [
        ("websocket { port: 8080 }", "websocket requires TLS configuration"),
        ("websocket { port: 8080, no_tls: true, advertise: 'x:1' }", "nats-server's setting is not supported"),
        (
            "websocket { port: 8080, no_tls: true, allowed_origins: ['ftp://a.example'] }",
            'unable to parse allowed origin "ftp://a.example": allowed origins must be absolute URLs with http',
        ),
        (
            "websocket { port: 8080, no_tls: true, allowed_origins: ['http://'] }",
            'unable to parse allowed origin "http://": host is required',
        ),
        (
            "websocket { port: 8080, no_tls: true, allowed_origins: ['a.example'] }",
            'unable to parse allowed origin: parse "a.example": invalid URI for request',
        ),
        (
            "websocket { port: 8080, no_tls: true, headers { Connection: close } }",
            'websocket: invalid header "Connection" not allowed',
        ),
        (
            "websocket { port: 8080, no_tls: true, headers { Sec-WebSocket-Protocol: x } }",
            'websocket: invalid header "Sec-WebSocket-Protocol", "Sec-WebSocket-" prefix not allowed',
        ),
        ("websocket { port: 8080, no_tls: true, handshake_timeout: 'soon' }", 'time: invalid duration "soon"'),
        ("websocket { port: 8080, no_tls: true, nonsense: 1 }", "unknown setting"),
        (
            "websocket { port: 8080, tls { cert_file: a, key_file: b, handshake_first: true } }",
            "websocket.tls.handshake_first: nats-server's setting is not supported",
        ),
        (
            "websocket { port: 8080, tls { cert_file: a, key_file: b, timeout: 3 } }",
            "websocket.tls.timeout: nats-server's setting is not supported",
        ),
    ],
)
def test_websocket_settings_jetraft_cannot_serve_are_refused(tmp_path: Path, block: str, error: str) -> None:
    path = tmp_path / "ws.conf"
    path.write_text(block + "\n")
    with pytest.raises(ConfigError, match=re.escape(error)):
        NodeConfig(name="n1", **load_nats_conf(str(path))).validate()


def test_a_websocket_block_without_a_port_serves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ws.conf"
    path.write_text("websocket { no_tls: true }\n")
    assert NodeConfig(name="n1", **load_nats_conf(str(path))).websocket is None


async def _upgrade(port: int, origin: str | None) -> tuple[int, dict[str, str], bytes]:
    """A browser's WebSocket upgrade request from a page of `origin`: the answer's status, the headers this
    test looks at, and its body."""
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [
        "GET / HTTP/1.1", f"Host: {HOST}:{port}", "Upgrade: websocket", "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13",
    ]  # fmt: skip
    if origin is not None:
        lines.append(f"Origin: {origin}")
    wanted = ("content-type", "sec-websocket-version", "x-content-type-options", "x-frame-options")
    return await _answer_to(port, lines, wanted)


async def _seconds_until_an_idle_connection_closes(port: int, bound: float = 10.0) -> float:
    reader, writer = await asyncio.open_connection(HOST, port)
    started = time.monotonic()
    try:
        await asyncio.wait_for(reader.read(), bound)
    except TimeoutError:
        pass
    finally:
        writer.close()
    return time.monotonic() - started


async def _origin_checks(ws_port: int, http_port: int) -> dict[str, Any]:
    """The upgrade's answer from pages of several origins, how long a silent connection lives, and /varz."""
    seen: dict[str, Any] = {}
    for origin in (
        None, "http://good.example:8080", "http://GOOD.example:8080", "http://good.example",
        "https://good.example:8080", "http://evil.example:8080", f"http://{HOST}:{ws_port}", "not a url",
    ):  # fmt: skip
        seen[f"origin {origin}"] = await _upgrade(ws_port, origin)
    seen["idle connection closed within 3 s"] = await _seconds_until_an_idle_connection_closes(ws_port) < 3
    seen["varz"] = await asyncio.to_thread(varz_websocket, http_port)
    return seen


async def _same_origin_checks(ws_port: int, http_port: int) -> dict[str, Any]:
    return {
        f"origin {origin}": (await _upgrade(ws_port, origin))[0]
        for origin in (None, f"http://{HOST}:{ws_port}", f"http://localhost:{ws_port}", f"https://{HOST}:{ws_port}")
    }


async def test_origins_headers_and_handshake_timeout_as_nats_server_has_them(tmp_path: Path) -> None:
    """`allowed_origins`, `same_origin`, `headers` and `handshake_timeout` were refused ("not supported yet"):
    a browser-facing deployment could not keep other sites' pages off its port. Now the upgrade is answered
    as nats-server answers it, 403 and all."""
    ws_port, http_port = free_port_base(2), free_port_base(1)
    allowed = (
        f"websocket {{ host: {HOST}, port: {ws_port}, no_tls: true, handshake_timeout: '1s',\n"
        "  allowed_origins: ['http://good.example:8080'], headers { X-Frame-Options: DENY } }\n"
    )
    same = f"websocket {{ host: {HOST}, port: {ws_port}, no_tls: true, same_origin: true }}\n"
    results = {}
    for name, block in (("allowed", allowed), ("same", same)):
        scenario = _origin_checks if name == "allowed" else _same_origin_checks
        reference, ours = tmp_path / f"ref-{name}", tmp_path / f"jetraft-{name}"
        reference.mkdir()
        ours.mkdir()
        async with nats_server_from_config(reference, f"http: {HOST}:{http_port}\n{block}"):
            theirs = await scenario(ws_port, http_port)
        async with node_from_config(ours, block) as node:
            mine = await scenario(ws_port, node.http_port)
        results[name] = (theirs, mine)
    theirs, mine = results["allowed"]
    assert theirs["origin http://good.example:8080"][0] == 101
    assert theirs["origin http://good.example:8080"][1]["x-frame-options"] == "DENY"
    assert theirs["origin http://evil.example:8080"][0] == 403
    assert theirs["idle connection closed within 3 s"]
    assert mine == theirs
    theirs, mine = results["same"]
    assert theirs[f"origin http://{HOST}:{ws_port}"] == 101 and theirs[f"origin http://localhost:{ws_port}"] == 403
    assert mine == theirs


ANSWER_HEADERS = ("content-type", "sec-websocket-version", "x-content-type-options", "sec-websocket-extensions")


async def _answer_to(
    port: int, request_lines: list[str], wanted: tuple[str, ...] = ANSWER_HEADERS
) -> tuple[int, dict[str, str], bytes]:
    """The answer to one raw HTTP request on the WebSocket port: status, the `wanted` headers (those that say
    what was decided: Date and the like differ by nature), body."""
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        writer.write(("\r\n".join(request_lines) + "\r\n\r\n").encode())
        head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)).decode()
        status_line, *header_lines = head.strip().split("\r\n")
        headers = {name.lower(): value for name, _, value in (line.partition(": ") for line in header_lines)}
        body = b""
        if "content-length" in headers:
            body = await asyncio.wait_for(reader.readexactly(int(headers["content-length"])), 10)
        return int(status_line.split()[1]), {k: v for k, v in headers.items() if k in wanted}, body
    finally:
        writer.close()


def _handshakes(port: int) -> dict[str, list[str]]:
    """Opening handshakes, good and bad, as a browser or a broken client would send them."""
    key = base64.b64encode(os.urandom(16)).decode()
    good = [
        "GET / HTTP/1.1", f"Host: {HOST}:{port}", "Upgrade: websocket", "Connection: keep-alive, Upgrade",
        f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13",
    ]  # fmt: skip

    def without(prefix: str, *extra: str) -> list[str]:
        return [line for line in good if not line.startswith(prefix)] + list(extra)

    return {
        "good": good,
        "any path": ["GET /some/path?x=1 HTTP/1.1", *good[1:]],
        "compression offered": [*good, "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits"],
        "POST": ["POST / HTTP/1.1", *good[1:], "Content-Length: 0"],
        "no Upgrade": without("Upgrade:"),
        "Upgrade not websocket": without("Upgrade:", "Upgrade: h2c"),
        "no Connection upgrade": without("Connection:", "Connection: keep-alive"),
        "no key": without("Sec-WebSocket-Key:"),
        "key not 16 bytes": without("Sec-WebSocket-Key:", "Sec-WebSocket-Key: c2hvcnQ="),
        "key not base64": without("Sec-WebSocket-Key:", "Sec-WebSocket-Key: !!!not-base64!!!!!!!!!!="),
        "version 8": without("Sec-WebSocket-Version:", "Sec-WebSocket-Version: 8"),
        "a plain page request": ["GET / HTTP/1.1", f"Host: {HOST}:{port}"],
    }


async def _close_codes_after_an_unmasked_frame(port: int) -> list[int]:
    """The status of each close frame a server sends, after its INFO, to a client whose frame is not masked
    (RFC 6455 5.1: a server must fail that connection), until it closes the connection."""
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        writer.write(("\r\n".join(_handshakes(port)["good"]) + "\r\n\r\n").encode())
        await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        received = b""
        while not received.endswith(b"\r\n"):  # the INFO message
            received += await asyncio.wait_for(reader.read(65536), 10)
        writer.write(b"\x82\x06PING\r\n")  # a final binary frame of 6 bytes, no mask
        after = b""
        while chunk := await asyncio.wait_for(reader.read(65536), 10):
            after += chunk
        # a close frame: 0x88, its length (under 126 here), then the status in two bytes
        return [int.from_bytes(after[2:4], "big")] if after.startswith(b"\x88") else []
    finally:
        writer.close()


async def _handshake_answers(ws_port: int) -> dict[str, Any]:
    answers: dict[str, Any] = {name: await _answer_to(ws_port, lines) for name, lines in _handshakes(ws_port).items()}
    return answers


async def test_opening_handshakes_answered_as_nats_server_answers_them(tmp_path: Path) -> None:
    """Each check of the upgrade request (method, Upgrade, Connection, key, version) refuses with nats-server's
    status, headers and body; `compression: true` agrees to permessage-deflate on nats-server's terms; a frame
    that breaks the protocol ends the connection with a close frame saying so (1002)."""
    ws_port = free_port_base(1)
    block = f"websocket {{ host: {HOST}, port: {ws_port}, no_tls: true, compression: true }}\n"
    reference, ours = tmp_path / "ref", tmp_path / "jetraft"
    reference.mkdir()
    ours.mkdir()
    async with nats_server_from_config(reference, block):
        theirs = await _handshake_answers(ws_port)
        their_close = await _close_codes_after_an_unmasked_frame(ws_port)
    async with node_from_config(ours, block):
        mine = await _handshake_answers(ws_port)
        my_close = await _close_codes_after_an_unmasked_frame(ws_port)
    assert theirs["good"][0] == theirs["any path"][0] == 101
    assert theirs["POST"][0] == 405 and theirs["no key"] == (
        400,
        {"content-type": "text/plain; charset=utf-8", "sec-websocket-version": "13", "x-content-type-options": "nosniff"},
        b"Bad Request\n",
    )
    assert "permessage-deflate" in theirs["compression offered"][1]["sec-websocket-extensions"]
    assert mine == theirs
    # nats-server queues a close frame with 1002 (protocol error) and closes the connection, and the frame
    # does not always make it out before the close (seen both ways); jetraft sends it
    assert their_close in ([], [1002]) and my_close == [1002]


async def _websocket_session(port: int, *, compress: bool) -> list[Any]:
    """A WebSocket client written from the RFC (wsproto): what the server answers to the protocol in binary,
    text and fragmented messages, to a ping, and to the closing handshake."""
    ws = WSConnection(ConnectionType.CLIENT)
    reader, writer = await asyncio.open_connection(HOST, port)
    protocol = bytearray()
    seen: list[Any] = []

    async def until(wanted: Any) -> None:
        """Read until wanted(events so far) holds, noting what arrives."""
        while not wanted():
            data = await asyncio.wait_for(reader.read(65536), 10)
            ws.receive_data(data or None)
            for event in ws.events():
                if isinstance(event, AcceptConnection):
                    seen.append(("accepted", [type(e).__name__ for e in event.extensions]))
                elif isinstance(event, Message):
                    protocol.extend(event.data.encode() if isinstance(event.data, str) else event.data)
                elif isinstance(event, Pong):
                    seen.append(("pong", bytes(event.payload)))
                elif isinstance(event, CloseConnection):
                    seen.append(("close", event.code))
            if not data:
                seen.append(("eof",))
                return

    def pongs() -> int:
        return protocol.count(b"PONG\r\n")

    try:
        extensions = [PerMessageDeflate()] if compress else []
        writer.write(ws.send(Request(host=f"{HOST}:{port}", target="/", extensions=extensions)))
        await until(lambda: protocol.startswith(b"INFO ") and protocol.endswith(b"\r\n"))
        writer.write(ws.send(BytesMessage(data=b'CONNECT {"verbose":false,"protocol":1}\r\nPING\r\n')))
        await until(lambda: pongs() == 1)
        writer.write(ws.send(TextMessage(data="PING\r\n")))
        await until(lambda: pongs() == 2)
        writer.write(ws.send(BytesMessage(data=b"PI", message_finished=False)))
        writer.write(ws.send(BytesMessage(data=b"NG\r\n", message_finished=True)))
        await until(lambda: pongs() == 3)
        writer.write(ws.send(BytesMessage(data=b"SUB ws.big 1\r\nPUB ws.big 70000\r\n" + b"z" * 70000 + b"\r\nPING\r\n")))
        await until(lambda: pongs() == 4)
        writer.write(ws.send(Ping(payload=b"are you there")))
        await until(lambda: any(item[0] == "pong" for item in seen))
        writer.write(ws.send(CloseConnection(code=1000, reason="bye")))
        await until(lambda: any(item[0] in ("close", "eof") for item in seen))
    finally:
        writer.close()
    # the protocol's commands, without INFO's server-specific contents
    verbs = [line.split(b" ")[0] for line in bytes(protocol).split(b"\r\n") if line and not line.startswith(b"z")]
    return [*seen, ("commands", verbs), ("big message delivered", b"z" * 70000 in protocol)]


async def test_a_websocket_session_frame_by_frame_as_nats_server_has_it(tmp_path: Path) -> None:
    """Binary, text and fragmented messages carry the protocol; a ping is answered with its payload; a
    client's close is answered with a close; with `compression: true` the same holds on compressed frames."""
    results = {}
    for compress in (False, True):
        ws_port = free_port_base(1)
        block = f"websocket {{ host: {HOST}, port: {ws_port}, no_tls: true, compression: {str(compress).lower()} }}\n"
        reference, ours = tmp_path / f"ref-{compress}", tmp_path / f"jetraft-{compress}"
        reference.mkdir()
        ours.mkdir()
        async with nats_server_from_config(reference, block):
            theirs = await _websocket_session(ws_port, compress=compress)
        async with node_from_config(ours, block):
            mine = await _websocket_session(ws_port, compress=compress)
        results[compress] = (theirs, mine)
    theirs, mine = results[True]
    assert theirs[0] == ("accepted", ["PerMessageDeflate"])
    assert ("pong", b"are you there") in theirs and ("close", 1000) in theirs
    assert theirs[-1] == ("big message delivered", True)
    assert mine == theirs
    theirs, mine = results[False]
    assert theirs[0] == ("accepted", [])
    assert mine == theirs


async def _answers_per_message(port: int) -> list[bytes]:
    """SUB, PUB and PING sent as three WebSocket messages in one write: the messages the answers come in."""
    ws = WSConnection(ConnectionType.CLIENT)
    reader, writer = await asyncio.open_connection(HOST, port)
    messages: list[bytes] = []

    accepted = False

    async def until(done: Any) -> None:
        nonlocal accepted
        while not done():
            ws.receive_data(await asyncio.wait_for(reader.read(65536), 10))
            for event in ws.events():
                accepted = accepted or isinstance(event, AcceptConnection)
                if isinstance(event, Message):
                    data = event.data
                    messages.append(data.encode() if isinstance(data, str) else bytes(data))

    def ponged() -> bool:
        return any(b"PONG\r\n" in message for message in messages)

    try:
        writer.write(ws.send(Request(host=f"{HOST}:{port}", target="/")))
        await until(lambda: accepted)
        writer.write(ws.send(BytesMessage(data=b'CONNECT {"verbose":false,"protocol":1}\r\nPING\r\n')))
        await until(ponged)  # INFO, then PONG (and an INFO naming the account)
        messages.clear()
        commands = (b"SUB ws.t 1\r\n", b"PUB ws.t 1\r\nx\r\n", b"PING\r\n")
        writer.write(b"".join(ws.send(BytesMessage(data=c)) for c in commands))
        await until(ponged)
    finally:
        writer.close()
    return messages


async def test_answers_to_messages_read_together_leave_in_one_message_as_from_nats_server(tmp_path: Path) -> None:
    """nats-server reads a client's messages as one byte stream and sends what it answers to a read in one
    message: a MSG and the PONG of a flush arrive together, as nats.py's tests expect of a flush."""
    ws_port = free_port_base(1)
    block = f"websocket {{ host: {HOST}, port: {ws_port}, no_tls: true }}\n"
    (tmp_path / "ref").mkdir()
    (tmp_path / "jetraft").mkdir()
    async with nats_server_from_config(tmp_path / "ref", block):
        theirs = await _answers_per_message(ws_port)
    async with node_from_config(tmp_path / "jetraft", block):
        mine = await _answers_per_message(ws_port)
    assert theirs == [b"MSG ws.t 1 1\r\nx\r\nPONG\r\n"]
    assert mine == theirs


async def test_a_close_frame_behind_many_commands_ends_the_connection_cleanly(tmp_path: Path) -> None:
    """A client's close frame arriving behind more commands than the node answers in one go: the answers
    still due once the closing handshake is done are dropped, not written (wsproto refuses a message
    after a close, and the node logged that refusal as an error for every such client)."""
    ws_port = free_port_base(1)
    async with node_from_config(tmp_path, f"websocket {{ host: {HOST}, port: {ws_port}, no_tls: true }}\n") as node:
        for _ in range(3):
            ws = WSConnection(ConnectionType.CLIENT)
            reader, writer = await asyncio.open_connection(HOST, ws_port)
            writer.write(ws.send(Request(host=f"{HOST}:{ws_port}", target="/")))
            ws.receive_data(await asyncio.wait_for(reader.read(65536), 10))
            assert any(isinstance(event, AcceptConnection) for event in ws.events())
            commands = b"CONNECT {}\r\n" + b"PING\r\n" * 500
            writer.write(ws.send(BytesMessage(data=commands)) + ws.send(CloseConnection(code=1000)))
            while await asyncio.wait_for(reader.read(65536), 10):
                pass  # until the node closes the connection
            writer.close()
        seen = await what_a_websocket_client_sees(f"ws://{HOST}:{ws_port}")  # the port serves on
    assert seen["reply"] == b"SHOUT"
    errors = [line for line in node.log_path.read_text().splitlines() if '"level": "error"' in line]
    assert errors == []


async def _cli_over_websocket(cli: Path, url: str) -> list[tuple[int, bool]]:
    """The nats CLI's client (nats.go, the reference client) over ws://: a stream made, a message stored, and
    read back: each command's exit code, and whether the message came back."""
    from tests.cli.natscli import run_cli

    commands = [
        ["stream", "add", "WSCLI", "--subjects", "wscli.>", "--defaults"],
        ["pub", "wscli.a", "stored over websocket"],
        ["stream", "get", "WSCLI", "1"],
    ]
    results = [await asyncio.to_thread(run_cli, cli, url, command) for command in commands]
    return [(result.returncode, "stored over websocket" in result.output) for result in results]


async def test_the_nats_cli_over_websocket_as_on_nats_server(tmp_path: Path) -> None:
    """nats.go's WebSocket client, a second client beside nats-py's, makes, fills and reads a stream on both
    servers."""
    from tests.cli.natscli import find_cli

    cli = find_cli()
    if cli is None:
        pytest.skip("nats CLI not built (make nats-cli needs Go)")
    ws_port = free_port_base(1)
    block = f"websocket {{ host: {HOST}, port: {ws_port}, no_tls: true }}\n"
    reference, ours = tmp_path / "ref", tmp_path / "jetraft"
    reference.mkdir()
    ours.mkdir()
    async with nats_server_from_config(reference, f"jetstream {{ store_dir: '{reference / 'js'}' }}\n{block}"):
        theirs = await _cli_over_websocket(cli, f"ws://{HOST}:{ws_port}")
    async with node_from_config(ours, block):
        mine = await _cli_over_websocket(cli, f"ws://{HOST}:{ws_port}")
    assert theirs == [(0, False), (0, False), (0, True)]
    assert mine == theirs
