"""nats.js v3 (the official JavaScript client, unmodified) against a 3-node nats-server 2.15.1 cluster and a
3-node jetraft cluster: scenario.mjs (streams, publishes with dedup and expectations, MSG.GET, Direct Get,
a pull consumer, priority groups (an overflow consumer's minimum, a pinned client, UNPIN), KV, object
store) must see the same on both. `make test` installs nats.js with npm."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from local.cluster import node_available
from tests.pipeline.servers import NATS_SERVER, JetStreamTarget, side_by_side

HERE = Path(__file__).resolve().parent
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(
    not (NODE and (HERE / "node_modules" / "@nats-io" / "jetstream").exists()),
    reason="needs node and nats.js (`make test` installs it with npm)",
)


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, JetStreamTarget]]:
    if not (node_available() and NATS_SERVER.exists()):
        pytest.skip("needs `jetraft node` and nats-server")
    with side_by_side(tmp_path_factory) as started:
        yield started


def _scenario(url: str) -> list[Any]:
    assert NODE is not None
    done = subprocess.run(
        [NODE, str(HERE / "scenario.mjs"), url], capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: list[Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_natsjs_sees_jetraft_as_it_sees_nats_server(clusters: dict[str, JetStreamTarget]) -> None:
    expected = _scenario(clusters["nats-server"].urls[0])
    got = _scenario(clusters["jetraft"].urls[0])
    for want, have in zip(expected, got, strict=True):
        assert have == want
    # the scenario reached its end, errors included
    labels = [label for label, _ in expected]
    assert labels[-1] == "object sealed" and "consumer missing" in labels
