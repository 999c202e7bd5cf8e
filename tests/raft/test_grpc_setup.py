"""The gRPC endpoint choice is made before gRPC is imported, and an operator's own choice stands."""

from __future__ import annotations

import subprocess
import sys

from raft.grpc_setup import POSIX_ENDPOINTS, prefer_posix_endpoints


def test_posix_endpoints_unless_the_operator_chose() -> None:
    env: dict[str, str] = {}
    prefer_posix_endpoints(env)
    assert env == {"GRPC_EXPERIMENTS": POSIX_ENDPOINTS}
    chosen = {"GRPC_EXPERIMENTS": "event_engine_client"}
    prefer_posix_endpoints(chosen)
    assert chosen == {"GRPC_EXPERIMENTS": "event_engine_client"}


def test_the_node_command_has_not_imported_grpc_before_it_chooses() -> None:
    # gRPC reads GRPC_EXPERIMENTS when it is imported: `jetraft node` sets it in main(), so
    # importing the command's module must not import gRPC already
    probe = "import sys, cluster.node.command; print('grpc' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "False"
