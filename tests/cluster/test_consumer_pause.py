"""Consumer pause, sans-IO: the PAUSE request and answer, the config it changes, the info fields and
the advisory, byte for byte against what a real nats-server 2.15.1 sent (times fixed)."""

from __future__ import annotations

import json

import pytest

from cluster.api.advisories import consumer_pause
from cluster.api.consumer_subjects import ConsumerOp, parse_consumer_subject
from cluster.api.errors import ApiError, JSErrors
from cluster.consumer.api import ConsumerView, consumer_info
from cluster.consumer.config import ConsumerConfig, consumer_config_from_json
from cluster.consumer.config_check import normalize_consumer_config
from cluster.consumer.pause import (
    is_paused,
    parse_pause_request,
    pause_remaining,
    pause_response,
    with_pause,
)
from cluster.consumer.state import ConsumerState
from cluster.stream.config import StreamConfig
from storage.nats_time import parse_rfc3339_nano

UNTIL_TEXT = "2026-11-25T22:19:07.968775Z"
UNTIL = parse_rfc3339_nano(UNTIL_TEXT)
S = 1_000_000_000


def test_pause_request_bodies_read_as_the_server_reads_them() -> None:
    assert parse_pause_request(json.dumps({"pause_until": UNTIL_TEXT}).encode()) == UNTIL
    # resume: nothing, not JSON at all, no field, the zero time
    for body in (b"", b"garbage", b"  {}", b'{"pause_until": null}', b'{"pause_until":"0001-01-01T00:00:00Z"}'):
        assert parse_pause_request(body) is None, body
    with pytest.raises(ApiError) as array:
        parse_pause_request(b"[]")
    assert array.value.to_json() == {
        "code": 400,
        "err_code": 10025,
        "description": "invalid JSON: json: cannot unmarshal array into Go value of type "
        "server.JSApiConsumerPauseRequest",
    }
    with pytest.raises(ApiError) as number:
        parse_pause_request(b'{"pause_until": 5}')
    assert number.value.to_json()["description"] == (
        "invalid JSON: json: cannot unmarshal number into Go struct field "
        "JSApiConsumerPauseRequest.pause_until of type time.Time"
    )
    with pytest.raises(ApiError):
        parse_pause_request(b'{"pause_until": "tomorrow"}')


def test_pause_answers_as_the_server_does() -> None:
    before = UNTIL - 1_999_389_968
    assert pause_response(UNTIL, before) == (
        b'{"type":"io.nats.jetstream.api.v1.consumer_pause_response","paused":true,'
        b'"pause_until":"2026-11-25T22:19:07.968775Z","pause_remaining":1999389968}'
    )
    assert pause_response(None, before) == (
        b'{"type":"io.nats.jetstream.api.v1.consumer_pause_response","paused":false,'
        b'"pause_until":"0001-01-01T00:00:00Z"}'
    )
    # a time already past is stored and answered, but pauses nothing
    assert pause_response(UNTIL, UNTIL + 1) == (
        b'{"type":"io.nats.jetstream.api.v1.consumer_pause_response","paused":false,'
        b'"pause_until":"2026-11-25T22:19:07.968775Z"}'
    )


def test_pause_errors_carry_the_answers_zero_fields() -> None:
    request = parse_consumer_subject("$JS.API.CONSUMER.PAUSE.P2.nope")
    assert request is not None and (request.op, request.stream, request.consumer) == (ConsumerOp.PAUSE, "P2", "nope")
    assert request.error_body(JSErrors.CONSUMER_NOT_FOUND()) == (
        b'{"type":"io.nats.jetstream.api.v1.consumer_pause_response","error":{"code":404,"err_code":10014,'
        b'"description":"consumer not found"},"paused":false,"pause_until":"0001-01-01T00:00:00Z"}'
    )
    assert parse_consumer_subject("$JS.API.CONSUMER.PAUSE.P2") is None  # the server does not answer


def test_a_pause_is_part_of_the_config_and_raises_its_api_level() -> None:
    stream = StreamConfig(name="P2", subjects=("p2.>",))
    plain = normalize_consumer_config(ConsumerConfig(durable_name="d"), stream)
    assert plain.metadata["_nats.req.level"] == "0"
    paused = with_pause(plain, UNTIL)
    assert paused.metadata["_nats.req.level"] == "1"
    assert paused.to_json()["pause_until"] == UNTIL_TEXT
    # it travels in the meta group's assignment, so every replica and any later leader has it
    assert consumer_config_from_json(json.loads(paused.to_bytes())) == paused
    assert with_pause(paused, None) == plain
    created = normalize_consumer_config(ConsumerConfig(durable_name="e", pause_until_ns=UNTIL), stream)
    assert created.pause_until_ns == UNTIL and created.metadata["_nats.req.level"] == "1"
    # created with Go's zero time: nats-server 2.15.1 keeps and prints it, at level 0, paused never
    zero = consumer_config_from_json({"durable_name": "z", "pause_until": "0001-01-01T00:00:00Z"})
    zero = normalize_consumer_config(zero, stream)
    assert zero.to_json()["pause_until"] == "0001-01-01T00:00:00Z" and zero.metadata["_nats.req.level"] == "0"
    assert not is_paused(zero, 0) and consumer_config_from_json(json.loads(zero.to_bytes())) == zero
    assert is_paused(paused, UNTIL - 1) and not is_paused(paused, UNTIL) and not is_paused(plain, 0)
    assert pause_remaining(paused, UNTIL - 5) == 5 and pause_remaining(paused, UNTIL + 5) == 0


def test_info_of_a_paused_consumer() -> None:
    cfg = with_pause(ConsumerConfig(durable_name="d"), UNTIL)
    view = ConsumerView("P2", "d", UNTIL - 10 * S, cfg, ConsumerState(cfg.ack_policy), 0, pause_remaining_ns=1996941433)
    info = consumer_info(view, UNTIL - 2 * S)
    keys = list(info)
    assert keys[keys.index("num_pending") + 1 :] == ["paused", "pause_remaining", "ts"]
    assert (info["paused"], info["pause_remaining"]) == (True, 1996941433)
    running = consumer_info(ConsumerView("P2", "d", 0, cfg, ConsumerState(cfg.ack_policy), 0), 0)
    assert "paused" not in running and "pause_remaining" not in running


def test_pause_advisory_as_the_server_sends_it() -> None:
    sent = consumer_pause("P2", "d", UNTIL, "3hOF1D121CB4332NtbKSx4", parse_rfc3339_nano("2026-11-25T22:19:05.969309698Z"))
    assert sent == (
        b'{"type":"io.nats.jetstream.advisory.v1.consumer_pause","id":"3hOF1D121CB4332NtbKSx4",'
        b'"timestamp":"2026-11-25T22:19:05.969309698Z","stream":"P2","consumer":"d","paused":true,'
        b'"pause_until":"2026-11-25T22:19:07.968775Z"}'
    )
    resumed = consumer_pause("P2", "d", None, "x", UNTIL)
    assert json.loads(resumed)["paused"] is False and json.loads(resumed)["pause_until"] == "0001-01-01T00:00:00Z"
    ran_out = consumer_pause("P2", "d", UNTIL, "x", UNTIL + 1)
    assert json.loads(ran_out)["paused"] is False and json.loads(ran_out)["pause_until"] == UNTIL_TEXT
