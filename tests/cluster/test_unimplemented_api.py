"""API requests nats-server 2.15 serves and jetraft does not implement get nats-server's checks and answers
(bodies from a real 2.15.1 cluster), then a refusal instead of silence."""

from __future__ import annotations

import orjson
import pytest

from cluster.api.subjects import ApiOp, ApiRequest, parse_api_subject
from cluster.api.unimplemented import unimplemented_answer


@pytest.mark.parametrize(
    ("subject", "payload", "exists", "expected"),
    [
        (
            "$JS.API.STREAM.SNAPSHOT.KS",
            b"",
            True,
            b'{"type":"io.nats.jetstream.api.v1.stream_snapshot_response",'
            b'"error":{"code":400,"err_code":10003,"description":"bad request"}}',
        ),
        (
            "$JS.API.STREAM.SNAPSHOT.NOPE",
            b'{"deliver_subject":"snap.x"}',
            False,
            b'{"type":"io.nats.jetstream.api.v1.stream_snapshot_response",'
            b'"error":{"code":404,"err_code":10059,"description":"stream not found"}}',
        ),
        (
            "$JS.API.STREAM.RESTORE.KS",
            b"",
            True,
            b'{"type":"io.nats.jetstream.api.v1.stream_restore_response",'
            b'"error":{"code":400,"err_code":10003,"description":"bad request"},"deliver_subject":""}',
        ),
        (
            "$JS.API.STREAM.CANCEL_MOVE.KS",
            b"",
            True,
            b'{"type":"io.nats.jetstream.api.v1.stream_cancel_move_response",'
            b'"error":{"code":400,"err_code":10129,"description":"stream reconfiguration not in progress"}}',
        ),
    ],
)
def test_answers_as_a_nats_server_cluster(subject: str, payload: bytes, exists: bool, expected: bytes) -> None:
    request = parse_api_subject(subject)
    assert request is not None
    assert unimplemented_answer(request, payload, exists) == expected


@pytest.mark.parametrize(
    ("op", "payload", "err_code"),
    [
        (ApiOp.STREAM_SNAPSHOT, b'{"deliver_subject":"snap.x"}', 10051),
        (ApiOp.STREAM_SNAPSHOT, b"{", 10025),
        (ApiOp.STREAM_RESTORE, b'{"config":{"name":"KS"}}', 10051),
        (ApiOp.STREAM_RESTORE, b'{"config":{"name":"OTHER"}}', 10056),
        (ApiOp.STREAM_CANCEL_MOVE, b"", 10129),
    ],
)
def test_well_formed_requests_are_refused_not_left_unanswered(op: ApiOp, payload: bytes, err_code: int) -> None:
    body = orjson.loads(unimplemented_answer(ApiRequest(op, "KS"), payload, True))
    assert body["error"]["err_code"] == err_code


@pytest.mark.parametrize(
    "subject", ["$JS.API.FOO", "$JS.API.STREAM.TEMPLATE.NAMES", "$JS.API.SERVER.REMOVE", "$JS.API.STREAM.INFO"]
)
def test_what_nats_server_leaves_unanswered_names_no_operation(subject: str) -> None:
    assert parse_api_subject(subject) is None
