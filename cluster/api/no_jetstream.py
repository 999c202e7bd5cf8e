"""The JetStream API of an account without JetStream: nats-server's 503 "JetStream not enabled for account".

Only the home account has JetStream (gateway/accounts.py); another account's clients publish their
`$JS.API.*` requests into their own space (`_ACC_.<account>.$JS.API...`), where this answers each with
the error in the response type of its operation, with the same trailing fields nats-server prints. A
pull request gets no-responders and an unknown subject no answer, as from nats-server.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from cluster.api.audit import audit_api_response
from cluster.api.consumer_subjects import CONSUMER_API_PREFIX, ConsumerOp, parse_consumer_subject
from cluster.api.errors import JSErrors, error_response, stream_info_error
from cluster.api.subjects import API_SUBSCRIPTIONS, ApiOp, parse_api_subject
from cluster.runtime.context import NodeContext
from gateway.accounts import ACCOUNT_PREFIX
from gateway.headers import encode_headers
from gateway.router import Message, Subscription

_PAGING = {"total": 0, "offset": 0, "limit": 0}
_STREAM_TRAILERS: dict[ApiOp, dict[str, Any]] = {
    ApiOp.STREAM_NAMES: {**_PAGING, "streams": None},
    ApiOp.STREAM_LIST: {**_PAGING, "streams": []},
    ApiOp.STREAM_PURGE: {"purged": 0},
}
_CONSUMER_TRAILERS: dict[ConsumerOp, dict[str, Any]] = {
    ConsumerOp.NAMES: {**_PAGING, "consumers": []},
    ConsumerOp.LIST: {**_PAGING, "consumers": []},
}


def not_enabled_body(api_subject: str) -> bytes | None:
    """The answer to `$JS.API...` in an account without JetStream; None where nats-server gives none."""
    error = JSErrors.NOT_ENABLED_FOR_ACCOUNT()
    if api_subject.startswith(CONSUMER_API_PREFIX):
        consumer = parse_consumer_subject(api_subject)
        if consumer is None or consumer.op is ConsumerOp.NEXT:
            return None
        if consumer.op in _CONSUMER_TRAILERS:
            return error_response(consumer.response_type, error, **_CONSUMER_TRAILERS[consumer.op])
        return consumer.error_body(error)
    request = parse_api_subject(api_subject)
    if request is None:
        return None
    if request.op is ApiOp.STREAM_INFO:
        return stream_info_error(error)
    return error_response(request.response_type, error, **_STREAM_TRAILERS.get(request.op, {}))


# A queue group of its own: the router groups queue members by name, whatever their subjects, so in the
# API's group (`_jsapi`) this would take the requests of the accounts that have JetStream from their own
# API entries. Served where the client is connected, as the API is (the node lists it in `local_queues`).
NO_JETSTREAM_QUEUE = "_jsnone"


class NoJetStreamResponder:
    def __init__(self, ctx: NodeContext, jetstream_accounts: Collection[str] = (), home: str | None = None) -> None:
        self._ctx = ctx
        # the accounts that have a JetStream of their own, which answers them
        self._served = frozenset(jetstream_accounts)
        # the home account (whose subjects have no prefix), when it has no JetStream either
        self._home = home
        self._subs: list[Subscription] = []

    def open(self) -> None:
        router = self._ctx.router
        self._subs = [
            router.subscribe(f"{ACCOUNT_PREFIX}*.{subject}", self._on_request, NO_JETSTREAM_QUEUE)
            for subject in API_SUBSCRIPTIONS
        ]
        if self._home is not None:
            self._subs += [
                router.subscribe(subject, self._on_home_request, NO_JETSTREAM_QUEUE) for subject in API_SUBSCRIPTIONS
            ]

    def close(self) -> None:
        for sub in self._subs:
            self._ctx.router.unsubscribe(sub)
        self._subs = []

    def _on_request(self, msg: Message) -> None:
        if not msg.reply:
            return
        # _ACC_.<account>.$JS.API...
        _, account, api_subject = msg.subject.split(".", 2)
        if account in self._served:
            return
        self._answer(msg, api_subject)

    def _on_home_request(self, msg: Message) -> None:
        if msg.reply:
            self._answer(msg, msg.subject)

    def _answer(self, msg: Message, api_subject: str) -> None:
        if not msg.reply:
            return
        if api_subject.startswith(CONSUMER_API_PREFIX + "MSG.NEXT."):
            # nobody in this account serves it: what the router says when nobody listens
            status = encode_headers([("Nats-Subject", api_subject)], status=503)
            self._ctx.reply(msg.reply, b"", status)
            return
        body = not_enabled_body(api_subject)
        if body is not None:
            self._ctx.reply(msg.reply, body)
            # audited in the requester's account, as nats-server does (not counted: that account has no API)
            audit_api_response(self._ctx, msg, body, account_prefix=msg.subject[: -len(api_subject)])
