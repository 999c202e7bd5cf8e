"""CONSUMER.RESET requests: where a consumer starts over, and the errors, as nats-server 2.15.1 answered
them (one server, a stream of three messages; consumers with deliver policy all, new, by_start_sequence 2)."""

from __future__ import annotations

import pytest

from cluster.api.errors import ApiError
from cluster.consumer.config import ConsumerConfig, DeliverPolicy
from cluster.consumer.reset import parse_reset_seq, reset_seq

ALL = ConsumerConfig(durable_name="RA")
NEW = ConsumerConfig(durable_name="RN", deliver_policy=DeliverPolicy.NEW)
BY_SEQ = ConsumerConfig(durable_name="RQ", deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=2)
BY_TIME = ConsumerConfig(durable_name="RT", deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time_ns=5)


def at(payload: bytes, cfg: ConsumerConfig, ack_floor: int = 0) -> int:
    return reset_seq(parse_reset_seq(payload), cfg, ack_floor, lambda ts_ns: 3)


@pytest.mark.parametrize(
    ("payload", "cfg", "ack_floor", "seq"),
    [
        (b"", ALL, 0, 1),  # back to the ack floor
        (b'{"seq":2}', ALL, 0, 2),
        (b'{"x":1}', ALL, 1, 2),  # unknown fields pass: no seq, back to the ack floor
        (b"", NEW, 3, 4),
        (b'{"seq":3}', BY_SEQ, 0, 3),
        (b'{"seq":3}', BY_TIME, 0, 3),
    ],
)
def test_where_a_reset_starts(payload: bytes, cfg: ConsumerConfig, ack_floor: int, seq: int) -> None:
    assert at(payload, cfg, ack_floor) == seq


@pytest.mark.parametrize(
    ("payload", "cfg", "error"),
    [
        (b"{", ALL, (10025, "invalid JSON: unexpected end of JSON input")),
        (b"nul", ALL, (10025, "invalid JSON: unexpected end of JSON input")),
        (
            b'{"seq":"x"}',
            ALL,
            (
                10025,
                "invalid JSON: json: cannot unmarshal string into Go struct field JSApiConsumerResetRequest.seq"
                " of type uint64",
            ),
        ),
        (
            b"[]",
            ALL,
            (10025, "invalid JSON: json: cannot unmarshal array into Go value of type server.JSApiConsumerResetRequest"),
        ),
        (b'{"seq":2}', NEW, (10204, "invalid reset: not allowed")),
        (b'{"seq":1}', BY_SEQ, (10204, "invalid reset: below start seq")),
        (b'{"seq":2}', BY_TIME, (10204, "invalid reset: below start time")),  # in nats-server's source words
    ],
)
def test_what_a_reset_refuses(payload: bytes, cfg: ConsumerConfig, error: tuple[int, str]) -> None:
    with pytest.raises(ApiError) as refused:
        at(payload, cfg)
    assert (refused.value.to_json()["err_code"], refused.value.to_json()["description"]) == error
