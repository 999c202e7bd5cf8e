"""What one worker of a several-worker node runs as: the node's configuration, made a cluster member.

Worker `i` of node `n1` is member `n1/w<i>` (cluster/runtime/workers.py):
- it listens on the node's client port, shared by every worker through
  SO_REUSEPORT, and advertises the node's one client URL;
- its cluster port is the node's plus `i`, and so is every peer worker's: a
  peer node given as `n2=host:port` has its workers at `host:port`,
  `host:port+1`, ... (every node runs the same number of workers);
- its data lives in `<data>/<node>/w<i>/`;
- its HTTP side listens on an ephemeral port of the node's address, which it
  reports to the supervisor, the only one that asks it (the node's HTTP port
  is the supervisor's).
"""

from __future__ import annotations

import dataclasses

from cluster.node.config import NodeConfig
from cluster.runtime.workers import worker_name

WILDCARD_HOSTS = ("", "0.0.0.0", "::")


def dial_host(host: str) -> str:
    """Where this machine's processes reach a listener bound to `host`."""
    return "127.0.0.1" if host in WILDCARD_HOSTS else host


def worker_peers(config: NodeConfig, index: int) -> dict[str, str]:
    """Every other member of the cluster, by worker name, with the address this worker dials."""
    workers = config.workers
    peers = {
        worker_name(config.name, other, workers): f"{dial_host(config.host)}:{config.cluster_port + other}"
        for other in range(workers)
        if other != index
    }
    for node, address in config.peers.items():
        host, _, port = address.rpartition(":")
        for other in range(workers):
            peers[worker_name(node, other, workers)] = f"{host}:{int(port) + other}"
    return peers


def worker_config(config: NodeConfig, index: int) -> NodeConfig:
    return dataclasses.replace(
        config,
        name=worker_name(config.name, index, config.workers),
        cluster_port=config.cluster_port + index,
        http_port=0,
        host=config.host,
        peers=worker_peers(config, index),
        advertise=config.client_url,
        worker_index=index,
    )
