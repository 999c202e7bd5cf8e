"""Every Toxiproxy API call and error code, against the server running as a child process.

toxiproxy-python is the client where it covers a call; `requests` (its own
transport) checks the exact status codes and JSON of the calls it does not.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import pytest
import requests
from toxiproxy import Toxiproxy
from toxiproxy.exceptions import InvalidToxic, NotFound, ProxyExists

from chaos.toxiproxy import VERSION, ToxiproxyProcess
from tests.chaos.conftest import HOST, EchoServer, connect, listen_address, round_trip


@pytest.fixture
def api(toxiproxy: Toxiproxy, toxiproxy_process: ToxiproxyProcess) -> Iterator[str]:
    yield toxiproxy_process.url


def _error(response: requests.Response) -> dict[str, object]:
    assert response.headers["Content-Type"].startswith("text/plain")
    body = response.json()
    assert isinstance(body, dict)
    return body


# --- version --------------------------------------------------------------------


def test_version(api: str, toxiproxy: Toxiproxy) -> None:
    assert toxiproxy.running()
    raw = toxiproxy.version()
    assert raw == f'{{"version": "{VERSION}"}}\n'.encode()
    response = requests.get(f"{api}/version")
    assert response.status_code == 200
    assert response.json() == {"version": VERSION}


# --- proxies --------------------------------------------------------------------


def test_create_answers_201_with_the_proxy_bound_to_a_real_port(
    api: str, toxiproxy: Toxiproxy, echo: EchoServer
) -> None:
    response = requests.post(
        f"{api}/proxies", json={"name": "db", "upstream": echo.address, "listen": f"{HOST}:0"}
    )
    assert response.status_code == 201
    assert response.headers["Content-Type"] == "application/json"
    body = response.json()
    assert list(body) == ["name", "listen", "upstream", "enabled", "toxics"]
    assert body["name"] == "db"
    assert body["upstream"] == echo.address
    assert body["enabled"] is True
    assert body["toxics"] == []
    host, port = body["listen"].rsplit(":", 1)
    assert host == HOST and int(port) > 0
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        assert round_trip(sock) < 1


def test_create_through_the_client_and_list(toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    second = toxiproxy.create(upstream=echo.address, name="two", enabled=False)
    first = toxiproxy.create(upstream=echo.address, name="one")
    assert first.enabled is True
    assert second.enabled is False
    assert second.listen == f"{HOST}:0"  # a disabled proxy has not bound anything yet
    proxies = toxiproxy.proxies()
    assert list(proxies) == ["one", "two"]  # sorted by name, as Go marshals a map
    assert proxies["one"].listen == first.listen
    assert proxies["one"].upstream == echo.address


def test_listing_shows_each_proxy_with_its_toxics(api: str, toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    proxy = toxiproxy.create(upstream=echo.address, name="listed")
    proxy.add_toxic(type="latency", attributes={"latency": 5})
    body = requests.get(f"{api}/proxies").json()
    assert list(body) == ["listed"]
    assert body["listed"]["toxics"] == [
        {
            "attributes": {"latency": 5, "jitter": 0},
            "name": "latency_downstream",
            "type": "latency",
            "stream": "downstream",
            "toxicity": 1,
        }
    ]


def test_create_existing_name_is_409(api: str, toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    toxiproxy.create(upstream=echo.address, name="dup")
    with pytest.raises(ProxyExists):
        toxiproxy.create(upstream=echo.address, name="dup")
    response = requests.post(f"{api}/proxies", json={"name": "dup", "upstream": echo.address})
    assert response.status_code == 409
    assert _error(response) == {"error": "proxy already exists", "status": 409}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"upstream": "127.0.0.1:1"}', "missing required field: name"),
        (b'{"name": "x"}', "missing required field: upstream"),
        (b'{"name": "", "upstream": "127.0.0.1:1"}', "missing required field: name"),
        (b"null", "missing required field: name"),
    ],
)
def test_create_missing_fields_is_400(api: str, body: bytes, message: str) -> None:
    response = requests.post(f"{api}/proxies", data=body)
    assert response.status_code == 400
    assert _error(response) == {"error": message, "status": 400}


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"{",
        b"not json",
        b'{"name": 5, "upstream": "127.0.0.1:1"}',
        b"[1, 2]",
        b'{"name": "x", "enabled": "yes"}',
    ],
)
def test_create_bad_body_is_400(api: str, raw: bytes) -> None:
    response = requests.post(f"{api}/proxies", data=raw)
    assert response.status_code == 400
    error = _error(response)
    assert str(error["error"]).startswith("bad request body")
    assert error["status"] == 400


def test_create_on_a_port_in_use_is_500_and_creates_nothing(api: str, toxiproxy: Toxiproxy) -> None:
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        response = requests.post(
            f"{api}/proxies", json={"name": "clash", "upstream": "127.0.0.1:1", "listen": f"{HOST}:{port}"}
        )
    assert response.status_code == 500
    error = _error(response)
    assert str(error["error"]).startswith(f"listen tcp {HOST}:{port}")
    assert toxiproxy.get_proxy("clash") is None


def test_show(api: str, toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    proxy = toxiproxy.create(upstream=echo.address, name="shown")
    response = requests.get(f"{api}/proxies/shown")
    assert response.status_code == 200
    assert response.json() == {
        "name": "shown",
        "listen": proxy.listen,
        "upstream": echo.address,
        "enabled": True,
        "toxics": [],
    }
    missing = requests.get(f"{api}/proxies/nope")
    assert missing.status_code == 404
    assert _error(missing) == {"error": "proxy not found", "status": 404}


def test_disable_closes_connections_and_stops_listening_enable_listens_again(
    toxiproxy: Toxiproxy, echo: EchoServer
) -> None:
    proxy = toxiproxy.create(upstream=echo.address, name="switch")
    address = listen_address(proxy)
    with connect(proxy) as live:
        assert round_trip(live) < 1
        proxy.disable()
        assert toxiproxy.proxies()["switch"].enabled is False
        with contextlib.suppress(ConnectionResetError):
            assert live.recv(100) == b""
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(address, timeout=5).close()
    proxy.enable()
    assert toxiproxy.proxies()["switch"].listen == f"{address[0]}:{address[1]}"  # the same port again
    with connect(proxy) as sock:
        assert round_trip(sock) < 1


def test_down_context_manager(toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    proxy = toxiproxy.create(upstream=echo.address, name="flaky")
    with proxy.down(), pytest.raises(ConnectionRefusedError):
        connect(proxy).close()
    with connect(proxy) as sock:
        assert round_trip(sock) < 1


def test_update_with_patch_and_post(api: str, toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    toxiproxy.create(upstream="127.0.0.1:1", name="moved")
    response = requests.patch(f"{api}/proxies/moved", json={"upstream": echo.address})
    assert response.status_code == 200
    body = response.json()
    assert body["upstream"] == echo.address and body["enabled"] is True
    host, port = body["listen"].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        assert round_trip(sock) < 1
    response = requests.post(f"{api}/proxies/moved", json={"enabled": False})
    assert response.status_code == 200
    assert response.json()["enabled"] is False
    assert response.json()["listen"] == body["listen"]


def test_update_errors(api: str, toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    missing = requests.post(f"{api}/proxies/ghost", json={"enabled": True})
    assert missing.status_code == 404
    assert _error(missing) == {"error": "proxy not found", "status": 404}
    toxiproxy.create(upstream=echo.address, name="target")
    bad = requests.post(f"{api}/proxies/target", data=b"{oops")
    assert bad.status_code == 400
    assert str(_error(bad)["error"]).startswith("bad request body")
    wrong_type = requests.post(f"{api}/proxies/target", json={"enabled": "no"})
    assert wrong_type.status_code == 400


def test_delete(api: str, toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    proxy = toxiproxy.create(upstream=echo.address, name="doomed")
    address = listen_address(proxy)
    assert proxy.destroy() is True
    assert toxiproxy.get_proxy("doomed") is None
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(address, timeout=5).close()
    with pytest.raises(NotFound):
        proxy.destroy()
    response = requests.delete(f"{api}/proxies/doomed")
    assert response.status_code == 404
    assert _error(response) == {"error": "proxy not found", "status": 404}


def test_delete_answers_204(api: str, toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    toxiproxy.create(upstream=echo.address, name="gone")
    response = requests.delete(f"{api}/proxies/gone")
    assert response.status_code == 204
    assert response.content == b""


# --- toxics ---------------------------------------------------------------------


def test_add_toxic_with_client_defaults(toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    proxy = toxiproxy.create(upstream=echo.address, name="sick")
    proxy.add_toxic(type="latency", attributes={"latency": 100, "jitter": 10})
    toxic = proxy.get_toxic("latency_downstream")
    assert toxic is not None
    assert (toxic.type, toxic.stream, toxic.toxicity) == ("latency", "downstream", 1)
    assert toxic.attributes == {"latency": 100, "jitter": 10}


def test_add_toxic_answers_the_toxic_and_applies_server_defaults(api: str, toxiproxy: Toxiproxy) -> None:
    toxiproxy.create(upstream="127.0.0.1:1", name="raw")
    response = requests.post(f"{api}/proxies/raw/toxics", json={"type": "timeout"})
    assert response.status_code == 200
    assert response.json() == {
        "attributes": {"timeout": 0},
        "name": "timeout_downstream",
        "type": "timeout",
        "stream": "downstream",
        "toxicity": 1,
    }
    response = requests.post(
        f"{api}/proxies/raw/toxics",
        json={
            "name": "cut",
            "type": "limit_data",
            "stream": "UPSTREAM",
            "toxicity": 0.25,
            "attributes": {"bytes": 9},
        },
    )
    assert response.json() == {
        "attributes": {"bytes": 9},
        "name": "cut",
        "type": "limit_data",
        "stream": "upstream",
        "toxicity": 0.25,
    }


def test_every_toxic_type_is_accepted_with_its_attributes(api: str, toxiproxy: Toxiproxy) -> None:
    proxy = toxiproxy.create(upstream="127.0.0.1:1", name="zoo")
    wanted = {
        "latency": {"latency": 1, "jitter": 2},
        "bandwidth": {"rate": 3},
        "timeout": {"timeout": 4},
        "reset_peer": {"timeout": 5},
        "slow_close": {"delay": 6},
        "slicer": {"average_size": 8, "size_variation": 7, "delay": 9},
        "limit_data": {"bytes": 10},
        "noop": {},
    }
    for type_name, attributes in wanted.items():
        proxy.add_toxic(type=type_name, stream="upstream", attributes=attributes)
    toxics = proxy.toxics()
    assert {name: toxic.attributes for name, toxic in toxics.items()} == {
        f"{type_name}_upstream": attributes for type_name, attributes in wanted.items()
    }


def test_toxics_are_listed_upstream_first_in_order_added(api: str, toxiproxy: Toxiproxy) -> None:
    proxy = toxiproxy.create(upstream="127.0.0.1:1", name="ordered")
    proxy.add_toxic(name="d1", type="latency")
    proxy.add_toxic(name="u1", type="latency", stream="upstream")
    proxy.add_toxic(name="d2", type="bandwidth")
    proxy.add_toxic(name="u2", type="slicer", stream="upstream", attributes={"average_size": 1})
    response = requests.get(f"{api}/proxies/ordered/toxics")
    assert response.status_code == 200
    assert [toxic["name"] for toxic in response.json()] == ["u1", "u2", "d1", "d2"]
    assert requests.get(f"{api}/proxies/nope/toxics").status_code == 404


def test_add_toxic_errors(api: str, toxiproxy: Toxiproxy) -> None:
    proxy = toxiproxy.create(upstream="127.0.0.1:1", name="picky")
    with pytest.raises(InvalidToxic):
        proxy.add_toxic(type="explosion")
    invalid_type = requests.post(f"{api}/proxies/picky/toxics", json={"type": "explosion"})
    assert _error(invalid_type) == {"error": "invalid toxic type", "status": 400}
    invalid_stream = requests.post(
        f"{api}/proxies/picky/toxics", json={"type": "latency", "stream": "sideways"}
    )
    assert invalid_stream.status_code == 400
    assert _error(invalid_stream) == {
        "error": "stream was invalid, can be either upstream or downstream",
        "status": 400,
    }
    proxy.add_toxic(type="latency")
    with pytest.raises(ProxyExists):  # the client's name for any 409
        proxy.add_toxic(type="latency")
    clash = requests.post(
        f"{api}/proxies/picky/toxics", json={"type": "bandwidth", "name": "latency_downstream"}
    )
    assert _error(clash) == {"error": "toxic already exists", "status": 409}
    unknown_proxy = requests.post(f"{api}/proxies/nope/toxics", json={"type": "latency"})
    assert _error(unknown_proxy) == {"error": "proxy not found", "status": 404}


@pytest.mark.parametrize(
    "body",
    [
        {"type": "latency", "attributes": {"latency": "slow"}},
        {"type": "latency", "attributes": {"latency": 1.5}},
        {"type": "latency", "attributes": {"latency": -1}},
        {"type": "latency", "attributes": {"latency": 2**63}},
        {"type": "latency", "attributes": [1]},
        {"type": "latency", "toxicity": "high"},
        {"type": "latency", "toxicity": True},
        {"type": 7},
        {"type": "slicer", "attributes": {"average_size": 0}},
        {"type": "slicer", "attributes": {"average_size": 4, "size_variation": 4}},
    ],
)
def test_add_toxic_bad_body_is_400(api: str, toxiproxy: Toxiproxy, body: dict[str, object]) -> None:
    toxiproxy.create(upstream="127.0.0.1:1", name="strict")
    response = requests.post(f"{api}/proxies/strict/toxics", json=body)
    assert response.status_code == 400
    assert str(_error(response)["error"]).startswith("bad request body")
    assert requests.get(f"{api}/proxies/strict/toxics").json() == []


def test_show_toxic(api: str, toxiproxy: Toxiproxy) -> None:
    proxy = toxiproxy.create(upstream="127.0.0.1:1", name="inspect")
    proxy.add_toxic(name="slow", type="bandwidth", attributes={"rate": 5})
    response = requests.get(f"{api}/proxies/inspect/toxics/slow")
    assert response.status_code == 200
    assert response.json() == {
        "attributes": {"rate": 5},
        "name": "slow",
        "type": "bandwidth",
        "stream": "downstream",
        "toxicity": 1,
    }
    missing = requests.get(f"{api}/proxies/inspect/toxics/fast")
    assert _error(missing) == {"error": "toxic not found", "status": 404}
    assert requests.get(f"{api}/proxies/nope/toxics/slow").status_code == 404


def test_update_toxic_merges_attributes_and_toxicity(api: str, toxiproxy: Toxiproxy) -> None:
    proxy = toxiproxy.create(upstream="127.0.0.1:1", name="tuned")
    proxy.add_toxic(name="lag", type="latency", toxicity=0.5, attributes={"latency": 100, "jitter": 5})
    response = requests.patch(f"{api}/proxies/tuned/toxics/lag", json={"attributes": {"latency": 300}})
    assert response.status_code == 200
    assert response.json()["attributes"] == {"latency": 300, "jitter": 5}
    assert response.json()["toxicity"] == 0.5
    # name, type and stream cannot change through an update
    response = requests.post(
        f"{api}/proxies/tuned/toxics/lag", json={"toxicity": 1, "stream": "upstream", "type": "timeout"}
    )
    assert response.json() == {
        "attributes": {"latency": 300, "jitter": 5},
        "name": "lag",
        "type": "latency",
        "stream": "downstream",
        "toxicity": 1,
    }
    assert proxy.get_toxic("lag").attributes == {"latency": 300, "jitter": 5}  # type: ignore[union-attr]


def test_update_toxic_errors(api: str, toxiproxy: Toxiproxy) -> None:
    proxy = toxiproxy.create(upstream="127.0.0.1:1", name="fussy")
    proxy.add_toxic(name="lag", type="latency")
    assert _error(requests.post(f"{api}/proxies/fussy/toxics/nope", json={})) == {
        "error": "toxic not found",
        "status": 404,
    }
    assert requests.post(f"{api}/proxies/nope/toxics/lag", json={}).status_code == 404
    bad = requests.post(f"{api}/proxies/fussy/toxics/lag", json={"attributes": {"jitter": "x"}})
    assert bad.status_code == 400
    assert proxy.get_toxic("lag").attributes == {"latency": 0, "jitter": 0}  # type: ignore[union-attr]


def test_remove_toxic(api: str, toxiproxy: Toxiproxy) -> None:
    proxy = toxiproxy.create(upstream="127.0.0.1:1", name="healed")
    proxy.add_toxic(type="latency")
    assert proxy.destroy_toxic("latency_downstream") is True
    assert proxy.toxics() == {}
    with pytest.raises(NotFound):
        proxy.destroy_toxic("latency_downstream")
    proxy.add_toxic(type="latency")
    response = requests.delete(f"{api}/proxies/healed/toxics/latency_downstream")
    assert response.status_code == 204
    missing = requests.delete(f"{api}/proxies/healed/toxics/latency_downstream")
    assert _error(missing) == {"error": "toxic not found", "status": 404}
    assert requests.delete(f"{api}/proxies/nope/toxics/x").status_code == 404


# --- reset and populate -----------------------------------------------------------------


def test_reset_enables_every_proxy_and_removes_every_toxic(
    api: str, toxiproxy: Toxiproxy, echo: EchoServer
) -> None:
    first = toxiproxy.create(upstream=echo.address, name="first")
    first.add_toxic(type="timeout", attributes={"timeout": 0})
    second = toxiproxy.create(upstream=echo.address, name="second")
    second.disable()
    assert toxiproxy.reset() is True
    proxies = toxiproxy.proxies()
    assert all(proxy.enabled for proxy in proxies.values())
    assert proxies["first"].toxics() == {} and proxies["second"].toxics() == {}
    with connect(proxies["first"]) as sock:
        assert round_trip(sock) < 1
    response = requests.post(f"{api}/reset")
    assert response.status_code == 204


def test_populate_creates_replaces_and_keeps(api: str, toxiproxy: Toxiproxy, echo: EchoServer) -> None:
    kept = toxiproxy.create(upstream=echo.address, name="kept")
    kept.add_toxic(type="latency")
    toxiproxy.create(upstream="127.0.0.1:1", name="replaced")
    response = requests.post(
        f"{api}/populate",
        json=[
            {"name": "kept", "upstream": echo.address, "listen": kept.listen},
            {"name": "replaced", "upstream": echo.address},
            {"name": "fresh", "upstream": echo.address, "enabled": False},
        ],
    )
    assert response.status_code == 201
    populated = response.json()["proxies"]
    assert [proxy["name"] for proxy in populated] == ["kept", "replaced", "fresh"]
    assert populated[0]["toxics"] != []  # unchanged, so kept as it was
    assert populated[1]["upstream"] == echo.address
    assert populated[2]["enabled"] is False
    # the toxiproxy-python helper on top of the same calls
    created = toxiproxy.populate([{"name": "extra", "upstream": echo.address, "listen": f"{HOST}:0"}])
    assert [proxy.name for proxy in created] == ["extra"]


def test_populate_errors(api: str, toxiproxy: Toxiproxy) -> None:
    empty = requests.post(f"{api}/populate", json=[])
    assert (empty.status_code, empty.json()) == (201, {"proxies": None})
    missing = requests.post(f"{api}/populate", json=[{"name": "a", "upstream": "127.0.0.1:1"}, {"name": "b"}])
    assert missing.status_code == 400
    assert missing.json() == {
        "error": "missing required field: upstream at proxy 2",
        "status": 400,
        "proxies": None,
    }
    assert toxiproxy.proxies() == {}  # nothing is created when any entry is invalid
    not_a_list = requests.post(f"{api}/populate", json={"name": "a"})
    assert not_a_list.status_code == 400
    assert str(not_a_list.json()["error"]).startswith("bad request body")


# --- the HTTP surface ------------------------------------------------------------------


def test_browsers_are_refused(api: str) -> None:
    response = requests.get(f"{api}/proxies", headers={"User-Agent": "Mozilla/5.0"})
    assert response.status_code == 403
    assert response.text == "User agent not allowed\n"


def test_unknown_route_and_wrong_method(api: str) -> None:
    assert requests.get(f"{api}/nothing-here").status_code == 404
    assert requests.delete(f"{api}/proxies").status_code == 405
    assert requests.get(f"{api}/reset").status_code == 405
