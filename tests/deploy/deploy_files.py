"""Loading deploy/: the compose file, the node commands in it, the Toxiproxy and Grafana provisioning files."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from cluster.node.config import NodeConfig, add_node_arguments, config_from_args

DEPLOY_DIR = Path(__file__).resolve().parents[2] / "deploy"
COMPOSE_FILE = DEPLOY_DIR / "docker-compose.yml"
NODE_IMAGE = "jetraft:latest"


def load_yaml(path: Path) -> Any:
    return YAML(typ="safe").load(path.read_text())


def load_compose() -> dict[str, Any]:
    return load_yaml(COMPOSE_FILE)


def node_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The services that run the jetraft node image."""
    return {name: svc for name, svc in compose["services"].items() if svc.get("image") == NODE_IMAGE}


def parse_node_command(command: list[str]) -> NodeConfig:
    """The node configuration `jetraft node` would build from these arguments.

    Raises ValueError for a flag `jetraft node` does not know, ConfigError for a setting it rejects.
    """
    parser = argparse.ArgumentParser(prog="jetraft node", exit_on_error=False)
    add_node_arguments(parser)
    args, unknown = parser.parse_known_args(command)
    if unknown:
        raise ValueError(f"jetraft node does not accept {unknown}")
    return config_from_args(args)


@dataclass(frozen=True, slots=True)
class PortMapping:
    host_ip: str
    host_port: int
    container_port: int


def port_mappings(service: dict[str, Any]) -> list[PortMapping]:
    """Short-syntax "IP:HOST:CONTAINER" mappings (the only form the compose file uses)."""
    mappings = []
    for spec in service.get("ports", []):
        host_ip, host_port, container_port = str(spec).split(":")
        mappings.append(PortMapping(host_ip, int(host_port), int(container_port)))
    return mappings


def bind_mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Container path -> host path (relative to deploy/) for the service's bind mounts."""
    mounts = {}
    for spec in service.get("volumes", []):
        source, target, *_ = str(spec).split(":")
        if source.startswith("."):
            mounts[target] = (DEPLOY_DIR / source).resolve()
    return mounts


def load_json(path: Path) -> Any:
    return json.loads(path.read_text())
