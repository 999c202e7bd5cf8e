"""The Raft transport's link to a peer redials whatever way a call ends.

grpc.aio raises `asyncio.InvalidStateError` (not an `AioRpcError`) for a write on
a call that has already finished; a link writing a burst of frames meets it when
the peer ends the call mid-burst. That used to end the link's task for good:
nothing more was ever sent to that peer. Fake calls make the sequence exact.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from raft import raft_pb2
from raft.transport import RaftTransport
from raft.types import Message, MessageType


class _Call:
    """A Send call: `fail_after` writes succeed, then each write raises `error` (None: all succeed)."""

    def __init__(self, fail_after: int | None, error: BaseException | None = None) -> None:
        self.fail_after = fail_after
        self.error = error
        self.writes: list[raft_pb2.Frame] = []
        self.written = asyncio.Event()

    async def write(self, frame: raft_pb2.Frame) -> None:
        if self.fail_after is not None and len(self.writes) >= self.fail_after:
            assert self.error is not None
            raise self.error
        self.writes.append(frame)
        self.written.set()

    def done(self) -> bool:
        return False  # the status has not reached us yet: only the write tells

    def add_done_callback(self, _callback: Callable[[Any], None]) -> None:
        pass

    def cancel(self) -> bool:
        return True


class _Channel:
    def __init__(self, calls: list[_Call]) -> None:
        self.calls = calls
        self.dialled = 0

    def stream_stream(self, *_args: Any, **_kwargs: Any) -> Callable[[], _Call]:
        return self._connect

    def unary_unary(self, *_args: Any, **_kwargs: Any) -> Callable[..., Any]:
        return self._connect

    def stream_unary(self, *_args: Any, **_kwargs: Any) -> Callable[..., Any]:
        return self._connect

    def _connect(self, *_args: Any, **_kwargs: Any) -> _Call:
        call = self.calls[self.dialled]
        self.dialled += 1
        return call


def _heartbeat(commit: int) -> Message:
    return Message(MessageType.HEARTBEAT, "a", "b", term=1, commit=commit)


@pytest.mark.parametrize(
    "error",
    [asyncio.InvalidStateError("RPC is already finished."), RuntimeError("something gRPC did not expect")],
    ids=["finished-call", "unexpected"],
)
async def test_a_link_whose_call_breaks_mid_burst_redials_and_sends_again(error: BaseException) -> None:
    unreachable: list[tuple[str, str]] = []
    reported = asyncio.Event()

    def on_unreachable(group: str, peer: str) -> None:
        unreachable.append((group, peer))
        reported.set()

    transport = RaftTransport(
        "a", lambda _g, _m: True, on_unreachable=on_unreachable,
        reconnect_delay=(0.01, 0.05), max_frame_bytes=1,
    )  # fmt: skip
    broken, healthy = _Call(fail_after=1, error=error), _Call(fail_after=None)
    channel = _Channel([broken, healthy])
    transport.add_peer("b", channel)  # type: ignore[arg-type]
    try:
        # one frame per message (max_frame_bytes=1): the second write of the burst finds the call ended
        for commit in range(1, 4):
            transport.send("g", _heartbeat(commit))
        await asyncio.wait_for(reported.wait(), 5)  # the rest of the burst, dropped and reported
        assert len(broken.writes) == 1 and ("g", "b") in unreachable
        transport.send("g", _heartbeat(10))
        await asyncio.wait_for(healthy.written.wait(), 5)
        assert channel.dialled == 2
        assert [m.commit for f in healthy.writes for m in f.messages] == [10]
    finally:
        await transport.close()
