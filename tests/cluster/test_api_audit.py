"""The API audit advisory as one node builds and sends it (cluster/api/audit.py): which audits carry the
request, the advisory's shape, and that only a client's request answered on a client's inbox is audited,
once, and only while someone listens. Side by side with nats-server: tests/node/test_api_audit.py."""

from __future__ import annotations

import json
from pathlib import Path

from cluster.api.audit import (
    API_AUDIT_SUBJECT,
    API_AUDIT_TYPE,
    API_SUBJECT_HEADER,
    api_audit,
    audited_call,
    send_api_response,
    shown_request,
)
from cluster.runtime.context import NodeContext
from cluster.runtime.internal_requests import INTERNAL_INBOX_PREFIX, InternalRequester
from cluster.runtime.metrics import NodeMetrics
from gateway.connect_options import REQUEST_INFO_HEADER
from gateway.headers import encode_headers
from gateway.router import Message, Router

CLIENT = {"id": 3, "acc": "$G", "name": "app", "server": "n2", "kind": "Client", "client_type": "nats"}
OK = b'{"type":"io.nats.jetstream.api.v1.stream_create_response","did_create":true}'
ERROR = b'{"type":"io.nats.jetstream.api.v1.stream_create_response","error":{"code":400}}'


def node(router: Router, domain: str = "") -> NodeContext:
    return NodeContext(
        name="n1",
        router=router,
        host=None,  # type: ignore[arg-type]  # answering and auditing never touch Raft
        metrics=NodeMetrics("n1"),
        requester=InternalRequester(router, "n1"),
        data_dir=Path("/nonexistent"),
        members=("n1",),
        domain=domain,
    )


def request(subject: str, payload: bytes, reply: str = "_INBOX.a", client: bool = True) -> Message:
    fields = [(REQUEST_INFO_HEADER, json.dumps(CLIENT))] if client else []
    fields.append((API_SUBJECT_HEADER, subject))
    return Message("$JSR.M.X", reply, encode_headers(fields), payload)


def test_a_write_that_succeeded_is_audited_without_its_request_an_error_with_it() -> None:
    body = b'{"name":"S"}'
    assert shown_request("$JS.API.STREAM.CREATE.S", body, OK) == ""
    assert shown_request("$JS.API.STREAM.CREATE.S", body, ERROR) == '{"name":"S"}'
    assert shown_request("$JS.API.CONSUMER.DURABLE.CREATE.S.C", body, OK) == ""
    assert shown_request("$JS.API.STREAM.NAMES", b'{"offset":0}', OK) == '{"offset":0}'
    assert shown_request("$JS.API.STREAM.INFO.S", b"", OK) == ""


def test_the_advisory_has_nats_servers_fields_in_its_order() -> None:
    body = json.loads(
        api_audit(
            server="n1",
            client=CLIENT,
            subject="$JS.API.STREAM.NAMES",
            request='{"subject":"a.>"}',
            response=OK,
            event_id="ID",
            now_ns=1_700_000_000_123_456_789,
            domain="hub",
        )
    )
    assert list(body) == ["type", "id", "timestamp", "server", "client", "subject", "request", "response", "domain"]
    assert body["type"] == API_AUDIT_TYPE and body["timestamp"] == "2023-11-14T22:13:20.123456789Z"
    assert body["client"] == CLIENT and body["response"] == OK.decode()
    bare = json.loads(
        api_audit(server="n1", client=CLIENT, subject="s", request="", response=OK, event_id="ID", now_ns=1)
    )
    assert "request" not in bare and "domain" not in bare


def test_a_request_naming_no_client_is_not_audited() -> None:
    assert audited_call(request("$JS.API.INFO", b"", client=False)) is None
    assert audited_call(Message("$JS.API.INFO", "_INBOX.a", None, b"")) is None
    assert audited_call(request("$JS.API.INFO", b"")) == ("$JS.API.INFO", CLIENT)


def test_a_clients_request_is_answered_then_audited_once_while_someone_listens() -> None:
    router = Router()
    ctx = node(router, domain="hub")
    seen: list[Message] = []
    router.subscribe("_INBOX.>", seen.append)
    send_api_response(ctx, request("$JS.API.STREAM.CREATE.S", b'{"name":"S"}'), ERROR)
    assert [msg.subject for msg in seen] == ["_INBOX.a"]  # nobody listens for audits: none sent

    router.subscribe(API_AUDIT_SUBJECT, seen.append)
    seen.clear()
    send_api_response(ctx, request("$JS.API.STREAM.CREATE.S", b'{"name":"S"}'), ERROR)
    assert [msg.subject for msg in seen] == ["_INBOX.a", API_AUDIT_SUBJECT]
    audit = json.loads(seen[1].payload)
    assert audit["server"] == "n1" and audit["subject"] == "$JS.API.STREAM.CREATE.S"
    assert audit["request"] == '{"name":"S"}' and audit["domain"] == "hub" and audit["client"] == CLIENT

    seen.clear()
    send_api_response(ctx, request("$JS.API.INFO", b"", reply=INTERNAL_INBOX_PREFIX + "n2.1"), OK)
    send_api_response(ctx, request("$JS.API.INFO", b"", client=False), OK)
    send_api_response(ctx, request("$JS.API.STREAM.MSG.GET.S", b'{"seq":1}'), OK, audit=False)
    assert [msg.subject for msg in seen] == ["_INBOX.a", "_INBOX.a"]
