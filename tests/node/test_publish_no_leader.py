"""A publish on a stream's subject that meets no stream leader is answered 503 no responders at once,
as nats-server answers it: the publish hold (cluster/runtime/publish_hold.py) is an option of the node,
off by default, and without it nothing waits for a leader to come.

The stream is R1 on one server, which is stopped; the client publishes through another server, whose
meta assignments still name the stream. nats-server 3-node cluster and jetraft 3-node cluster, the
same steps, the same answer: one 503 status message, well before the 2 s a held publish would wait.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import nats
import nats.errors
import pytest
from nats.aio.msg import Msg

from cluster.runtime.workers import node_of
from local.cluster import node_available
from tests.node.cluster_fixtures import local_cluster, publish_when_served
from tests.pipeline.servers import NATS_SERVER, NatsServerProcesses

pytestmark = pytest.mark.skipif(
    not (node_available() and NATS_SERVER.exists()), reason="needs `jetraft node` and nats-server"
)

# What a held publish would wait (`--publish-hold 2`, the value the hold's own tests use) is 2 s; an
# answer sent at once takes milliseconds. Half the hold leaves room for a loaded machine.
PROMPT = 1.0
# An answer can be lost: a request forwarded on a stale view of the stopped server's interest just
# before its link went down. Such a probe times out, and the next one is asked (bounded).
PROBE_TIMEOUT = 5.0
PROBES = 10


async def stream_server(url: str) -> str:
    """Create the R1 stream LONE and publish to it once; the server (member) that leads it."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream(timeout=10)
        info = await js.add_stream(name="LONE", subjects=["lone.>"], num_replicas=1)
        await publish_when_served(js, "lone.first", b"served")
        assert info.cluster is not None and info.cluster.leader
        return info.cluster.leader
    finally:
        await nc.close()


async def probe_without_leader(url: str) -> tuple[Msg, float]:
    """A publish with a reply on the leaderless stream's subject: the answer, and how long it took."""
    nc = await nats.connect(url)
    try:
        for _ in range(PROBES):
            inbox = nc.new_inbox()
            answers: asyncio.Queue[Msg] = asyncio.Queue()
            sub = await nc.subscribe(inbox, cb=answers.put)
            await nc.flush()
            started = time.monotonic()
            await nc.publish("lone.after", b"no leader", reply=inbox)
            try:
                answer = await asyncio.wait_for(answers.get(), PROBE_TIMEOUT)
            except TimeoutError:
                await sub.unsubscribe()
                continue
            took = time.monotonic() - started
            await sub.unsubscribe()
            return answer, took
        raise AssertionError(f"{PROBES} publishes on a leaderless stream's subject got no answer at all")
    finally:
        await nc.close()


def run_scenario(urls: dict[str, str], stop: Callable[[str], None]) -> tuple[Msg, float]:
    """`urls` by server name; `stop` stops the named server. The answer through a surviving server."""
    leader = asyncio.run(stream_server(next(iter(urls.values()))))
    stopped = node_of(leader)
    stop(stopped)
    survivor = next(url for name, url in urls.items() if name != stopped)
    return asyncio.run(probe_without_leader(survivor))


def assert_prompt_no_responders(answer: Msg, took: float) -> None:
    assert answer.headers is not None and answer.headers.get("Status") == "503", answer.headers
    assert answer.data == b""
    assert took < PROMPT, f"answered after {took:.2f} s"


def test_a_publish_with_no_stream_leader_is_answered_503_at_once_as_by_nats_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    with NatsServerProcesses(3, Path(tmp_path_factory.mktemp("no-leader-nats-server"))) as servers:

        def stop_nats_server(name: str) -> None:
            proc = servers.procs[name]
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)

        urls = {name: f"nats://127.0.0.1:{servers.ports[name]}" for name in servers.names}
        expected, nats_took = run_scenario(urls, stop_nats_server)
    assert_prompt_no_responders(expected, nats_took)

    with local_cluster(Path(tmp_path_factory.mktemp("no-leader-jetraft"))) as cluster:
        urls = {spec.name: spec.client_url for spec in cluster.specs}
        answer, took = run_scenario(urls, cluster.stop_node)
    assert_prompt_no_responders(answer, took)
    assert dict(answer.headers or {}) == dict(expected.headers or {})
