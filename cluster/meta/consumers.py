"""The meta leader's consumer operations: create, update, delete, pause, names and list.

Creating validates the request as nats-server does (`cluster/consumer/config_check.py`),
records the assignment in the meta group, and answers with the consumer leader's
view once its group has started (and, for an update, once the leader's node has
the new config: `cluster/runtime/meta_progress.py`). A consumer's replicas are its stream's
(the first `num_replicas` of them; one for ephemerals and memory consumers
that do not ask for more, as nats-server), so the consumer leader always
reads a local copy of the stream.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from cluster.api import jsjson
from cluster.api.advisories import (
    ConsumerEvent,
    consumer_action,
    consumer_advisory_subject,
    consumer_pause,
    new_event_id,
)
from cluster.api.consumer_subjects import (
    CONSUMER_API_PREFIX,
    META_CONSUMER_PREFIX,
    ConsumerOp,
    ConsumerRequest,
    consumer_subject,
    parse_consumer_subject,
)
from cluster.api.errors import ApiError, JSErrors
from cluster.api.lists import list_page
from cluster.consumer.api import delete_response, names_response, parse_offset
from cluster.consumer.assignment import ConsumerAssignment
from cluster.consumer.config import (
    ConsumerConfig,
    CreateConsumerRequest,
    consumer_config_from_json,
    parse_create_request,
)
from cluster.consumer.config_check import (
    CreateSubject,
    check_create_request,
    decide_create,
    generate_consumer_name,
    normalize_consumer_config,
    parse_create_subject,
)
from cluster.consumer.pause import is_paused, parse_pause_request, pause_response, with_pause
from cluster.consumer.unpin import parse_unpin_group, unpin
from cluster.meta.machine import MetaMachine, MetaOp, MetaResult
from cluster.runtime.internal_requests import NoRespondersError
from cluster.runtime.leader_wait import pass_on_when_served
from cluster.runtime.meta_progress import with_meta_index
from cluster.stream.config import stream_config_from_json
from gateway.headers import encode_headers
from gateway.router import Message

if TYPE_CHECKING:
    from cluster.runtime.context import NodeContext


class MetaGroup(Protocol):
    """The meta group as consumer administration uses it (cluster/meta/service.py)."""

    ctx: NodeContext
    machine: MetaMachine

    @property
    def applied_index(self) -> int: ...

    async def propose(self, op: MetaOp, body: dict[str, Any]) -> MetaResult: ...


LIST_LIMIT = 256
LIST_TYPE = "io.nats.jetstream.api.v1.consumer_list_response"
CONSUMER_READY_TIMEOUT = 10.0
# How long a pause waits for the consumer's leader to have it before answering anyway (nats-server
# answers once it proposed the change; waiting means deliveries have stopped when the client hears)
PAUSE_APPLIED_TIMEOUT = 2.0


def _consumer_peers(stream_peers: Sequence[str], cfg: ConsumerConfig) -> list[str]:
    """A new consumer's replicas: its stream's, the first `num_replicas` of them where it asks; as
    nats-server, an ephemeral (or memory) consumer is R1 unless it asks for more."""
    replicas = cfg.num_replicas or len(stream_peers)
    if (cfg.mem_storage or not cfg.is_durable) and not cfg.num_replicas:
        replicas = 1
    return list(stream_peers[: max(replicas, 1)])


def parse_meta_consumer_subject(subject: str) -> ConsumerRequest | None:
    return parse_consumer_subject(CONSUMER_API_PREFIX + subject[len(META_CONSUMER_PREFIX) :])


def consumer_error_body(request: ConsumerRequest, error: ApiError) -> bytes:
    return request.error_body(error)


class ConsumerAdmin:
    def __init__(self, meta: MetaGroup) -> None:
        self.meta = meta
        self.ctx = meta.ctx

    async def handle(self, request: ConsumerRequest, msg: Message) -> bytes | None:
        machine = self.meta.machine
        op = request.op
        # as nats-server: the body is read (a create's stream name checked, INFO's and DELETE's found
        # empty) before the stream is looked up
        if op in (ConsumerOp.INFO, ConsumerOp.DELETE) and not jsjson.is_empty_request(msg.payload):
            raise JSErrors.NOT_EMPTY_REQUEST()
        pause_until = parse_pause_request(msg.payload) if op is ConsumerOp.PAUSE else None
        offset = _offset(msg.payload) if op in (ConsumerOp.NAMES, ConsumerOp.LIST) else 0
        create = self._read_create(request, msg.payload) if op is ConsumerOp.CREATE else None
        if op in (ConsumerOp.RESET, ConsumerOp.NEXT) and request.consumer not in machine.consumers.get(
            request.stream, {}
        ):
            # nats-server's consumer itself serves these: without it nothing answers a RESET, and a
            # pull request gets the no-responders status
            if op is ConsumerOp.NEXT:
                status = encode_headers([("Nats-Subject", CONSUMER_API_PREFIX + request.tail)], status=503)
                self.ctx.reply(msg.reply, b"", status)
            return None
        if request.stream not in machine.streams:
            raise JSErrors.STREAM_NOT_FOUND()
        consumers = machine.consumers.get(request.stream, {})
        if create is not None:
            return await self._create(*create)
        if op is ConsumerOp.NAMES:
            return names_response(list(consumers), offset)
        if op is ConsumerOp.LIST:
            return await self._list(request.stream, sorted(consumers), offset)
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
        if op is ConsumerOp.PAUSE:
            return await self._pause(request.stream, request.consumer, pause_until)
        if op is ConsumerOp.UNPIN:
            # as nats-server in a cluster: the stream and the consumer are looked up before the body
            groups = consumers[request.consumer].config.get("priority_groups") or ()
            unpin(groups, parse_unpin_group(msg.payload))  # its errors (10160) before anything is released
            # the pin is the consumer leader's: it releases it, announces it and answers
            target = consumer_subject(request.stream, request.consumer, op)
            if not await pass_on_when_served(self.ctx.router, target, msg.payload, msg.reply, msg.headers):
                raise JSErrors.CLUSTER_NOT_AVAILABLE()
            return None
        # INFO, NEXT, STEPDOWN from a node that did not know the consumer yet: pass them on, to be
        # answered once the leader's node has what this one applied (a config just updated)
        target = consumer_subject(request.stream, request.consumer, op)
        headers = with_meta_index(msg.headers, self.meta.applied_index)
        if not await pass_on_when_served(self.ctx.router, target, msg.payload, msg.reply, headers):
            raise JSErrors.CLUSTER_NOT_AVAILABLE()
        return None

    async def _pause(self, stream: str, name: str, pause_until_ns: int | None) -> bytes:
        """Set or clear the consumer's `pause_until` through the meta group; its leader stops (or
        starts again) delivering once its node applies it, which the answer waits for (bounded)."""
        assignment = self.meta.machine.consumers[stream][name]
        old = consumer_config_from_json(assignment.config)
        new = with_pause(old, pause_until_ns)
        if new != old:
            updated = dataclasses.replace(assignment, config=new.to_json())
            result = await self.meta.propose(MetaOp.ASSIGN_CONSUMER, updated.to_json())
            if not result.ok:
                raise JSErrors.CONSUMER_NOT_FOUND()
            await self._until_leader_has_it(stream, name)
        if old.pause_until_ns != new.pause_until_ns:
            self._advise_pause(stream, name, new)
        return pause_response(pause_until_ns, time.time_ns())

    async def _until_leader_has_it(self, stream: str, name: str) -> None:
        """Until the consumer's leader has applied what this node applied (bounded; a consumer
        without a leader right now gets the change when one is elected)."""
        headers = with_meta_index(None, self.meta.applied_index)
        subject = consumer_subject(stream, name, ConsumerOp.APPLIED)
        with contextlib.suppress(TimeoutError, NoRespondersError):
            await self.ctx.requester.request(subject, b"", PAUSE_APPLIED_TIMEOUT, headers)

    @staticmethod
    def _read_create(
        request: ConsumerRequest, payload: bytes
    ) -> tuple[CreateSubject, CreateConsumerRequest, ConsumerConfig]:
        subject = parse_create_subject(CONSUMER_API_PREFIX + request.tail)
        if subject is None:
            raise JSErrors.BAD_REQUEST()
        create = parse_create_request(payload)
        return subject, create, check_create_request(subject, create)

    async def _create(
        self, subject: CreateSubject, create: CreateConsumerRequest, cfg: ConsumerConfig
    ) -> bytes:
        if self.ctx.standalone and cfg.num_replicas > 1:
            raise JSErrors.STREAM_REPLICAS_NOT_SUPPORTED()  # nats-server's answer on one server
        stream_assignment = self.meta.machine.streams[subject.stream]
        known = self.meta.machine.consumers.get(subject.stream, {}).get(cfg.name or cfg.durable_name)
        if known is not None:
            # as nats-server: only PAUSE changes an existing consumer's pause, never an update
            cfg = dataclasses.replace(
                cfg, pause_until_ns=consumer_config_from_json(known.config).pause_until_ns
            )
        stream_cfg = stream_config_from_json(stream_assignment.config)
        existing_assignments = self.meta.machine.consumers.get(subject.stream, {})
        name = cfg.name or cfg.durable_name
        others = {
            n: consumer_config_from_json(a.config) for n, a in existing_assignments.items() if n != name
        }
        cfg = normalize_consumer_config(
            cfg, stream_cfg, others, self.ctx.account_limits.max_ack_pending, self.ctx.server_limits, create.pedantic
        )
        existing = existing_assignments.get(name) if name else None
        existing_cfg = consumer_config_from_json(existing.config) if existing is not None else None
        decided = decide_create(create.action, existing_cfg, cfg)
        if not name:
            name = generate_consumer_name(os.urandom(8))
        if decided is not None:
            if existing is not None:
                assignment = dataclasses.replace(existing, config=decided.to_json())
            else:
                # the stream's max_consumers, or the account's where lower (a cap on each stream, as nats-server)
                cap = stream_cfg.max_consumers
                account_cap = self.ctx.account_limits.max_consumers
                if cap <= 0 or 0 < account_cap < cap:
                    cap = account_cap
                if 0 < cap <= len(existing_assignments):
                    raise JSErrors.CONSUMER_MAX_CONSUMERS_LIMIT()
                assignment = ConsumerAssignment(
                    subject.stream,
                    name,
                    decided.to_json(),
                    _consumer_peers(stream_assignment.peers, decided),
                    time.time_ns(),
                    tag=self.ctx.account_tag,
                )
            result = await self.meta.propose(MetaOp.ASSIGN_CONSUMER, assignment.to_json())
            if not result.ok:
                raise JSErrors.STREAM_NOT_FOUND()
        answer = await self._ask_consumer(subject.stream, name, ConsumerOp.CREATE_RESULT)
        if decided is not None and existing is None:
            self._advise(subject.stream, name, created=True)
            if is_paused(decided, time.time_ns()):
                self._advise_pause(subject.stream, name, decided)  # as the server: created paused
        return answer

    async def create_restored(self, stream: str, name: str, config: dict[str, Any], state: bytes) -> None:
        """A consumer of a restored stream (cluster/meta/restore.py), with the config and state its
        snapshot archived: checked against the stream as a create is, placed as a create places it, and
        started from `state` rather than a start position."""
        stream_assignment = self.meta.machine.streams[stream]
        stream_cfg = stream_config_from_json(stream_assignment.config)
        existing = self.meta.machine.consumers.get(stream, {})
        if name in existing:
            raise JSErrors.CONSUMER_NAME_EXIST()
        others = {n: consumer_config_from_json(a.config) for n, a in existing.items()}
        cfg = normalize_consumer_config(
            consumer_config_from_json(config),
            stream_cfg,
            others,
            self.ctx.account_limits.max_ack_pending,
            self.ctx.server_limits,
            False,
        )
        assignment = ConsumerAssignment(
            stream,
            name,
            cfg.to_json(),
            _consumer_peers(stream_assignment.peers, cfg),
            time.time_ns(),
            tag=self.ctx.account_tag,
            restored_state=state,
        )
        result = await self.meta.propose(MetaOp.ASSIGN_CONSUMER, assignment.to_json())
        if not result.ok:
            raise JSErrors.STREAM_NOT_FOUND()
        await self._ask_consumer(stream, name, ConsumerOp.CREATE_RESULT)  # its leader is up, restored
        self._advise(stream, name, created=True)

    def _advise(self, stream: str, name: str, created: bool) -> None:
        """CONSUMER.CREATED / CONSUMER.DELETED, published once: by the meta leader that made the change."""
        event = ConsumerEvent.CREATED if created else ConsumerEvent.DELETED
        body = consumer_action(stream, name, created, new_event_id(), time.time_ns(), self.ctx.domain)
        self.ctx.router.publish(consumer_advisory_subject(event, stream, name), body)

    def _advise_pause(self, stream: str, name: str, cfg: ConsumerConfig) -> None:
        """CONSUMER.PAUSE when a consumer is created paused or a pause is set or cleared (the consumer's
        leader announces the end of a pause that ran out)."""
        body = consumer_pause(
            stream, name, cfg.pause_until_ns, new_event_id(), time.time_ns(), self.ctx.domain
        )
        self.ctx.router.publish(consumer_advisory_subject(ConsumerEvent.PAUSE, stream, name), body)

    async def _ask_consumer(self, stream: str, name: str, op: ConsumerOp) -> bytes:
        """The consumer leader's answer, waiting (bounded) for a new group to elect its leader; it
        answers once its node has what this one applied (an update's new config)."""
        subject = consumer_subject(stream, name, op)
        headers = with_meta_index(None, self.meta.applied_index)
        reply = await self.ctx.requester.request_when_answered(subject, b"", CONSUMER_READY_TIMEOUT, headers)
        return reply.payload

    async def _list(self, stream: str, names: list[str], offset: int) -> bytes:
        return await list_page(
            self.ctx.requester,
            LIST_TYPE,
            "consumers",
            names,
            offset,
            LIST_LIMIT,
            lambda name: consumer_subject(stream, name, ConsumerOp.LIST_ENTRY),
            with_meta_index(None, self.meta.applied_index),
            standalone=self.ctx.standalone,
        )


def _offset(payload: bytes) -> int:
    if not payload.strip():
        return 0
    try:
        return parse_offset(payload)
    except jsjson.RequestJSONError as exc:
        raise JSErrors.INVALID_JSON(err=str(exc)) from None
