"""NodeContext.advise: an advisory is built and published only while someone listens for it, as
nats-server's publishAdvisory skips encoding one nobody would receive."""

from __future__ import annotations

from pathlib import Path

from cluster.runtime.context import NodeContext
from cluster.runtime.internal_requests import InternalRequester
from cluster.runtime.metrics import NodeMetrics
from gateway.router import Message, Router

SUBJECT = "$JS.EVENT.ADVISORY.STREAM.CREATED.S"


def node(router: Router) -> NodeContext:
    return NodeContext(
        name="n1",
        router=router,
        host=None,  # type: ignore[arg-type]  # advising never touches Raft
        metrics=NodeMetrics("n1"),
        requester=InternalRequester(router, "n1"),
        data_dir=Path("/nonexistent"),
        members=("n1",),
    )


def test_an_advisory_nobody_listens_for_is_not_built() -> None:
    router = Router()
    built: list[bytes] = []

    def build() -> bytes:
        built.append(b"{}")
        return b"{}"

    node(router).advise(SUBJECT, build)
    assert built == []


def test_an_advisory_someone_listens_for_is_built_once_and_delivered() -> None:
    router = Router()
    got: list[Message] = []
    router.subscribe("$JS.EVENT.ADVISORY.>", got.append)
    calls: list[int] = []

    def build() -> bytes:
        calls.append(1)
        return b'{"type":"io.nats.jetstream.advisory.v1.stream_action"}'

    node(router).advise(SUBJECT, build)
    assert calls == [1]
    assert [(msg.subject, msg.payload) for msg in got] == [
        (SUBJECT, b'{"type":"io.nats.jetstream.advisory.v1.stream_action"}')
    ]
