"""A run's first request, the delete of an earlier run's stream, is asked again when it times out."""

from __future__ import annotations

from typing import Any, cast

import pytest
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.api import StreamConfig
from nats.js.errors import NotFoundError

from chaos.run.clients import PinnedClient
from chaos.run.workload import fresh_stream


class _SlowStartJetStream:
    """A JetStream context whose first `timeouts` deletes time out, as a cluster that just started may."""

    def __init__(self, timeouts: int) -> None:
        self.timeouts = timeouts
        self.deletes = 0
        self.created: list[str] = []

    async def delete_stream(self, name: str) -> bool:
        self.deletes += 1
        if self.deletes <= self.timeouts:
            raise NatsTimeoutError
        raise NotFoundError

    async def add_stream(self, config: StreamConfig) -> Any:
        assert config.name is not None
        self.created.append(config.name)
        return config


def _client(js: _SlowStartJetStream) -> PinnedClient:
    return PinnedClient(node="n1", url="nats://127.0.0.1:1", nc=cast(Any, None), js=cast(Any, js))


async def test_a_timed_out_delete_is_asked_again_then_the_stream_is_created() -> None:
    js = _SlowStartJetStream(timeouts=2)
    await fresh_stream(_client(js), StreamConfig(name="S", subjects=["s"]))
    assert js.deletes == 3 and js.created == ["S"]


async def test_a_delete_that_always_times_out_fails_the_set_up_after_a_bounded_number_of_tries() -> None:
    js = _SlowStartJetStream(timeouts=100)
    with pytest.raises(NatsTimeoutError):
        await fresh_stream(_client(js), StreamConfig(name="S", subjects=["s"]), attempts=4)
    assert js.deletes == 4 and js.created == []
