"""Bad input never crashes the proxy: arbitrary bodies, paths and bytes get Toxiproxy's errors.

Hypothesis throws generated JSON (and non-JSON) at every endpoint of the
child process; afterwards the same process must still be alive and proxying.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from toxiproxy import Toxiproxy
from toxiproxy.api import APIConsumer

from chaos.toxiproxy import ToxiproxyProcess
from tests.chaos.conftest import HOST, EchoServer, connect, round_trip

_session = requests.Session()

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
toxic_types = st.sampled_from(
    [
        "latency",
        "bandwidth",
        "timeout",
        "reset_peer",
        "slow_close",
        "slicer",
        "limit_data",
        "noop",
        "",
        "bogus",
    ]
)
attribute_names = st.sampled_from(
    ["latency", "jitter", "rate", "timeout", "delay", "average_size", "size_variation", "bytes", "other"]
)
attribute_values = st.integers(min_value=-(2**64), max_value=2**64) | json_values
toxic_bodies = st.fixed_dictionaries(
    {},
    optional={
        "name": st.text(max_size=8) | json_values,
        "type": toxic_types | json_values,
        "stream": st.sampled_from(["upstream", "downstream", "Upstream", "", "both"]) | json_values,
        "toxicity": st.floats(allow_nan=False, allow_infinity=False) | json_values,
        "attributes": st.dictionaries(attribute_names, attribute_values, max_size=4) | json_values,
    },
)
proxy_bodies = st.fixed_dictionaries(
    {},
    optional={
        "name": st.text(max_size=8) | json_values,
        "upstream": st.just("127.0.0.1:1") | json_values,
        "listen": st.sampled_from(["127.0.0.1:0", "", "nonsense", "127.0.0.1:99999", "[::1"]) | json_values,
        "enabled": st.booleans() | json_values,
    },
)
raw_bodies = st.binary(max_size=64) | st.sampled_from(
    [b"NaN", b"[" * 5000, b'{"type": "latency"} trailing', b"\xff\xfe"]
)


@pytest.fixture(scope="module")
def target(toxiproxy_process: ToxiproxyProcess) -> Iterator[str]:
    """The module's server with one proxy, `fuzz`, to aim toxic calls at."""
    APIConsumer.host, APIConsumer.port = HOST, toxiproxy_process.port
    Toxiproxy().create(upstream="127.0.0.1:1", name="fuzz")
    yield toxiproxy_process.url
    Toxiproxy().destroy_all()


def _post(url: str, body: Any) -> requests.Response:
    if isinstance(body, bytes):
        return _session.post(url, data=body, timeout=10)
    return _session.post(url, json=body, timeout=10)


def _assert_toxiproxy_error(response: requests.Response, allowed: set[int]) -> None:
    assert response.status_code in allowed, (response.status_code, response.text)
    if response.status_code >= 400:
        body = response.json()
        assert set(body) >= {"error", "status"}
        assert body["status"] == response.status_code


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=toxic_bodies | raw_bodies | json_values)
def test_toxic_create_answers_200_400_or_409(target: str, body: Any) -> None:
    response = _post(f"{target}/proxies/fuzz/toxics", body)
    _assert_toxiproxy_error(response, {200, 400, 409})
    if response.status_code == 200:
        created = response.json()
        assert set(created) == {"attributes", "name", "type", "stream", "toxicity"}
        if created["name"] in (".", ".."):
            # a URL cannot name it (clients resolve dot segments away): clear every toxic instead
            assert _session.post(f"{target}/reset", timeout=10).status_code == 204
            assert not _session.get(f"{target}/proxies/fuzz/toxics", timeout=10).json()
            return
        assert (
            _session.delete(
                f"{target}/proxies/fuzz/toxics/{requests.utils.quote(created['name'], safe='')}", timeout=10
            ).status_code
            == 204
        )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=toxic_bodies | raw_bodies | json_values)
