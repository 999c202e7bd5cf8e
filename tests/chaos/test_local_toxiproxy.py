"""`jetraft local up --toxiproxy`: one proxy per ordered node pair, and each node dials its peers through them."""

from __future__ import annotations

import json
import urllib.request

import pytest

from chaos.toxiproxy import ToxiproxyProcess
from cluster.local_cluster import (
    LocalCluster,
    NodeSpec,
    ToxiproxyAPIError,
    create_proxies,
    plan_nodes,
    plan_proxy_links,
    route_through_proxies,
)


def _specs() -> list[NodeSpec]:
    return plan_nodes(3, 1, port_base=14222, http_port_base=18222, cluster_port_base=16222)


def test_one_link_per_ordered_pair_named_source_to_target_with_the_target_cluster_port() -> None:
    specs = _specs()
    links = plan_proxy_links(specs)
    names = {link.name for link in links}
    assert len(links) == len(names) == 4 * 3
    assert {"n1-to-n2", "n2-to-n1", "n3-to-m1", "m1-to-n3"} <= names
    cluster_ports = {spec.name: spec.cluster_port for spec in specs}
    for link in links:
        assert link.name == f"{link.source}-to-{link.target}"
        assert link.upstream == f"127.0.0.1:{cluster_ports[link.target]}"
        assert link.source != link.target


def test_route_through_proxies_makes_each_node_dial_the_proxy_named_after_it() -> None:
    specs = _specs()
    listens = {link.name: f"127.0.0.1:{40000 + i}" for i, link in enumerate(plan_proxy_links(specs))}
    route_through_proxies(specs, listens)
    for spec in specs:
        assert set(spec.dial) == {peer.name for peer in specs} - {spec.name}
        for peer, address in spec.dial.items():
            assert address == listens[f"{spec.name}-to-{peer}"]
    command = LocalCluster(specs, "/nonexistent").command(specs[0])
    peers = [command[i + 1] for i, arg in enumerate(command) if arg == "--peer"]
    assert f"n2={listens['n1-to-n2']}" in peers and f"m1={listens['n1-to-m1']}" in peers


def test_create_proxies_on_a_real_toxiproxy_server() -> None:
    specs = _specs()
    links = plan_proxy_links(specs)
    with ToxiproxyProcess() as toxiproxy:
        listens = create_proxies(toxiproxy.url, links)
        with urllib.request.urlopen(f"{toxiproxy.url}/proxies", timeout=5) as resp:
            proxies = json.loads(resp.read())
        assert set(proxies) == {link.name for link in links}
        for link in links:
            proxy = proxies[link.name]
            assert proxy["upstream"] == link.upstream
            assert proxy["enabled"] is True
            host, port = proxy["listen"].rsplit(":", 1)
            assert host == "127.0.0.1" and int(port) > 0
            assert listens[link.name] == proxy["listen"]
        assert len(set(listens.values())) == len(links), "every proxy listens on its own port"
        with pytest.raises(ToxiproxyAPIError, match="409"):
            create_proxies(toxiproxy.url, links[:1])
