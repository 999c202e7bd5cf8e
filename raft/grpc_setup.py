"""gRPC settings a node process chooses before it first imports grpc (they are read at import).

gRPC's EventEngine endpoints hand every read and write between their own threads and asyncio's;
its older POSIX endpoints do not. With them, a frame between nodes costs about a third less CPU and
an unloaded Raft commit (three processes, fsync always) goes from 1.45-1.49 to 1.25 ms p50
(bench/README.md). Raft's commits and ReadIndex rounds wait on exactly those round trips.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

POSIX_ENDPOINTS = "-event_engine_client,-event_engine_listener"


def prefer_posix_endpoints(env: MutableMapping[str, str] = os.environ) -> None:
    """Ask gRPC for its POSIX endpoints in `env`, unless the operator set GRPC_EXPERIMENTS already."""
    env.setdefault("GRPC_EXPERIMENTS", POSIX_ENDPOINTS)
