"""The writer and its three read paths, against a running cluster, one sample per read.

Each worker owns its keys: it publishes a key, then reads it back at once,
all paths concurrently: STREAM.MSG.GET (the stream leader's coherent read),
Direct Get on every node's connection, and the same with `min_last_seq` =
the PubAck's sequence. Since nobody else writes a worker's keys, any
sequence below the one just acknowledged is a stale read.

Every Direct Get is counted for the node that answered it (its
`Jetraft-Node` header; the node of the worker that answered, on a
several-worker node, as faults are injected on a node's links), not the node
it was sent to: with `random` (the
nodes' default, as in nats-server) any responder may answer, and a read that
reaches a lagged node, or leaves one, crosses its lagged links; with
`local-first` the two are the same. Read timeouts grow with the injected latency so
those reads are answered (and attributed) instead of timing out.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field

import nats
from nats.aio.client import Client as NATS
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.errors import APIError, NotFoundError

from chaos.readafterwrite.stats import Outcome, ReadPath, ReadSample
from cluster.runtime.workers import node_of

_NATS_ERRORS = (NatsTimeoutError, NoRespondersError, APIError, asyncio.TimeoutError)


@dataclass(slots=True)
class Endpoint:
    """A client connection to one node, named after the node (its INFO `server_name`, or the node of
    that worker on a several-worker node: `n1` for `n1/w1`)."""

    node: str
    url: str
    nc: NATS


async def connect_endpoint(url: str) -> Endpoint:
    nc = await nats.connect(url, connect_timeout=5, max_reconnect_attempts=3, allow_reconnect=True)
    # nats-py keeps INFO private; jetraft (like nats-server) names itself there
    info = getattr(nc, "_server_info", {}) or {}
    server_name = info.get("server_name")
    return Endpoint(node=node_of(str(server_name)) if server_name else url, url=url, nc=nc)


def answering_node(headers: dict[str, str], asked: str) -> str:
    """The node whose replica or mirror answered a Direct Get (`Jetraft-Node` names the member: the
    node, or one worker of it), else `asked`, the endpoint it was sent to (nats-server names none)."""
    member = headers.get("Jetraft-Node")
    return node_of(member) if member else asked


@dataclass(slots=True)
class WorkloadSettings:
    stream: str
    subject_prefix: str
    keys: int = 16
    workers: int = 4
    request_timeout: float = 2.0
    publish_timeout: float = 2.0

    def read_timeout(self, lag_ms: int) -> float:
        """A forwarded read may cross a lagged link twice (there and back), plus jitter: 3x the lag."""
        return self.request_timeout + 3 * lag_ms / 1000


@dataclass(slots=True)
class WorkloadResult:
    samples: list[ReadSample] = field(default_factory=list)
    writes: int = 0
    publish_errors: int = 0
    last_acked_seq: int = 0


class ReadAfterWrite:
    """Runs rounds of write-then-read; `ack_times` (seq -> monotonic ack time) spans every round."""

    def __init__(self, settings: WorkloadSettings, writer: Endpoint, endpoints: list[Endpoint]) -> None:
        self.settings = settings
        self.writer = writer
        self.endpoints = endpoints
        self.js = writer.nc.jetstream(timeout=settings.request_timeout)
        self.ack_times: dict[int, float] = {}

    def subject(self, key: int) -> str:
        return f"{self.settings.subject_prefix}.k{key}"

    async def run(
        self, lag_ms: int, leader: str, duration: float, max_writes: int, warmup: float = 0.0
    ) -> WorkloadResult:
        """Write and read for `duration` seconds or `max_writes` writes, whichever ends first.

        Samples of writes started during the first `warmup` seconds are dropped (the lag is still
        building up then).
        """
        result = WorkloadResult()
        started = time.monotonic()
        deadline = started + duration
        record_from = started + warmup
        budget = iter(range(max_writes))

        async def worker(index: int) -> None:
            round_ = 0
            while time.monotonic() < deadline and next(budget, None) is not None:
                key = index + self.settings.workers * (
                    round_ % max(1, self.settings.keys // self.settings.workers)
                )
                round_ += 1
                write_started = time.monotonic()
                samples = await self.write_and_read(lag_ms, leader, key, result)
                if write_started >= record_from:
                    result.samples.extend(samples)

        await asyncio.gather(*(worker(i) for i in range(max(1, self.settings.workers))))
        return result

    async def write_and_read(
        self, lag_ms: int, leader: str, key: int, result: WorkloadResult
    ) -> list[ReadSample]:
        subject = self.subject(key)
        try:
            ack = await self.js.publish(
                subject, b"%d" % time.time_ns(), timeout=self.settings.publish_timeout
            )
        except _NATS_ERRORS:
            result.publish_errors += 1
            return []
        self.ack_times[ack.seq] = time.monotonic()
        result.writes += 1
        result.last_acked_seq = max(result.last_acked_seq, ack.seq)
        reads = [self.msg_get(lag_ms, leader, subject, ack.seq)]
        for endpoint in self.endpoints:
            reads.append(self.direct_get(lag_ms, endpoint, subject, ack.seq, min_last_seq=False))
            reads.append(self.direct_get(lag_ms, endpoint, subject, ack.seq, min_last_seq=True))
        return list(await asyncio.gather(*reads))

    async def msg_get(self, lag_ms: int, leader: str, subject: str, acked_seq: int) -> ReadSample:
        started = time.perf_counter()
        try:
            msg = await self.js.get_msg(self.settings.stream, subject=subject, direct=False)
        except NotFoundError:
            return self._sample(
                lag_ms, ReadPath.MSG_GET, leader, Outcome.NOT_FOUND, acked_seq, 0, started, None
            )
        except _NATS_ERRORS:
            return ReadSample(lag_ms, ReadPath.MSG_GET, leader, Outcome.ERROR, acked_seq)
        return self._sample(
            lag_ms, ReadPath.MSG_GET, leader, Outcome.MESSAGE, acked_seq, msg.seq or 0, started, None
        )

    async def direct_get(
        self, lag_ms: int, endpoint: Endpoint, subject: str, acked_seq: int, min_last_seq: bool
    ) -> ReadSample:
        path = ReadPath.DIRECT_GET_MIN_LAST_SEQ if min_last_seq else ReadPath.DIRECT_GET
        request: dict[str, object] = {"last_by_subj": subject}
        if min_last_seq:
            request["min_last_seq"] = acked_seq
        started = time.perf_counter()
        try:
            reply = await endpoint.nc.request(
                f"$JS.API.DIRECT.GET.{self.settings.stream}",
                json.dumps(request).encode(),
                timeout=self.settings.read_timeout(lag_ms),
            )
        except _NATS_ERRORS:
            # nobody's answer: counted for the node it was sent to, the only one known
            return ReadSample(lag_ms, path, endpoint.node, Outcome.ERROR, acked_seq, via=endpoint.node)
        headers = reply.headers or {}
        responder = answering_node(headers, endpoint.node)
        responder_last = int(headers["Jetraft-Last-Sequence"]) if "Jetraft-Last-Sequence" in headers else None
        status = headers.get("Status")
        via = endpoint.node
        if status == "412":
            return self._sample(
                lag_ms, path, responder, Outcome.REFUSED, acked_seq, 0, started, responder_last, via
            )
        if status == "404":
            return self._sample(
                lag_ms, path, responder, Outcome.NOT_FOUND, acked_seq, 0, started, responder_last, via
            )
        if status is not None or "Nats-Sequence" not in headers:
            return ReadSample(lag_ms, path, responder, Outcome.ERROR, acked_seq, via=via)
        returned = int(headers["Nats-Sequence"])
        return self._sample(
            lag_ms, path, responder, Outcome.MESSAGE, acked_seq, returned, started, responder_last, via
        )

    def _sample(
        self,
        lag_ms: int,
        path: ReadPath,
        responder: str,
        outcome: Outcome,
        acked_seq: int,
        returned_seq: int,
        started: float,
        responder_last: int | None,
        via: str = "",
    ) -> ReadSample:
        answered_at = time.monotonic()
        latency_ms = (time.perf_counter() - started) * 1000
        behind_seq, behind_ms = 0, 0.0
        if outcome in (Outcome.MESSAGE, Outcome.NOT_FOUND) and returned_seq < acked_seq:
            # the responder's own position says how far behind it is; without it, the key's version does
            if responder_last is not None and responder_last < acked_seq:
                behind_seq, first_missing = acked_seq - responder_last, responder_last + 1
            else:
                behind_seq, first_missing = acked_seq - returned_seq, acked_seq
            # it has been missing that write since the write was acknowledged
            missing_since = self.ack_times.get(first_missing, self.ack_times.get(acked_seq, answered_at))
            behind_ms = max(0.0, (answered_at - missing_since) * 1000)
        return ReadSample(
            lag_ms=lag_ms,
            path=path,
            responder=responder,
            outcome=outcome,
            acked_seq=acked_seq,
            returned_seq=returned_seq,
            latency_ms=latency_ms,
            behind_seq=behind_seq,
            behind_ms=behind_ms,
            via=via,
        )


async def wait_caught_up(endpoints: list[Endpoint], stream: str, seq: int, timeout: float) -> dict[str, bool]:
    """Per node: whether it answered a read-your-writes Direct Get for `seq` within `timeout`.

    Requests go out on the connections of the nodes not seen to answer yet, and whoever answers (its
    `Jetraft-Node` header) is marked: with `random` (the default) any responder, with `local-first`
    the node asked, so asking goes on until every node has answered once. Pass only nodes that answer
    Direct Gets for `stream`. Each try waits server side (min_last_seq); the loop backs off only when
    nobody answered or a node already seen did.
    """
    deadline = time.monotonic() + timeout
    caught_up = {endpoint.node: False for endpoint in endpoints}
    request = json.dumps({"seq": seq, "min_last_seq": seq}).encode()
    while not all(caught_up.values()) and time.monotonic() < deadline:
        for endpoint in [e for e in endpoints if not caught_up[e.node]]:
            try:
                reply = await endpoint.nc.request(f"$JS.API.DIRECT.GET.{stream}", request, timeout=2.0)
            except _NATS_ERRORS:
                await asyncio.sleep(0.1)  # no responder yet (a replica rejoins once caught up)
                continue
            headers = reply.headers or {}
            answered_by = answering_node(headers, endpoint.node)
            fresh = headers.get("Status") is None and headers.get("Nats-Sequence") == str(seq)
            if fresh and caught_up.get(answered_by) is False:
                caught_up[answered_by] = True
            else:
                await asyncio.sleep(0.02)  # behind (412), or a node already seen: ask again shortly
    return caught_up
