"""The monitoring port's HTTP/1.1 server (cluster/node/http_listener.py), spoken to over a raw socket."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from cluster.node import http_listener
from cluster.node.http_listener import HttpListener, HttpRequest, HttpResponse, parse_target, reason_phrase

HOST = "127.0.0.1"


async def _echo(request: HttpRequest) -> HttpResponse:
    return HttpResponse.text(200, f"{request.method} {request.path} {sorted(request.query.items())}")


async def _headers(request: HttpRequest) -> HttpResponse:
    return HttpResponse.text(200, "marked" if request.has_header("Jetraft-Sys-Request") else "plain")


async def _broken(_request: HttpRequest) -> HttpResponse:
    raise RuntimeError("a bug in one endpoint")


@pytest.fixture
async def listener() -> AsyncIterator[HttpListener]:
    server = HttpListener(HOST, 0, {"/echo": _echo, "/headers": _headers, "/broken": _broken})
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    status_line, *header_lines = head.decode().split("\r\n")[:-2]
    headers = dict(line.lower().split(": ", 1) for line in header_lines)
    body = await reader.readexactly(int(headers["content-length"]))
    return int(status_line.split()[1]), headers, body


def test_a_target_is_split_as_go_decodes_it() -> None:
    assert parse_target(b"/jsz?streams=true&acc=A+B&acc=second&empty=") == (
        "/jsz",
        {"streams": "true", "acc": "A B", "empty": ""},
    )
    assert parse_target(b"/connz?sort%3D=x%2Fy") == ("/connz", {"sort=": "x/y"})


def test_a_status_line_names_the_codes_http_names() -> None:
    assert (reason_phrase(200), reason_phrase(503), reason_phrase(299)) == (b"OK", b"Service Unavailable", b"")


async def test_requests_on_one_connection_keep_it_open_and_are_answered_in_order(listener: HttpListener) -> None:
    reader, writer = await asyncio.open_connection(HOST, listener.port)
    try:
        # two requests written back to back (pipelined): two answers, in order, on the same connection
        writer.write(
            b"GET /echo?a=1 HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /headers HTTP/1.1\r\nHost: x\r\njetraft-sys-request: 1\r\n\r\n"
        )
        assert (await _read_response(reader))[::2] == (200, b"GET /echo [('a', '1')]")
        assert (await _read_response(reader))[::2] == (200, b"marked")
        writer.write(b"HEAD /echo HTTP/1.1\r\nHost: x\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"content-length: 13" in head.lower()  # "HEAD /echo []"
        writer.write(b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await _read_response(reader))[::2] == (404, b"404: Not Found")
        writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
        assert (await _read_response(reader))[::2] == (405, b"405: Method Not Allowed")
        # an endpoint's bug is a 500, and the port goes on serving
        writer.write(b"GET /broken HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await _read_response(reader))[0] == 500
        writer.write(b"GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        status, headers, _ = await _read_response(reader)
        assert (status, headers["content-type"]) == (200, "text/plain; charset=utf-8")
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed, as the client asked
    finally:
        writer.close()


async def test_a_request_that_is_not_http_gets_400_and_the_connection_closes(listener: HttpListener) -> None:
    reader, writer = await asyncio.open_connection(HOST, listener.port)
    try:
        writer.write(b"HELLO THERE\r\n\r\n")
        status, _, _ = await _read_response(reader)
        assert status == 400
        assert await asyncio.wait_for(reader.read(), 5) == b""
    finally:
        writer.close()


async def test_an_idle_connection_is_closed_and_stop_closes_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_listener, "IDLE_TIMEOUT_S", 0.2)
    server = HttpListener(HOST, 0, {"/echo": _echo})
    await server.start()
    try:
        # a client that starts a request and never finishes it is bounded by the idle timeout too
        reader, writer = await asyncio.open_connection(HOST, server.port)
        writer.write(b"GET /echo HTTP/1.1\r\nHost: x\r\n")
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
    finally:
        await server.stop()
    monkeypatch.setattr(http_listener, "IDLE_TIMEOUT_S", 60.0)
    server = HttpListener(HOST, 0, {"/echo": _echo})
    await server.start()
    reader, writer = await asyncio.open_connection(HOST, server.port)
    writer.write(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await _read_response(reader))[0] == 200
    await server.stop()  # the kept-alive connection goes with the server
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()
