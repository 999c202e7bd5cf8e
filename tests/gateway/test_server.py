"""One node's client port, driven by unmodified nats-py clients and by raw sockets.

The raw-socket tests run against the real nats-server too, so our replies are
checked against the reference byte for byte where the two agree by design.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import subprocess
from collections.abc import AsyncIterator, Iterator
from typing import Any

import nats
import pytest
import pytest_asyncio
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import NoRespondersError

from gateway.auth import make_authenticator
from gateway.limits import Limits
from gateway.router import Router
from gateway.server import GatewayServer
from local.gateway_nodes import NATS_SERVER
from local.ports import HOST, free_port

TIMEOUT = 5.0


@pytest_asyncio.fixture
async def server() -> AsyncIterator[GatewayServer]:
    gateway = GatewayServer(Router(), name="t1")
    await gateway.start()
    try:
        yield gateway
    finally:
        await gateway.stop()


@contextlib.asynccontextmanager
async def connected(url: str, **options: Any) -> AsyncIterator[Client]:
    client = await nats.connect(url, allow_reconnect=False, connect_timeout=TIMEOUT, **options)
    try:
        yield client
    finally:
        await client.close()


def url_of(server: GatewayServer) -> str:
    return f"nats://{HOST}:{server.port}"


async def next_msg(sub: Any) -> Msg:
    return await sub.next_msg(timeout=TIMEOUT)


# --- nats-py ---------------------------------------------------------------------------------


async def test_connect_info(server: GatewayServer) -> None:
    async with connected(url_of(server)) as nc:
        info = nc._server_info
        assert info["server_name"] == "t1"
        assert info["server_id"] == server.server_id and len(info["server_id"]) == 56
        assert info["proto"] == 1 and info["headers"] is True
        assert info["max_payload"] == 1024 * 1024
        assert nc.max_payload == 1024 * 1024
        assert "auth_required" not in info
        assert len(server.clients) == 1


async def test_pub_sub_with_wildcards(server: GatewayServer) -> None:
    async with connected(url_of(server)) as sub_client, connected(url_of(server)) as pub_client:
        star = await sub_client.subscribe("orders.*")
        tail = await sub_client.subscribe("orders.>")
        await sub_client.flush()
        await pub_client.publish("orders.new", b"one")
        await pub_client.publish("orders.new.eu", b"two")
        first = await next_msg(star)
        assert (first.subject, first.data) == ("orders.new", b"one")
        assert [(await next_msg(tail)).data for _ in range(2)] == [b"one", b"two"]
        await pub_client.flush()
        with pytest.raises(nats.errors.TimeoutError):
            await star.next_msg(timeout=0.1)


async def test_request_reply(server: GatewayServer) -> None:
    async with connected(url_of(server)) as responder, connected(url_of(server)) as requester:

        async def answer(msg: Msg) -> None:
            await msg.respond(b"echo:" + msg.data)

        await responder.subscribe("svc.echo", cb=answer)
        await responder.flush()
        for i in range(20):
            reply = await requester.request("svc.echo", str(i).encode(), timeout=TIMEOUT)
            assert reply.data == f"echo:{i}".encode()


async def test_no_responders(server: GatewayServer) -> None:
    async with connected(url_of(server)) as nc:
        with pytest.raises(NoRespondersError):
            await nc.request("nobody.home", b"?", timeout=TIMEOUT)


async def test_headers_round_trip(server: GatewayServer) -> None:
    async with connected(url_of(server)) as nc:
        sub = await nc.subscribe("h")
        await nc.publish("h", b"body", headers={"Trace-Id": "abc", "X": "1 2"})
        msg = await next_msg(sub)
        assert msg.data == b"body"
        assert msg.headers == {"Trace-Id": "abc", "X": "1 2"}


async def test_queue_group_members_share_messages(server: GatewayServer) -> None:
    counts = [0, 0, 0]
    done = asyncio.Event()
    total = 300
    async with connected(url_of(server)) as members, connected(url_of(server)) as pub:

        def make_cb(index: int) -> Any:
            async def cb(_msg: Msg) -> None:
                counts[index] += 1
                if sum(counts) == total:
                    done.set()

            return cb

        for i in range(3):
            await members.subscribe("work", queue="workers", cb=make_cb(i))
        await members.flush()
        for _ in range(total):
            await pub.publish("work", b"job")
        await asyncio.wait_for(done.wait(), TIMEOUT)
        await pub.flush()
        await members.flush()
        assert sum(counts) == total
        assert all(count > 0 for count in counts), counts


async def test_unsubscribe_with_max(server: GatewayServer) -> None:
    async with connected(url_of(server)) as nc:
        sub = await nc.subscribe("limited")
        await sub.unsubscribe(limit=3)  # UNSUB <sid> 3 on the wire
        await nc.flush()
        for i in range(6):
            await nc.publish("limited", str(i).encode())
        assert [(await next_msg(sub)).data for _ in range(3)] == [b"0", b"1", b"2"]
        await nc.flush()
        assert not server.router.has_interest("limited")


async def test_user_password_auth() -> None:
    gateway = GatewayServer(Router(), name="auth", auth=make_authenticator(user="alice", password="s3cret"))
    await gateway.start()
    try:
        async with connected(f"nats://alice:s3cret@{HOST}:{gateway.port}") as nc:
            assert nc._server_info["auth_required"] is True
            sub = await nc.subscribe("x")
            await nc.publish("x", b"in")
            assert (await next_msg(sub)).data == b"in"
        with pytest.raises(nats.errors.Error, match="Authorization Violation"):
            await nats.connect(
                f"nats://alice:wrong@{HOST}:{gateway.port}", allow_reconnect=False, connect_timeout=TIMEOUT
            )
        assert gateway.clients == []
    finally:
        await gateway.stop()


async def test_token_auth() -> None:
    gateway = GatewayServer(Router(), name="auth", auth=make_authenticator(token="t0ken"))
    await gateway.start()
    try:
        async with connected(url_of(gateway), token="t0ken") as nc:
            await nc.flush()
        with pytest.raises(nats.errors.Error, match="Authorization Violation"):
            await nats.connect(url_of(gateway), token="nope", allow_reconnect=False, connect_timeout=TIMEOUT)
    finally:
        await gateway.stop()


async def test_slow_consumer_is_cut_off_and_others_keep_being_served() -> None:
    max_pending = 256 * 1024
    gateway = GatewayServer(Router(), name="slow", limits=Limits(max_pending=max_pending))
    await gateway.start()
    try:
        # A raw subscriber that never reads: small receive buffer, so the kernel cannot hide it for long.
        reader, writer = await raw_connect(gateway.port, rcvbuf=4096)
        writer.write(b'CONNECT {"verbose":false}\r\nSUB flood 1\r\nPING\r\n')
        await writer.drain()
        assert await reader.readuntil(b"PONG\r\n")
        payload = b"x" * 16384
        # Bounded: 4000 x 16 KiB = 64 MiB at most, far beyond what the buffers can hold.
        async with connected(url_of(gateway)) as pub, connected(url_of(gateway)) as healthy:
            healthy_sub = await healthy.subscribe("flood", max_msgs=1)
            await healthy.flush()
            for _ in range(4000):
                await pub.publish("flood", payload)
                if gateway.stats.slow_consumers:
                    break
                await pub.flush()
            assert gateway.stats.slow_consumers == 1
            assert (await next_msg(healthy_sub)).data == payload
            assert len(gateway.clients) == 2
        received = await drain_until_closed(reader)
        # Cut off: what it got is bounded by the buffers, far less than what was published.
        assert received < 8 * 1024 * 1024
    finally:
        writer.close()
        await gateway.stop()


# --- raw sockets, against this gateway and against nats-server ------------------------------


@pytest.fixture(scope="module")
def reference_port() -> Iterator[int]:
    port = free_port()
    proc = subprocess.Popen(
        [str(NATS_SERVER), "-a", HOST, "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if b"Server is ready" in line:
                break
        else:
            raise RuntimeError("nats-server exited before it was ready")
        yield port
    finally:
        proc.kill()
        proc.wait()


@pytest_asyncio.fixture(params=["gateway", "nats-server"])
async def any_port(request: pytest.FixtureRequest) -> AsyncIterator[int]:
    if request.param == "nats-server":
        yield request.getfixturevalue("reference_port")
        return
    gateway = GatewayServer(Router(), name="raw")
    await gateway.start()
    try:
        yield gateway.port
    finally:
        await gateway.stop()


async def raw_connect(
    port: int, rcvbuf: int | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    if rcvbuf is None:
        reader, writer = await asyncio.open_connection(HOST, port)
    else:
        import socket

        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (HOST, port))
        reader, writer = await asyncio.open_connection(sock=sock, limit=1024 * 1024)
    info = await asyncio.wait_for(reader.readline(), TIMEOUT)
    assert info.startswith(b"INFO {")
    return reader, writer


async def drain_until_closed(reader: asyncio.StreamReader) -> int:
    total = 0
    with contextlib.suppress(ConnectionError):
        while chunk := await asyncio.wait_for(reader.read(65536), TIMEOUT):
            total += len(chunk)
    return total


async def conversation(port: int, data: bytes, until: bytes | None = b"PONG\r\n") -> tuple[bytes, bool]:
    """Send `data`; read up to `until` (or to the end). Returns what came back and whether it closed."""
    reader, writer = await raw_connect(port)
    try:
        writer.write(data)
        await writer.drain()
        if until is not None:
            return await asyncio.wait_for(reader.readuntil(until), TIMEOUT), False
        out = b""
        with contextlib.suppress(ConnectionError):
            while chunk := await asyncio.wait_for(reader.read(65536), TIMEOUT):
                out += chunk
        return out, True
    finally:
        writer.close()


@pytest.mark.parametrize(
    ("sent", "expected"),
    [
        # verbose: +OK for CONNECT, SUB, PUB (before the MSG it causes) and UNSUB.
        (
            b'CONNECT {"verbose":true}\r\nSUB v 1\r\nPUB v 2\r\nhi\r\nUNSUB 1\r\nPING\r\n',
            b"+OK\r\n+OK\r\n+OK\r\nMSG v 1 2\r\nhi\r\n+OK\r\nPONG\r\n",
        ),
        (
            b'CONNECT {"verbose":false}\r\nSUB v 1\r\nPUB v r 0\r\n\r\nPING\r\n',
            b"MSG v 1 r 0\r\n\r\nPONG\r\n",
        ),
        # pedantic: a publish to a wildcard or malformed subject is reported, and the connection stays.
        (
            b'CONNECT {"verbose":false,"pedantic":true}\r\nPUB foo.* 1\r\nx\r\nPING\r\n',
            b"-ERR 'Invalid Publish Subject'\r\nPONG\r\n",
        ),
        (
            b'CONNECT {"verbose":false,"pedantic":true}\r\nPUB foo..bar 1\r\nx\r\nPING\r\n',
            b"-ERR 'Invalid Publish Subject'\r\nPONG\r\n",
        ),
        # Without pedantic it is dropped silently (and still acknowledged when verbose).
        (b'CONNECT {"verbose":false,"pedantic":false}\r\nPUB foo..bar 1\r\nx\r\nPING\r\n', b"PONG\r\n"),
        (
            b'CONNECT {"verbose":true,"pedantic":false}\r\nPUB foo.* 1\r\nx\r\nPING\r\n',
            b"+OK\r\n+OK\r\nPONG\r\n",
        ),
        # A bad SUB subject is always reported, and the connection stays.
        (b'CONNECT {"verbose":false}\r\nSUB foo..bar 1\r\nPING\r\n', b"-ERR 'Invalid Subject'\r\nPONG\r\n"),
        # HPUB with headers announced in CONNECT.
        (
            b'CONNECT {"verbose":false,"headers":true}\r\nSUB h 1\r\nHPUB h 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPING\r\n',
            b"HMSG h 1 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPONG\r\n",
        ),
    ],
)
async def test_replies_match_nats_server(any_port: int, sent: bytes, expected: bytes) -> None:
    reply, _ = await conversation(any_port, sent)
    assert reply == expected


@pytest.mark.parametrize(
    ("sent", "error"),
    [
        (b'CONNECT {"verbose":false}\r\nFOO\r\n', b"-ERR 'Unknown Protocol Operation'\r\n"),
        (b'CONNECT {"verbose":false}\r\nPUB foo 2000000\r\n', b"-ERR 'Maximum Payload Violation'\r\n"),
        (
            b'CONNECT {"verbose":false}\r\nSUB ' + b"a" * 5000 + b" 1\r\n",
            b"-ERR 'maximum control line exceeded'\r\n",
        ),
        (
            b'CONNECT {"verbose":false,"no_responders":true}\r\n',
            b"-ERR 'no responders requires headers support'\r\n",
        ),
    ],
)
async def test_fatal_errors_use_nats_wording_and_close(any_port: int, sent: bytes, error: bytes) -> None:
    reply, closed = await conversation(any_port, sent, until=None)
    assert closed
    assert reply == error


@pytest.mark.parametrize(
    "sent",
    [b"PUB foo x\r\n", b"SUB foo\r\n", b"HPUB foo 3 2\r\nabc\r\n", b"HPUB foo 12 12\r\nNATS/1.0\r\n\r\n\r\n"],
)
async def test_malformed_commands_close_the_connection(any_port: int, sent: bytes) -> None:
    # nats-server closes these without a word; we say why (Unknown Protocol Operation) first.
    reply, closed = await conversation(any_port, b'CONNECT {"verbose":false}\r\n' + sent, until=None)
    assert closed
    assert b"PONG" not in reply and b"MSG" not in reply


async def test_a_broken_client_does_not_disturb_the_others(server: GatewayServer) -> None:
    async with connected(url_of(server)) as nc:
        sub = await nc.subscribe("still.here")
        await nc.flush()
        reply, closed = await conversation(
            server.port, b"CONNECT {}\r\nPUB still.here 1\r\nab\r\n", until=None
        )
        assert closed and reply == b"-ERR 'Unknown Protocol Operation'\r\n"
        await nc.publish("still.here", b"fine")
        assert (await next_msg(sub)).data == b"fine"


async def test_auth_required_before_anything_else() -> None:
    gateway = GatewayServer(Router(), name="auth", auth=make_authenticator(token="t"))
    await gateway.start()
    try:
        reply, closed = await conversation(gateway.port, b"SUB x 1\r\n", until=None)
        assert closed and reply == b"-ERR 'Authorization Violation'\r\n"
    finally:
        await gateway.stop()


async def test_auth_timeout() -> None:
    gateway = GatewayServer(
        Router(), name="auth", auth=make_authenticator(token="t"), limits=Limits(auth_timeout=0.2)
    )
    await gateway.start()
    try:
        reply, closed = await conversation(gateway.port, b"", until=None)
        assert closed and reply == b"-ERR 'Authentication Timeout'\r\n"
    finally:
        await gateway.stop()


async def test_server_pings_and_closes_a_stale_connection() -> None:
    gateway = GatewayServer(Router(), name="ping", limits=Limits(ping_interval=0.1, max_pings_out=2))
    await gateway.start()
    try:
        reply, closed = await conversation(gateway.port, b'CONNECT {"verbose":false}\r\n', until=None)
        assert closed
        assert reply == b"PING\r\nPING\r\n-ERR 'Stale Connection'\r\n"
    finally:
        await gateway.stop()


# --- echo and headers options, against this gateway and against nats-server ----------------


async def test_no_echo_client_misses_only_its_own_messages(any_port: int) -> None:
    url = f"nats://{HOST}:{any_port}"
    async with connected(url, no_echo=True) as quiet, connected(url) as other:
        quiet_sub = await quiet.subscribe("echo.test")
        other_sub = await other.subscribe("echo.test")
        await quiet.flush()
        await other.flush()
        await quiet.publish("echo.test", b"from quiet")
        # The server answers this PING after delivering (or not) that message back to `quiet`:
        # an echo would arrive ahead of everything `other` publishes from now on.
        await quiet.flush()
        await other.publish("echo.test", b"from other")
        assert (await next_msg(quiet_sub)).data == b"from other"
        assert {(await next_msg(other_sub)).data for _ in range(2)} == {b"from quiet", b"from other"}


@pytest.mark.parametrize("verbose", [False, True])
async def test_hpub_without_headers_in_connect_closes_the_connection(any_port: int, verbose: bool) -> None:
    # nats-server treats HPUB from a client that did not announce headers as a protocol
    # violation and closes without delivering; we do too, after saying why.
    connect = b'CONNECT {"verbose":%s,"headers":false}\r\n' % (b"true" if verbose else b"false")
    sent = connect + b"SUB h 1\r\nHPUB h 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPING\r\n"
    reply, closed = await conversation(any_port, sent, until=None)
    assert closed
    acks = b"+OK\r\n+OK\r\n" if verbose else b""  # CONNECT and SUB
    assert reply.startswith(acks)
    assert reply[len(acks) :] in (b"", b"-ERR 'message headers not supported'\r\n")


async def test_subscriber_without_headers_gets_plain_msg(any_port: int) -> None:
    reader, writer = await raw_connect(any_port)
    try:
        writer.write(b'CONNECT {"verbose":false,"headers":false}\r\nSUB h 1\r\nPING\r\n')
        await writer.drain()
        assert await asyncio.wait_for(reader.readuntil(b"PONG\r\n"), TIMEOUT) == b"PONG\r\n"
        published, _ = await conversation(
            any_port,
            b'CONNECT {"verbose":false,"headers":true}\r\n'
            b"HPUB h 18 20\r\nNATS/1.0\r\nK: v\r\n\r\nhi\r\n"
            b"HPUB h r 12 14\r\nNATS/1.0\r\n\r\nho\r\n"
            b"HPUB h 12 12\r\nNATS/1.0\r\n\r\n\r\nPING\r\n",
        )
        assert published == b"PONG\r\n"
        writer.write(b"PING\r\n")
        await writer.drain()
        # The header block is dropped, the payload and reply subject kept.
        assert await asyncio.wait_for(reader.readuntil(b"PONG\r\n"), TIMEOUT) == (
            b"MSG h 1 2\r\nhi\r\nMSG h 1 r 2\r\nho\r\nMSG h 1 0\r\n\r\nPONG\r\n"
        )
    finally:
        writer.close()


async def test_a_bcrypt_password_is_checked_off_the_event_loop() -> None:
    import bcrypt

    # Cost 12: a quarter of a second or more of CPU, which the loop must not spend.
    hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=12)).decode()
    # The check must end before the auth timeout; on a loaded machine cost 12 can take seconds.
    gateway = GatewayServer(
        Router(),
        name="auth",
        auth=make_authenticator(user="alice", password=hashed),
        limits=Limits(auth_timeout=60),
    )
    await gateway.start()
    loop = asyncio.get_running_loop()
    ticks: list[float] = []

    async def ticker() -> None:
        while True:
            ticks.append(loop.time())
            await asyncio.sleep(0.01)

    ticking = loop.create_task(ticker())
    try:
        reader, writer = await raw_connect(gateway.port)
        started = loop.time()
        # Everything in one write: what follows CONNECT waits for the check, then is handled in order.
        writer.write(b'CONNECT {"verbose":false,"user":"alice","pass":"pw"}\r\nSUB x 1\r\nPUB x 2\r\nok\r\nPING\r\n')
        await writer.drain()
        assert await asyncio.wait_for(reader.readuntil(b"PONG\r\n"), 30) == b"MSG x 1 2\r\nok\r\nPONG\r\n"
        took = loop.time() - started
        gaps = [b - a for a, b in itertools.pairwise(ticks) if a >= started]
        assert took > 0.05 and max(gaps, default=took) < took / 2, (took, gaps)
        writer.close()
    finally:
        ticking.cancel()
        await gateway.stop()


async def test_a_workers_port_numbers_its_clients_in_its_own_residue() -> None:
    """Worker 1 of 3 gives cids 2, 5, 8, ...: never one its sibling workers give (INFO's client_id)."""
    gateway = GatewayServer(Router(), name="w1", client_ids=(2, 3))
    await gateway.start()
    try:
        async with connected(url_of(gateway)) as first, connected(url_of(gateway)) as second:
            ids = [first._server_info["client_id"], second._server_info["client_id"]]
            assert ids == [2, 5]
            assert sorted(c.client_id for c in gateway.clients) == [2, 5]
    finally:
        await gateway.stop()
