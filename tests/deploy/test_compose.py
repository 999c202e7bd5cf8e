"""deploy/docker-compose.yml and what it mounts: valid Compose, and consistent with the node's flags.

Docker cannot run here, so these check the files themselves against the Compose
specification schema, `jetraft node`'s own argument parser and each other.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import tomllib
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cluster.node.config import ConfigError
from deploy.dashboards import DASHBOARDS, DATASOURCE_UID
from tests.deploy.deploy_files import (
    DEPLOY_DIR,
    bind_mounts,
    load_compose,
    load_json,
    load_yaml,
    node_services,
    parse_node_command,
    port_mappings,
)
from tests.deploy.prometheus_process import PROMTOOL_BINARY

REPO = DEPLOY_DIR.parent
NODE_NAMES = ["n1", "n2", "n3", "m1"]


def compose_schema() -> dict[str, Any]:
    # the Compose specification schema as vendored (with its licence) by the check-jsonschema package
    return json.loads((files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json").read_text())


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load_compose()


def test_compose_file_is_valid_against_the_compose_specification(compose: dict[str, Any]) -> None:
    schema = compose_schema()
    assert schema["title"] == "Compose Specification"
    validator = jsonschema.Draft202012Validator(schema)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(compose)]
    assert errors == []
    # the schema does catch mistakes: an unknown service key and a malformed port are both rejected
    broken = copy.deepcopy(compose)
    broken["services"]["n1"]["comand"] = ["--name", "n1"]
    assert not validator.is_valid(broken)
    broken = copy.deepcopy(compose)
    broken["services"]["n1"]["depends_on"] = "toxiproxy"
    assert not validator.is_valid(broken)


def test_cluster_has_three_nodes_one_mirror_toxiproxy_prometheus_and_grafana(compose: dict[str, Any]) -> None:
    assert sorted(node_services(compose)) == sorted(NODE_NAMES)
    assert {"toxiproxy", "prometheus", "grafana"} <= set(compose["services"])
    assert compose["services"]["toxiproxy"]["image"].startswith("ghcr.io/shopify/toxiproxy:")
    for name, service in node_services(compose).items():
        assert service["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}, name
        assert "toxiproxy" in service["depends_on"], name


def test_every_node_command_is_accepted_by_jetraft_node(compose: dict[str, Any]) -> None:
    for name, service in node_services(compose).items():
        config = parse_node_command(service["command"])
        assert config.name == name == service["hostname"]
        assert config.host == "0.0.0.0"
        assert config.data_dir == "/data"
        assert f"{name}-data:/data" in service["volumes"]
        assert config.tags == (["mirror"] if name.startswith("m") else [])
        assert sorted(config.peers) == sorted(n for n in NODE_NAMES if n != name)
    # the parser is strict: a misspelt flag or a bad setting is caught
    command = list(node_services(compose)["n1"]["command"])
    with pytest.raises(ValueError, match="does not accept"):
        parse_node_command([*command, "--http-prot", "1"])
    with pytest.raises(ConfigError):
        parse_node_command([*command, "--peer", "n1=toxiproxy:7011"])


def test_every_node_authenticates_its_cluster_port_with_a_secret_from_the_environment(
    compose: dict[str, Any],
) -> None:
    # Compose refuses to start without the operator's secret (`:?`), and no command line carries one.
    for name, service in node_services(compose).items():
        secret = service["environment"]["JETRAFT_CLUSTER_SECRET"]
        assert re.fullmatch(r"\$\{JETRAFT_CLUSTER_SECRET:\?[^}]+\}", secret), (name, secret)
        assert not any("secret" in str(arg).lower() for arg in service["command"]), name


def test_ports_are_consistent_with_the_node_flags(compose: dict[str, Any]) -> None:
    host_ports: list[int] = []
    for name, service in compose["services"].items():
        host_ports += [m.host_port for m in port_mappings(service)]
        if name not in node_services(compose):
            continue
        config = parse_node_command(service["command"])
        mapped = {m.container_port for m in port_mappings(service)}
        assert mapped == {config.client_port, config.http_port}, name
        client = next(m for m in port_mappings(service) if m.container_port == config.client_port)
        # clients on the host learn the other nodes from INFO connect_urls: the advertised URL must work there
        assert config.advertise == f"nats://{client.host_ip}:{client.host_port}", name
    assert len(host_ports) == len(set(host_ports)), f"a host port is published twice: {sorted(host_ports)}"
    assert all(m.host_ip == "127.0.0.1" for s in compose["services"].values() for m in port_mappings(s))


def test_nodes_spread_direct_gets_at_random_and_log_json(compose: dict[str, Any]) -> None:
    """The read-spread dashboards show one client's reads spread over the replicas, as a NATS cluster
    spreads them: the nodes' default, which no node's command overrides."""
    for name, service in node_services(compose).items():
        config = parse_node_command(service["command"])
        assert config.direct_get_policy == "random", name
        assert config.log_format == "json", f"{name}: container logs are read by machines"


def _toxiproxy_config(compose: dict[str, Any]) -> list[dict[str, Any]]:
    service = compose["services"]["toxiproxy"]
    config_flag = next(arg for arg in service["command"] if arg.startswith("-config="))
    container_path = config_flag.removeprefix("-config=")
    return load_json(bind_mounts(service)[container_path])


def test_every_node_to_node_link_goes_through_its_own_toxiproxy_proxy(compose: dict[str, Any]) -> None:
    proxies = {proxy["name"]: proxy for proxy in _toxiproxy_config(compose)}
    nodes = {name: parse_node_command(svc["command"]) for name, svc in node_services(compose).items()}
    used: set[str] = set()
    for name, config in nodes.items():
        for peer, address in config.peers.items():
            host, _, port = address.rpartition(":")
            assert host == "toxiproxy", f"{name} dials {peer} directly at {address}"
            proxy = proxies[f"{name}-to-{peer}"]
            assert proxy["listen"] == f"0.0.0.0:{port}"
            assert proxy["upstream"] == f"{peer}:{nodes[peer].cluster_port}"
            assert proxy.get("enabled", True)
            used.add(proxy["name"])
    assert used == set(proxies), f"proxies no --peer uses: {sorted(set(proxies) - used)}"
    listens = [proxy["listen"] for proxy in proxies.values()]
    assert len(listens) == len(set(listens))
    assert len(proxies) == len(NODE_NAMES) * (len(NODE_NAMES) - 1)


def test_prometheus_scrapes_every_node(compose: dict[str, Any]) -> None:
    service = compose["services"]["prometheus"]
    config_path = bind_mounts(service)["/etc/prometheus/prometheus.yml"]
    config = load_yaml(config_path)
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert set(jobs) == {"jetraft", "nats"}  # the dashboards' up{job="jetraft"} panel depends on the name
    targets = {t for group in jobs["jetraft"]["static_configs"] for t in group["targets"]}
    expected = {
        f"{name}:{parse_node_command(svc['command']).http_port}"
        for name, svc in node_services(compose).items()
    }
    assert targets == expected
    assert set(service["depends_on"]) == {*node_services(compose), "nats-exporter"}
    # the exporter reads every node's monitoring endpoints and Prometheus scrapes the exporter
    exporter = compose["services"]["nats-exporter"]
    command = exporter["command"]
    port = command[command.index("-port") + 1]
    assert {t for group in jobs["nats"]["static_configs"] for t in group["targets"]} == {f"nats-exporter:{port}"}
    assert {url for url in command if url.startswith("http://")} == {f"http://{t}" for t in expected}
    assert {"-varz", "-connz", "-healthz", "-jsz=all"} <= set(command)
    if PROMTOOL_BINARY is None:
        pytest.skip("promtool is not installed (apt-get install -y prometheus)")
    result = subprocess.run(
        [PROMTOOL_BINARY, "check", "config", str(config_path)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_grafana_provisions_the_datasource_and_dashboards(compose: dict[str, Any]) -> None:
    service = compose["services"]["grafana"]
    mounts = bind_mounts(service)
    provisioning = mounts["/etc/grafana/provisioning"]
    (datasource,) = load_yaml(provisioning / "datasources" / "prometheus.yml")["datasources"]
    assert datasource["uid"] == DATASOURCE_UID
    assert datasource["type"] == "prometheus"
    prometheus_port = port_mappings(compose["services"]["prometheus"])[0].container_port
    assert datasource["url"] == f"http://prometheus:{prometheus_port}"
    (provider,) = load_yaml(provisioning / "dashboards" / "jetraft.yml")["providers"]
    dashboards_dir = mounts[provider["options"]["path"]]
    assert sorted(p.name for p in dashboards_dir.glob("*.json")) == sorted(d.file_name for d in DASHBOARDS)
    home = service["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    home_dir, _, home_file = home.rpartition("/")
    assert (mounts[home_dir] / home_file).is_file()


def test_dockerfile_installs_every_package_and_runs_jetraft_node() -> None:
    dockerfile = (DEPLOY_DIR / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim$", dockerfile, re.MULTILINE)
    assert re.search(r'^ENTRYPOINT \["jetraft", "node"\]$', dockerfile, re.MULTILINE)
    copied = set(re.findall(r"^COPY (\w+) \./\1$", dockerfile, re.MULTILINE))
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    packages = {p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert packages <= copied, f"the image misses {packages - copied}"
    ignore = (DEPLOY_DIR / "Dockerfile.dockerignore").read_text().splitlines()
    assert all(f"!{package}/" in ignore for package in packages)
    exposed = {int(p) for p in re.findall(r"^EXPOSE (.+)$", dockerfile, re.MULTILINE)[0].split()}
    for service in node_services(load_compose()).values():
        config = parse_node_command(service["command"])
        assert {config.client_port, config.cluster_port, config.http_port} == exposed
    assert Path(REPO / "README.md").is_file()  # COPY'd: pyproject.toml names it as the readme
