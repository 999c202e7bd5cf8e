"""The meta leader's consumer operations: create, update, delete, names and list.

Creating validates the request as nats-server does (`cluster/consumer/config_check.py`),
records the assignment in the meta group, and answers with the consumer leader's
view once its group has started. A consumer's replicas are its stream's
(the first `num_replicas` of them; one for ephemerals and memory consumers
that do not ask for more, as nats-server), so the consumer leader always
reads a local copy of the stream.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import TYPE_CHECKING, Any, Protocol

from cluster.api import jsjson
from cluster.api.advisories import ConsumerEvent, consumer_action, consumer_advisory_subject, new_event_id
from cluster.api.consumer_subjects import (
    CONSUMER_API_PREFIX,
    META_CONSUMER_PREFIX,
    ConsumerOp,
    ConsumerRequest,
    consumer_subject,
    parse_consumer_subject,
)
from cluster.api.errors import ApiError, JSErrors, plain_error
from cluster.api.lists import list_page
from cluster.consumer.api import delete_response, names_response, parse_offset
from cluster.consumer.assignment import ConsumerAssignment
from cluster.consumer.config import consumer_config_from_json, parse_create_request
from cluster.consumer.config_check import (
    check_create_request,
    decide_create,
    generate_consumer_name,
    normalize_consumer_config,
    parse_create_subject,
)
from cluster.meta.machine import MetaMachine, MetaOp, MetaResult
from cluster.runtime.leader_wait import pass_on_when_served
from cluster.stream.config import stream_config_from_json
from gateway.router import Message

if TYPE_CHECKING:
    from cluster.runtime.context import NodeContext


class MetaGroup(Protocol):
    """The meta group as consumer administration uses it (cluster/meta/service.py)."""

    ctx: NodeContext
    machine: MetaMachine

    async def propose(self, op: MetaOp, body: dict[str, Any]) -> MetaResult: ...

LIST_LIMIT = 256
LIST_TYPE = "io.nats.jetstream.api.v1.consumer_list_response"
CONSUMER_READY_TIMEOUT = 10.0


def parse_meta_consumer_subject(subject: str) -> ConsumerRequest | None:
    return parse_consumer_subject(CONSUMER_API_PREFIX + subject[len(META_CONSUMER_PREFIX) :])


def consumer_error_body(request: ConsumerRequest, error: ApiError) -> bytes:
    return plain_error(request.response_type, error)


class ConsumerAdmin:
    def __init__(self, meta: MetaGroup) -> None:
        self.meta = meta
        self.ctx = meta.ctx

    async def handle(self, request: ConsumerRequest, msg: Message) -> bytes | None:
        machine = self.meta.machine
        if request.stream not in machine.streams:
            raise JSErrors.STREAM_NOT_FOUND()
        consumers = machine.consumers.get(request.stream, {})
        op = request.op
        if op is ConsumerOp.CREATE:
            return await self._create(request, msg.payload)
        if op is ConsumerOp.NAMES:
            return names_response(list(consumers), _offset(msg.payload))
        if op is ConsumerOp.LIST:
            return await self._list(request.stream, sorted(consumers), _offset(msg.payload))
        if request.consumer not in consumers:
            raise JSErrors.CONSUMER_NOT_FOUND()
        if op is ConsumerOp.DELETE:
            result = await self.meta.propose(
                MetaOp.REMOVE_CONSUMER, {"stream": request.stream, "name": request.consumer}
            )
            if not result.ok:
                raise JSErrors.CONSUMER_NOT_FOUND()
            self._advise(request.stream, request.consumer, created=False)
            return delete_response()
        # INFO, NEXT, STEPDOWN from a node that did not know the consumer yet: pass them on
        target = consumer_subject(request.stream, request.consumer, op)
        if not await pass_on_when_served(self.ctx.router, target, msg.payload, msg.reply, msg.headers):
            raise JSErrors.CLUSTER_NOT_AVAILABLE()
        return None

    async def _create(self, request: ConsumerRequest, payload: bytes) -> bytes:
        subject = parse_create_subject(CONSUMER_API_PREFIX + request.tail)
        if subject is None:
            raise JSErrors.BAD_REQUEST()
        create = parse_create_request(payload)
        cfg = check_create_request(subject, create)
        stream_assignment = self.meta.machine.streams[subject.stream]
        stream_cfg = stream_config_from_json(stream_assignment.config)
        existing_assignments = self.meta.machine.consumers.get(subject.stream, {})
        name = cfg.name or cfg.durable_name
        others = {
            n: consumer_config_from_json(a.config) for n, a in existing_assignments.items() if n != name
        }
        cfg = normalize_consumer_config(cfg, stream_cfg, others)
        existing = existing_assignments.get(name) if name else None
        existing_cfg = consumer_config_from_json(existing.config) if existing is not None else None
        decided = decide_create(create.action, existing_cfg, cfg)
        if not name:
            name = generate_consumer_name(os.urandom(8))
        if decided is not None:
            if existing is not None:
                assignment = dataclasses.replace(existing, config=decided.to_json())
            else:
                if 0 < stream_cfg.max_consumers <= len(existing_assignments):
                    raise JSErrors.CONSUMER_MAX_CONSUMERS_LIMIT()  # the stream's max_consumers
                peers = list(stream_assignment.peers)
                replicas = decided.num_replicas or len(peers)
                if (decided.mem_storage or not decided.is_durable) and not decided.num_replicas:
                    # as nats-server: an ephemeral (or memory) consumer is R1 unless it asks for more
                    replicas = 1
                assignment = ConsumerAssignment(
                    subject.stream, name, decided.to_json(), peers[: max(replicas, 1)], time.time_ns()
                )
            result = await self.meta.propose(MetaOp.ASSIGN_CONSUMER, assignment.to_json())
            if not result.ok:
                raise JSErrors.STREAM_NOT_FOUND()
        answer = await self._ask_consumer(subject.stream, name, ConsumerOp.CREATE_RESULT)
        if decided is not None and existing is None:
            self._advise(subject.stream, name, created=True)
        return answer

    def _advise(self, stream: str, name: str, created: bool) -> None:
        """CONSUMER.CREATED / CONSUMER.DELETED, published once: by the meta leader that made the change."""
        event = ConsumerEvent.CREATED if created else ConsumerEvent.DELETED
        body = consumer_action(stream, name, created, new_event_id(), time.time_ns(), self.ctx.domain)
        self.ctx.router.publish(consumer_advisory_subject(event, stream, name), body)

    async def _ask_consumer(self, stream: str, name: str, op: ConsumerOp) -> bytes:
        """The consumer leader's answer, waiting (bounded) for a new group to elect its leader."""
        subject = consumer_subject(stream, name, op)
        return (
            await self.ctx.requester.request_when_answered(subject, timeout=CONSUMER_READY_TIMEOUT)
        ).payload

    async def _list(self, stream: str, names: list[str], offset: int) -> bytes:
        return await list_page(
            self.ctx.requester,
            LIST_TYPE,
            "consumers",
            names,
            offset,
            LIST_LIMIT,
            lambda name: consumer_subject(stream, name, ConsumerOp.LIST_ENTRY),
        )


def _offset(payload: bytes) -> int:
    if not payload.strip():
        return 0
    try:
        return parse_offset(payload)
    except jsjson.RequestJSONError as exc:
        raise JSErrors.INVALID_JSON(err=str(exc)) from None
