"""The client protocol over WebSocket (`websocket { }`), side by side with nats-server 2.15.1: nats-py over
`ws://` and `wss://` subscribes, publishes with headers, requests and publishes to a stream, and /varz
shows the port as nats-server's does. Before, jetraft refused the block ("not supported yet"), so browser
clients and `ws://` URLs had nothing to talk to."""

from __future__ import annotations

import asyncio
import json
import ssl
import urllib.request
from pathlib import Path
from typing import Any

import nats
import pytest

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
        ("websocket { port: 8080, no_tls: true, same_origin: true }", "nats-server's setting is not supported"),
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
    with pytest.raises(ConfigError, match=error):
        NodeConfig(name="n1", **load_nats_conf(str(path))).validate()


def test_a_websocket_block_without_a_port_serves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ws.conf"
    path.write_text("websocket { no_tls: true }\n")
    assert NodeConfig(name="n1", **load_nats_conf(str(path))).websocket is None
