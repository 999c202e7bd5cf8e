"""STREAM.CANCEL_MOVE, which nats-server 2.15 serves and jetraft has nothing to do for, gets nats-server's
answer (bodies from a real 2.15.1 cluster) instead of silence."""

from __future__ import annotations

import pytest

from cluster.api.subjects import parse_api_subject
from cluster.api.unimplemented import unimplemented_answer


@pytest.mark.parametrize(
    ("subject", "exists", "expected"),
    [
        (
            "$JS.API.STREAM.CANCEL_MOVE.KS",
            True,
            b'{"type":"io.nats.jetstream.api.v1.stream_cancel_move_response",'
            b'"error":{"code":400,"err_code":10129,"description":"stream reconfiguration not in progress"}}',
        ),
        (
            "$JS.API.STREAM.CANCEL_MOVE.NOPE",
            False,
            b'{"type":"io.nats.jetstream.api.v1.stream_cancel_move_response",'
            b'"error":{"code":404,"err_code":10059,"description":"stream not found"}}',
        ),
    ],
)
def test_answers_as_a_nats_server_cluster(subject: str, exists: bool, expected: bytes) -> None:
    request = parse_api_subject(subject)
    assert request is not None
    assert unimplemented_answer(request, b"", exists) == expected


@pytest.mark.parametrize(
    "subject", ["$JS.API.FOO", "$JS.API.STREAM.TEMPLATE.NAMES", "$JS.API.SERVER.REMOVE", "$JS.API.STREAM.INFO"]
)
def test_what_nats_server_leaves_unanswered_names_no_operation(subject: str) -> None:
    assert parse_api_subject(subject) is None
