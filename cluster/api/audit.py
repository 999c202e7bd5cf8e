"""The API audit advisory: nats-server follows every JetStream API response it sends a client with an
`io.nats.jetstream.advisory.v1.api_audit` event on `$JS.EVENT.ADVISORY.API`, in the requester's account.

Published by the node that sent the response, as nats-server's answering server does (`server` names it),
and only while someone listens (nats-server's `publishAdvisory` checks interest too: an unwatched audit
costs one lookup). The client it names is the one its `Nats-Request-Info` header describes: the client's
node stamps it (gateway/connect_options.py), and it travels with the request through the API entry, the meta
leader and a stream or consumer leader. A request without it (a node asking on its own behalf, with an
internal inbox) gets no audit. The API subject the client used travels beside it
(`API_SUBJECT_HEADER`, added by the entry, cluster/api/entry.py), since the answerer sees only the
internal subject the request was passed on to.

Which audits carry the `request` body follows what nats-server 2.15.1 sent in a 3-node cluster
(tests/node/test_api_audit.py compares them): a write answered once its proposal applied (create,
update, delete, purge, message delete, consumer create or delete) carries none when it succeeded; an
error answer, and any read, carries the body when there is one. A MSG.GET that found its message is
answered without an audit (nats-server's stream leader replies to it directly).
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from cluster.api import jsjson
from cluster.api.advisories import ADVISORY_PREFIX, new_event_id
from cluster.runtime.context import NodeContext
from cluster.runtime.internal_requests import INTERNAL_INBOX_PREFIX
from gateway.connect_options import REQUEST_INFO_HEADER
from gateway.headers import HeaderError, decode_headers
from gateway.router import Message
from storage.nats_time import format_rfc3339_nano

API_AUDIT_SUBJECT = ADVISORY_PREFIX + "API"
API_AUDIT_TYPE = "io.nats.jetstream.advisory.v1.api_audit"
# the API subject a client's request came in on, carried to the node that answers it
API_SUBJECT_HEADER = "Jetraft-Api-Subject"
API_PREFIX = "$JS.API."
# API requests answered with messages, never audited (what follows `$JS.API.` or another API prefix)
UNAUDITED_API_TAILS = ("DIRECT.GET.", "CONSUMER.MSG.NEXT.")
# writes whose successful answer nats-server audits without the request body
_WRITES_AUDITED_WITHOUT_REQUEST = tuple(
    API_PREFIX + op
    for op in (
        "STREAM.CREATE.",
        "STREAM.UPDATE.",
        "STREAM.DELETE.",
        "STREAM.PURGE.",
        "STREAM.MSG.DELETE.",
        "CONSUMER.CREATE.",
        "CONSUMER.DURABLE.CREATE.",
        "CONSUMER.DELETE.",
    )
)


def is_error_response(body: bytes) -> bool:
    """A JetStream API response reporting an error (a success never has an `error` key)."""
    return b'"error":' in body


def shown_request(subject: str, request: bytes, response: bytes) -> str:
    """The `request` of an audit: empty (left out) where nats-server leaves it out."""
    if not request or (subject.startswith(_WRITES_AUDITED_WITHOUT_REQUEST) and not is_error_response(response)):
        return ""
    return request.decode(errors="replace")


def api_audit(
    *,
    server: str,
    client: dict[str, Any],
    subject: str,
    request: str,
    response: bytes,
    event_id: str,
    now_ns: int,
    domain: str = "",
) -> bytes:
    """The advisory's body, fields in nats-server's order (JSAPIAudit); empty `request` and `domain`
    left out as its `omitempty` does."""
    body: dict[str, Any] = {
        "type": API_AUDIT_TYPE,
        "id": event_id,
        "timestamp": format_rfc3339_nano(now_ns),
        "server": server,
        "client": client,
        "subject": subject,
    }
    if request:
        body["request"] = request
    body["response"] = response.decode(errors="replace")
    if domain:
        body["domain"] = domain
    return jsjson.dumps(body)


def audited_call(request: Message) -> tuple[str, dict[str, Any]] | None:
    """The API subject and ClientInfo a request carries, or None where it names no client."""
    if not request.headers or REQUEST_INFO_HEADER.encode() not in request.headers:
        return None
    try:
        headers = decode_headers(request.headers)
        client = orjson.loads(headers.get(REQUEST_INFO_HEADER) or "")
    except (HeaderError, orjson.JSONDecodeError):
        return None
    if not isinstance(client, dict):
        return None
    subject = headers.get(API_SUBJECT_HEADER) or request.subject
    return subject, client


def send_api_response(ctx: NodeContext, request: Message, body: bytes, *, audit: bool = True) -> None:
    """Answer a client's JetStream API request, then audit the answer if anyone listens for audits."""
    ctx.api_reply(request.reply, body)
    if audit:
        audit_api_response(ctx, request, body)


def audit_api_response(ctx: NodeContext, request: Message, body: bytes, account_prefix: str = "") -> None:
    """Publish the audit of `body`, the answer to `request`, in the account whose router subjects start with
    `account_prefix` (empty: the JetStream account's), if anyone there listens and a client asked."""
    reply = request.reply
    if not reply or reply.startswith(INTERNAL_INBOX_PREFIX):
        return
    audit_subject = account_prefix + API_AUDIT_SUBJECT
    if not ctx.router.has_interest(audit_subject):
        return
    call = audited_call(request)
    if call is None:
        return
    subject, client = call
    subject = subject.removeprefix(account_prefix)
    advisory = api_audit(
        server=ctx.name,
        client=client,
        subject=subject,
        request=shown_request(subject, request.payload, body),
        response=body,
        event_id=new_event_id(),
        now_ns=time.time_ns(),
        domain=ctx.domain,
    )
    ctx.router.publish(audit_subject, advisory)


__all__ = [
    "API_AUDIT_SUBJECT",
    "API_AUDIT_TYPE",
    "API_SUBJECT_HEADER",
    "UNAUDITED_API_TAILS",
    "api_audit",
    "audit_api_response",
    "audited_call",
    "is_error_response",
    "send_api_response",
    "shown_request",
]
