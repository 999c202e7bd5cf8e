"""`jetraft local up --toxiproxy`: one proxy per ordered node pair, and each node dials its peers through them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

import local.cluster
from chaos.readafterwrite.faults import LinkFaults, link_ends
from chaos.toxiproxy import ToxiproxyProcess
from local.cluster import (
    LocalCluster,
    NodeSpec,
    ToxiproxyAPIError,
    create_proxies,
    node_available,
    plan_free_nodes,
    plan_nodes,
    plan_proxy_links,
    proxy_name,
    route_through_proxies,
)
from tests.process_output import read_lines_until


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


def test_with_workers_each_node_dials_a_run_of_proxies_one_per_peer_worker() -> None:
    specs = plan_nodes(2, 0, port_base=14222, http_port_base=18222, cluster_port_base=16222, workers=2)
    assert [spec.cluster_port for spec in specs] == [16222, 16224]  # a node's workers: its port and the next
    links = {link.name: link for link in plan_proxy_links(specs)}
    assert sorted(links) == ["n1-to-n2.w0", "n1-to-n2.w1", "n2-to-n1.w0", "n2-to-n1.w1"]
    assert link_ends("n1-to-n2.w1") == ("n1", "n2")
    assert links["n1-to-n2.w1"].upstream == "127.0.0.1:16225"
    first, second = (int(links[f"n1-to-n2.w{i}"].listen.rsplit(":", 1)[1]) for i in (0, 1))
    assert second == first + 1  # where n1's workers look for n2's worker 1: worker 0's address plus one
    route_through_proxies(specs, {name: link.listen for name, link in links.items()})
    assert specs[0].dial == {"n2": links["n1-to-n2.w0"].listen}
    command = LocalCluster(specs, "/nonexistent").command(specs[0])
    assert command[command.index("--workers") + 1] == "2"


def test_with_workers_no_two_proxies_of_a_plan_listen_on_one_port(monkeypatch: pytest.MonkeyPatch) -> None:
    # a probe finds the same ports free again until something listens there, and nothing does before
    # the proxies are made: every probe of the plan answering the same base is what can happen
    monkeypatch.setattr(local.cluster, "free_port_base", lambda count: 20_000)
    specs = plan_nodes(3, 1, port_base=14222, http_port_base=18222, cluster_port_base=16222, workers=3)
    listens = [link.listen for link in plan_proxy_links(specs)]
    assert len(listens) == 4 * 3 * 3 and len(set(listens)) == len(listens)


def test_cutting_a_link_between_several_worker_nodes_cuts_the_proxy_to_each_worker() -> None:
    specs = plan_nodes(3, 0, port_base=14222, http_port_base=18222, cluster_port_base=16222, workers=2)
    with ToxiproxyProcess() as toxiproxy:
        create_proxies(toxiproxy.url, plan_proxy_links(specs))
        faults = LinkFaults(toxiproxy.url)
        cut = faults.cut([("n2", "n1"), ("n3", "n1")])
        assert cut == ["n2-to-n1.w0", "n2-to-n1.w1", "n3-to-n1.w0", "n3-to-n1.w1"]
        enabled = {name: proxy.enabled for name, proxy in faults.client.proxies().items()}
        assert [name for name, on in sorted(enabled.items()) if not on] == cut
        faults.restore([("n2", "n1"), ("n3", "n1")])
        assert all(proxy.enabled for proxy in faults.client.proxies().values())
        with pytest.raises(KeyError, match="n1', 'm9"):
            faults.cut([("n1", "m9")])


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


@pytest.mark.skipif(not node_available(), reason="needs a runnable `jetraft node` (cluster.node.command)")
def test_local_up_with_toxiproxy_routes_real_nodes_through_proxies_and_stops_them(tmp_path: Path) -> None:
    specs = plan_free_nodes(2, 0)
    command = [
        sys.executable, "-m", "cli.main", "local", "up", "--nodes", "2", "--mirror-nodes", "0",
        "--port-base", str(specs[0].client_port), "--http-port-base", str(specs[0].http_port),
        "--cluster-port-base", str(specs[0].cluster_port), "--data-dir", str(tmp_path),
        "--toxiproxy", "--toxiproxy-port", "0", "--workers", str(specs[0].workers),
    ]  # fmt: skip
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        lines = read_lines_until(proc, "ready", timeout=90)
        url = next(line.split()[1] for line in lines if line.startswith("toxiproxy: "))
        with urllib.request.urlopen(f"{url}/proxies", timeout=5) as resp:
            proxies = json.loads(resp.read())
        # `n1-to-n2`, or with several workers per node one proxy to each worker (`n1-to-n2.w1`)
        upstreams = {
            proxy_name(source.name, member): f"127.0.0.1:{target.cluster_port + index}"
            for source, target in (specs, specs[::-1])
            for index, member in enumerate(target.members)
        }
        assert {name: proxy["upstream"] for name, proxy in proxies.items()} == upstreams
        # the nodes formed their cluster through the proxies: both report the same meta leader
        bodies = []
        for spec in specs:
            with urllib.request.urlopen(f"{spec.http_url}/healthz", timeout=5) as resp:
                bodies.append(json.loads(resp.read()))
        assert bodies[0]["meta_leader"] and bodies[0]["meta_leader"] == bodies[1]["meta_leader"]
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            assert proc.wait(timeout=30) == 0
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{url}/version", timeout=2)  # the Toxiproxy server stopped with the cluster
