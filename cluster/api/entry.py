"""Where a client's JetStream API request enters the cluster: one member of the `_jsapi` queue group.

Every node joins the group, so whichever node the client is connected to
(or a random one, per the queue policy) takes the request and forwards it,
reply subject untouched, to the node that can answer (see
`cluster/api/subjects.py`). When nobody can (no meta leader, a stream
between leaders) the client gets JetStream's 503 "temporarily unavailable"
error at once instead of a timeout.
"""

from __future__ import annotations

from collections.abc import Callable

from cluster.api.audit import API_SUBJECT_HEADER, send_api_response
from cluster.api.consumer_subjects import (
    CONSUMER_API_PREFIX,
    META_CONSUMER_OPS,
    ConsumerOp,
    ConsumerRequest,
    consumer_subject,
    meta_consumer_subject,
    parse_consumer_subject,
)
from cluster.api.errors import JSErrors, error_response, stream_info_error
from cluster.api.handoff import hand_on_requests_in_flight
from cluster.api.subjects import (
    API_QUEUE,
    API_SUBSCRIPTIONS,
    META_OPS,
    ApiOp,
    ApiRequest,
    meta_subject,
    parse_api_subject,
    stream_subject,
)
from cluster.runtime.context import NodeContext
from cluster.runtime.leader_wait import wait_for_interest
from gateway.connect_options import REQUEST_INFO_HEADER
from gateway.headers import encode_headers, set_header
from gateway.router import Message, Subscription

# INFO goes by way of the meta leader, which passes it on only if the stream (or consumer) still
# exists: this node's copy of the meta state may not have applied a delete the client was already
# told of, and the old leader may not have stopped yet. One hop more, on a request that is not hot.
_ASKED_OF_META = frozenset({ApiOp.STREAM_INFO})


class ApiEntry:
    def __init__(
        self,
        ctx: NodeContext,
        knows_stream: Callable[[str], bool],
        knows_consumer: Callable[[str, str], bool],
    ) -> None:
        self._ctx = ctx
        self._knows_stream = knows_stream
        self._knows_consumer = knows_consumer
        self._subs: list[Subscription] = []
        # forwarded leader requests nobody here serves any more go on to the next leader, for good
        hand_on_requests_in_flight(ctx)
        # what /jsz and /varz report as `api.total` and `api.errors` for this node
        self.requests = 0
        self.errors = 0

    def open(self) -> None:
        router = self._ctx.router
        self._subs = [router.subscribe(subject, self._on_request, API_QUEUE) for subject in API_SUBSCRIPTIONS]

    def close(self) -> None:
        for sub in self._subs:
            self._ctx.router.unsubscribe(sub)
        self._subs = []

    def _on_request(self, msg: Message) -> None:
        if not msg.reply:
            return
        self.requests += 1
        if msg.subject.startswith(CONSUMER_API_PREFIX):
            self._on_consumer_request(msg)
            return
        request = parse_api_subject(msg.subject)
        if request is None:
            return
        if (
            request.op in META_OPS
            or request.op is ApiOp.CONSUMER
            or request.op in _ASKED_OF_META
            or not self._knows_stream(request.stream)
        ):
            target = meta_subject(request)
        else:
            target = stream_subject(request.stream, request.op)
        self._forward(request, target, msg)

    def _on_consumer_request(self, msg: Message) -> None:
        request = parse_consumer_subject(msg.subject)
        if request is None:
            return
        if (
            request.op in META_CONSUMER_OPS
            or request.op is ConsumerOp.INFO  # by way of the meta leader, as _ASKED_OF_META says
            or not self._knows_consumer(request.stream, request.consumer)
        ):
            target = meta_consumer_subject(request)
        else:
            target = consumer_subject(request.stream, request.consumer, request.op)
        self._forward(request, target, msg)

    def _forward(self, request: ApiRequest | ConsumerRequest, target: str, msg: Message) -> None:
        # the answerer sees only `target`: the subject the client used goes along for its audit
        if msg.headers is not None and REQUEST_INFO_HEADER.encode() in msg.headers:
            msg = Message(
                msg.subject, msg.reply, set_header(msg.headers, API_SUBJECT_HEADER, msg.subject.encode()), msg.payload
            )
        if self._ctx.router.publish(target, msg.payload, msg.reply, msg.headers) == 0:
            self._ctx.spawn(self._forward_when_answerable(request, target, msg), "api-wait-for-leader")

    async def _forward_when_answerable(
        self, request: ApiRequest | ConsumerRequest, target: str, msg: Message
    ) -> None:
        """Nobody answers `target` right now (a leader change in progress, its interest still on the
        way): give the new leader a moment before telling the client the system is unavailable."""
        router = self._ctx.router
        if await wait_for_interest(router, target):
            router.publish(target, msg.payload, msg.reply, msg.headers)
            return
        error = JSErrors.CLUSTER_NOT_AVAILABLE()
        self.errors += 1
        if isinstance(request, ConsumerRequest) and request.op is ConsumerOp.NEXT:
            # a pull request gets a status, as its client waits for messages or statuses
            self._ctx.reply(msg.reply, b"", encode_headers(status=503, description="No Responders"))
            return
        if isinstance(request, ApiRequest) and request.op is ApiOp.STREAM_INFO:
            body = stream_info_error(error)
        elif isinstance(request, ConsumerRequest):
            body = request.error_body(error)
        else:
            body = error_response(request.response_type, error)
        send_api_response(self._ctx, msg, body)
