"""Each toxic's effect, measured on a real TCP echo server through the toxiproxy child process.

Timings are wall-clock on a shared machine: lower bounds are tight (a delay
cannot be shorter than configured), upper bounds are generous.
"""

from __future__ import annotations

import socket
import statistics
import threading
import time

import pytest
from toxiproxy import Toxiproxy

from tests.chaos.conftest import EchoServer, connect, recv_exactly, round_trip, wait_closed

# the loop's timers may fire a hair early against time.monotonic()
CLOCK_SLACK = 0.005
SLOW_MACHINE = 0.5


def test_no_toxic_round_trip_is_fast(toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    proxy = toxiproxy.create(upstream=echo.address, name="plain")
    with connect(proxy) as sock:
        assert max(round_trip(sock) for _ in range(5)) < 0.25


def test_latency_delays_each_direction(toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    proxy = toxiproxy.create(upstream=echo.address, name="lagged")
    proxy.add_toxic(type="latency", attributes={"latency": 150})
    with connect(proxy) as sock:
        assert 0.150 - CLOCK_SLACK <= round_trip(sock) < 0.150 + SLOW_MACHINE
        proxy.add_toxic(type="latency", stream="upstream", attributes={"latency": 100})
        assert 0.250 - CLOCK_SLACK <= round_trip(sock) < 0.250 + SLOW_MACHINE


def test_latency_does_not_queue_up_back_to_back_messages(toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    """Each chunk is delayed from when it was read, so ten messages 20 ms apart take ~latency + 180 ms, not 10x."""
    proxy = toxiproxy.create(upstream=echo.address, name="pipelined")
    proxy.add_toxic(type="latency", stream="upstream", attributes={"latency": 200})
    with connect(proxy) as sock:
        started = time.monotonic()
        for index in range(10):
            sock.sendall(bytes([index]))
            time.sleep(0.02)  # spacing the writes is the point of this test
        assert recv_exactly(sock, 10) == bytes(range(10))
        elapsed = time.monotonic() - started
    assert 0.2 + 0.18 - CLOCK_SLACK <= elapsed < 0.2 + 0.2 + SLOW_MACHINE


def test_latency_jitter_spreads_delays_around_the_latency(toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    proxy = toxiproxy.create(upstream=echo.address, name="jittery")
    proxy.add_toxic(type="latency", attributes={"latency": 100, "jitter": 60})
    with connect(proxy) as sock:
        samples = [round_trip(sock) for _ in range(12)]
    assert min(samples) >= 0.040 - CLOCK_SLACK
    assert max(samples) < 0.160 + SLOW_MACHINE
    # uniform over ±60 ms: twelve draws within 10 ms of each other would be a broken jitter
    assert max(samples) - min(samples) > 0.010
    assert 0.07 < statistics.median(samples) < 0.13 + SLOW_MACHINE


def test_bandwidth_caps_throughput(toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    proxy = toxiproxy.create(upstream=echo.address, name="narrow")
    payload = bytes(range(256)) * 400  # 102,400 bytes
    with connect(proxy) as sock:
        unlimited = round_trip(sock, payload)
        proxy.add_toxic(type="bandwidth", stream="upstream", attributes={"rate": 200})
        limited = round_trip(sock, payload)
    # 102.4 KB at 200 KB/s is 0.512 s
    assert unlimited < limited / 2
    assert 0.512 - 0.1 - CLOCK_SLACK <= limited < 0.512 + SLOW_MACHINE + 0.3


def test_timeout_stops_data_and_closes_after_the_timeout(toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    proxy = toxiproxy.create(upstream=echo.address, name="blackhole")
    proxy.add_toxic(type="timeout", attributes={"timeout": 300})
    with connect(proxy) as sock:
        sent_at = time.monotonic()
        sock.sendall(b"lost")
        elapsed, received, _ = wait_closed(sock)
        elapsed = time.monotonic() - sent_at
    assert received == b""
    assert 0.3 - CLOCK_SLACK <= elapsed < 0.3 + SLOW_MACHINE


def test_timeout_zero_holds_the_connection_open_until_removed(toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    proxy = toxiproxy.create(upstream=echo.address, name="forever")
    proxy.add_toxic(name="hang", type="timeout", attributes={"timeout": 0})
    with connect(proxy, timeout=0.5) as sock:
        sock.sendall(b"nothing comes back")
        with pytest.raises(TimeoutError):
            sock.recv(100)  # the half second of silence is what is being checked
        # as in Toxiproxy, removing a timeout toxic closes the connections it held
        proxy.destroy_toxic("hang")
        sock.settimeout(5)
        _, received, _ = wait_closed(sock)
    assert received == b""


def test_reset_peer_resets_the_connection(toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    proxy = toxiproxy.create(upstream=echo.address, name="rst")
    proxy.add_toxic(type="reset_peer", stream="upstream", attributes={"timeout": 0})
    with connect(proxy) as sock:
        sock.sendall(b"trigger")
        _, received, error = wait_closed(sock)
    assert received == b""
    assert isinstance(error, ConnectionResetError)


def test_reset_peer_waits_its_timeout_after_the_first_data(toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    proxy = toxiproxy.create(upstream=echo.address, name="late-rst")
    proxy.add_toxic(type="reset_peer", stream="upstream", attributes={"timeout": 250})
    with connect(proxy) as sock:
        time.sleep(0.1)  # idle time before the first data does not count towards the timeout
        sent_at = time.monotonic()
        sock.sendall(b"trigger")
        _, _, error = wait_closed(sock)
        elapsed = time.monotonic() - sent_at
    assert isinstance(error, ConnectionResetError)
    assert 0.25 - CLOCK_SLACK <= elapsed < 0.25 + SLOW_MACHINE


def test_slicer_cuts_data_into_small_delayed_pieces(toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    proxy = toxiproxy.create(upstream=echo.address, name="sliced")
    proxy.add_toxic(type="slicer", attributes={"average_size": 10, "size_variation": 4, "delay": 20_000})
    payload = bytes(range(200))
    with connect(proxy) as sock:
        sock.sendall(payload)
        pieces: list[bytes] = []
        while sum(map(len, pieces)) < len(payload):
            pieces.append(sock.recv(4096))
            assert pieces[-1], "closed early"
    assert b"".join(pieces) == payload
    # at least 200 / 14 slices, 20 ms apart, so reads see them one by one
    assert len(pieces) >= 10
    assert statistics.median(len(piece) for piece in pieces) <= 14


def test_limit_data_closes_after_the_limit(toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    proxy = toxiproxy.create(upstream=echo.address, name="capped")
    proxy.add_toxic(type="limit_data", attributes={"bytes": 100})
    with connect(proxy) as sock:
        assert round_trip(sock, b"a" * 60) < 1
        sock.sendall(b"b" * 60)
        _, received, _ = wait_closed(sock)
    assert received == b"b" * 40


def test_slow_close_delays_the_close(toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    proxy = toxiproxy.create(upstream=echo.address, name="lingering")
    with connect(proxy) as sock:
        round_trip(sock)
        sock.shutdown(socket.SHUT_WR)
        prompt, _, _ = wait_closed(sock)
    proxy.add_toxic(type="slow_close", attributes={"delay": 300})
    with connect(proxy) as sock:
        assert round_trip(sock) < 0.25
        sock.shutdown(socket.SHUT_WR)
        delayed, received, _ = wait_closed(sock)
    assert received == b""
    assert prompt < 0.25
    assert 0.3 - CLOCK_SLACK <= delayed < 0.3 + SLOW_MACHINE


def test_toxicity_zero_never_applies(toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    proxy = toxiproxy.create(upstream=echo.address, name="harmless")
    proxy.add_toxic(type="latency", toxicity=0.0, attributes={"latency": 1000})
    proxy.add_toxic(type="timeout", stream="upstream", toxicity=0, attributes={"timeout": 0})
    for _ in range(5):
        with connect(proxy) as sock:
            assert round_trip(sock) < 0.5


def test_toxicity_is_decided_per_connection(toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    proxy = toxiproxy.create(upstream=echo.address, name="coin")
    proxy.add_toxic(type="latency", toxicity=0.5, attributes={"latency": 120})
    verdicts = []
    for _ in range(14):
        with connect(proxy) as sock:
            # halfway between no delay and the latency, to classify on a busy machine
            delayed = [round_trip(sock) >= 0.06 for _ in range(2)]
        assert len(set(delayed)) == 1, "a connection is either always or never affected"
        verdicts.append(delayed[0])
    # 14 fair coins all landing the same way: 1 in 8192
    assert any(verdicts) and not all(verdicts)


def test_toxics_apply_to_one_direction_only(toxiproxy: Toxiproxy) -> None:
    """limit_data upstream cuts what the server gets; downstream, what the client gets back."""
    with EchoServer() as server:
        proxy = toxiproxy.create(upstream=server.address, name="oneway")
        proxy.add_toxic(name="cap", type="limit_data", stream="upstream", attributes={"bytes": 5})
        with connect(proxy) as sock:
            sock.sendall(b"0123456789")
            wait_closed(sock)
        upstream = server.wait_connections(1)[-1]
        assert upstream.ended.wait(5)
        assert upstream.received == b"01234"

        proxy.destroy_toxic("cap")
        proxy.add_toxic(type="limit_data", stream="downstream", attributes={"bytes": 5})
        with connect(proxy) as sock:
            sock.sendall(b"0123456789")
            _, received, _ = wait_closed(sock)
        assert received == b"01234"
        upstream = server.wait_connections(2)[-1]
        assert upstream.ended.wait(5)
        assert upstream.received == b"0123456789"


def test_concurrent_connections_are_independent(toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    proxy = toxiproxy.create(upstream=echo.address, name="many")
    proxy.add_toxic(type="latency", attributes={"latency": 100})
    results: list[float] = []

    def client() -> None:
        with connect(proxy) as sock:
            results.append(round_trip(sock, b"x" * 1000))

    threads = [threading.Thread(target=client) for _ in range(8)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 8
    assert all(result >= 0.1 - CLOCK_SLACK for result in results)
    # in parallel, not one after the other
    assert time.monotonic() - started < 0.8 + SLOW_MACHINE