def test_toxic_update_answers_200_or_400(target: str, body: Any) -> None:
    _session.post(
        f"{target}/proxies/fuzz/toxics",
        json={"name": "victim", "type": "slicer", "attributes": {"average_size": 5}},
        timeout=10,
    )
    response = _post(f"{target}/proxies/fuzz/toxics/victim", body)
    _assert_toxiproxy_error(response, {200, 400})
    assert _session.delete(f"{target}/proxies/fuzz/toxics/victim", timeout=10).status_code == 204


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=proxy_bodies | raw_bodies | json_values,
    path=st.sampled_from(["/proxies", "/populate", "/proxies/fuzz"]),
)
def test_proxy_calls_answer_in_toxiproxy_terms(target: str, body: Any, path: str) -> None:
    response = _post(f"{target}{path}", body)
    # 500 is Toxiproxy's answer to a listen address it cannot bind or resolve, and only that
    _assert_toxiproxy_error(response, {200, 201, 400, 409, 500})
    if response.status_code == 500:
        assert response.json()["error"].startswith(("listen tcp ", "address ")), response.text
    for name in set(requests.get(f"{target}/proxies", timeout=10).json()) - {"fuzz"}:
        assert _session.delete(f"{target}/proxies/{name}", timeout=10).status_code == 204
    # whatever happened, the fuzz proxy is restored for the next example
    _session.post(
        f"{target}/proxies/fuzz", json={"listen": "127.0.0.1:0", "upstream": "127.0.0.1:1"}, timeout=10
    )


# "." and ".." are dot segments: HTTP clients remove them from the path before sending
path_names = st.text(min_size=1, max_size=12).filter(lambda name: name not in {".", ".."})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(proxy=path_names, toxic=path_names)
def test_unknown_names_in_paths_are_404(target: str, proxy: str, toxic: str) -> None:
    quoted_proxy = requests.utils.quote(proxy, safe="")
    quoted_toxic = requests.utils.quote(toxic, safe="")
    if proxy != "fuzz":
        response = _session.get(f"{target}/proxies/{quoted_proxy}", timeout=10)
        assert response.status_code in {404}
    response = _session.delete(f"{target}/proxies/fuzz/toxics/{quoted_toxic}", timeout=10)
    assert response.status_code == 404
    assert response.json() == {"error": "toxic not found", "status": 404}


def test_server_survives_and_still_proxies(
    target: str, toxiproxy_process: ToxiproxyProcess, toxiproxy: Toxiproxy, echo: EchoServer
) -> None:
    """Runs after the fuzzing above in this module: same process, still serving."""
    assert toxiproxy_process.returncode() is None
    proxy = toxiproxy.create(upstream=echo.address, name="after-fuzz")
    proxy.add_toxic(type="latency", attributes={"latency": 20})
    with connect(proxy) as sock:
        assert round_trip(sock) >= 0.015


def test_garbage_bytes_through_a_proxy_to_a_dead_upstream(
    toxiproxy_process: ToxiproxyProcess, toxiproxy: Toxiproxy, echo: EchoServer
) -> None:
    """An unreachable upstream closes the client; the proxy and its API carry on."""
    dead = toxiproxy.create(upstream="127.0.0.1:1", name="dead-end")
    for _ in range(3):
        with connect(dead) as sock:
            try:
                sock.sendall(bytes(range(256)))
                assert sock.recv(10) == b""
            except (ConnectionResetError, BrokenPipeError):
                pass
    live = toxiproxy.create(upstream=echo.address, name="alive")
    with connect(live) as sock:
        assert round_trip(sock, bytes(range(256)) * 10) < 1
    assert toxiproxy_process.returncode() is None


def test_half_open_http_requests_do_not_block_the_api(
    toxiproxy_process: ToxiproxyProcess, toxiproxy: Toxiproxy
) -> None:
    with socket.create_connection((HOST, toxiproxy_process.port), timeout=5) as stuck:
        stuck.sendall(b"POST /proxies HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")
        assert toxiproxy.version() is not None
        assert toxiproxy.proxies() == {}


def test_names_no_url_can_reach_are_refused(target: str) -> None:
    """A name with '/' (real Toxiproxy takes one, then cannot address it, not even to delete it)."""
    proxy = _session.post(
        f"{target}/proxies",
        json={"name": "a/b", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:1"},
        timeout=10,
    )
    assert proxy.status_code == 400 and "can not contain '/'" in proxy.json()["error"]
    assert "a/b" not in requests.get(f"{target}/proxies", timeout=10).json()
    made = _session.post(
        f"{target}/proxies",
        json={"name": "names", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:1"},
        timeout=10,
    )
    assert made.status_code == 201
    toxic = _session.post(
        f"{target}/proxies/names/toxics",
        json={"name": "x/y", "type": "latency", "attributes": {}},
        timeout=10,
    )
    assert toxic.status_code == 400 and "can not contain '/'" in toxic.json()["error"]
    assert _session.delete(f"{target}/proxies/names", timeout=10).status_code == 204
