"""Consumer configs: nats-py's create requests from the traces give nats-server's exact config JSON,
and invalid configs get nats-server 2.15's error (code, err_code, description, probed on a real server)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from cluster.api.errors import ApiError
from cluster.consumer.config import (
    AckPolicy,
    ConsumerConfig,
    CreateAction,
    consumer_config_from_bytes,
    parse_create_request,
)
from cluster.consumer.config_check import (
    check_create_request,
    decide_create,
    normalize_consumer_config,
    parse_create_subject,
)
from cluster.stream.config import ConsumerLimits, Retention, StreamConfig
from tests.cluster.trace_data import section

STREAMS = {
    "WORK": StreamConfig(name="WORK", subjects=("work.>",), num_replicas=1),
    "FLOW": StreamConfig(name="FLOW", subjects=("flow.>",), num_replicas=1),
    "KV_cfg": StreamConfig(name="KV_cfg", subjects=("$KV.cfg.>",), num_replicas=1),
    "S": StreamConfig(name="S", subjects=("s.>",), num_replicas=1),
    "WQ": StreamConfig(name="WQ", subjects=("wq.>",), retention=Retention.WORKQUEUE, num_replicas=1),
}


def create(subject: str, body: bytes, others: dict[str, ConsumerConfig] | None = None) -> ConsumerConfig:
    """What a node does with a create request, up to the config it stores."""
    parsed_subject = parse_create_subject(subject)
    assert parsed_subject is not None
    request = parse_create_request(body)
    config = check_create_request(parsed_subject, request)
    return normalize_consumer_config(config, STREAMS[parsed_subject.stream], others)


def create_exchange(trace: str, marker: str) -> tuple[str, bytes, dict]:
    """The consumer create request nats-py sent in that section, and the server's JSON answer."""
    lines = section(trace, marker)
    for i, line in enumerate(lines):
        if line.startswith("C: PUB $JS.API.CONSUMER.") and ".CREATE." in line:
            subject = line.split()[2]
            body = lines[i + 1].split(": ", 1)[1].encode()
            answer = next(x for x in lines[i + 2 :] if x.startswith("S: {"))
            return subject, body, json.loads(answer.split(": ", 1)[1])
    raise LookupError(marker)


TRACE_CREATES = [
    ("11-pull-consumer.txt", "add_consumer"),
    ("12-ordered-push-flow-control.txt", "js.subscribe"),
    ("10-kv.txt", "kv.history"),
    ("10-kv.txt", "kv.keys"),
    ("10-kv.txt", "kv.watch"),
]


@pytest.mark.parametrize(("trace", "marker"), TRACE_CREATES)
def test_trace_create_requests_give_the_servers_config_json(trace: str, marker: str) -> None:
    subject, body, expected = create_exchange(trace, marker)
    config = create(subject, body)
    # field order too: dicts keep it, so compare the item lists (an ephemeral's generated name is kept
    # beside the config by the node, and the server leaves it out of the config too)
    assert list(config.to_json("2.15.1").items()) == list(expected["config"].items())


def test_config_survives_its_stored_bytes() -> None:
    subject, body, _ = create_exchange("11-pull-consumer.txt", "add_consumer")
    config = create(subject, body)

    assert consumer_config_from_bytes(config.to_bytes()) == config


# (subject, config, expected error or None) from nats-server 2.15.1
_BAD = [
    ("CREATE.S", {"deliver_policy": "bogus"}, (400, 10025, 'invalid JSON: can not unmarshal "\\"bogus\\""')),
    ("CREATE.S", {"ack_policy": "bogus"}, (400, 10025, 'invalid JSON: can not unmarshal "\\"bogus\\""')),
    (
        "CREATE.S",
        {"durable_name": "D1"},
        (400, 10020, "consumer expected to be ephemeral but a durable name was set in request"),
    ),
    (
        "DURABLE.CREATE.S.DX",
        {},
        (400, 10018, "consumer expected to be durable but a durable name was not set"),
    ),
    (
        "DURABLE.CREATE.S.DY",
        {"durable_name": "DZ"},
        (400, 10017, "consumer name in subject does not match durable name in request"),
    ),
    (
        "CREATE.WQ.D2",
        {"durable_name": "D2", "ack_policy": "none"},
        (400, 10084, "consumer in pull mode requires explicit ack policy on workqueue stream"),
    ),
    (
        "CREATE.WQ.D6",
        {"durable_name": "D6", "ack_policy": "all", "deliver_subject": "dd"},
        (400, 10098, "workqueue stream requires explicit ack"),
    ),
    (
        "CREATE.WQ.D5",
        {"durable_name": "D5", "ack_policy": "explicit", "deliver_policy": "last"},
        (400, 10101, "consumer must be deliver all on workqueue stream"),
    ),
    (
        "CREATE.S.P4",
        {"deliver_policy": "by_start_sequence"},
        (
            400,
            10094,
            "consumer delivery policy is deliver by start sequence, but optional start sequence is not set",
        ),
    ),
    (
        "CREATE.S.P6",
        {"deliver_policy": "by_start_time"},
        (400, 10094, "consumer delivery policy is deliver by start time, but optional start time is not set"),
    ),
    (
        "CREATE.S.P8",
        {"opt_start_seq": 3},
        (400, 10094, "consumer delivery policy is deliver all, but optional start sequence is also set"),
    ),
    (
        "CREATE.S.X11",
        {"deliver_policy": "new", "opt_start_time": "2024-01-01T00:00:00Z"},
        (400, 10094, "consumer delivery policy is deliver new, but optional start time is also set"),
    ),
    (
        "CREATE.S.X28",
        {"deliver_policy": "last", "opt_start_seq": 3},
        (400, 10094, "consumer delivery policy is deliver last, but optional start sequence is also set"),
    ),
    (
        "CREATE.S.P22",
        {"deliver_policy": "last_per_subject"},
        (
            400,
            10094,
            "consumer delivery policy is deliver last per subject, but optional filter subject is not set",
        ),
    ),
    (
        "CREATE.S.P10",
        {"filter_subjects": ["s.a", "s.>"]},
        (400, 10138, "consumer subject filters cannot overlap"),
    ),
    (
        "CREATE.S.P11",
        {"filter_subjects": ["s.a"], "filter_subject": "s.b"},
        (400, 10136, "consumer cannot have both FilterSubject and FilterSubjects specified"),
    ),
    (
        "CREATE.S.P12",
        {"deliver_subject": "x", "max_waiting": 5},
        (400, 10080, "consumer in push mode can not set max waiting"),
    ),
    (
        "CREATE.S.P16",
        {"deliver_subject": "x", "flow_control": True},
        (400, 10108, "consumer with flow control also needs heartbeats"),
    ),
    (
        "CREATE.S.P18",
        {"idle_heartbeat": 1000000000},
        (400, 10088, "consumer idle heartbeat requires a push based consumer"),
    ),
    ("CREATE.S.X13", {"filter_subject": "bad..subj"}, (500, 10052, "invalid subject")),
    (
        "CREATE.S.X15",
        {"sample_freq": "abc"},
        (
            400,
            10095,
            'failed to parse consumer sampling configuration: strconv.Atoi: parsing "abc": invalid syntax',
        ),
    ),
    ("CREATE.S.X16", {"deliver_subject": "s.foo"}, (400, 10081, "consumer deliver subject forms a cycle")),
    (
        "CREATE.S.X20",
        {"ack_policy": "explicit", "backoff": [1000000000, 5], "max_deliver": 1},
        (400, 10116, "max deliver is required to be > length of backoff values"),
    ),
    ("CREATE.S.X27", {"max_expires": 100}, (400, 10115, "consumer max request expires needs to be >= 1ms")),
    (
        "CREATE.S.P24",
        {"ack_policy": "explicit", "ack_wait": -1},
        (400, 10183, "consumer ack wait needs to be positive"),
    ),
    (
        "CREATE.S.F1.s.a",
        {},
        (400, 10131, "Consumer create request did not match filtered subject from create subject"),
    ),
    ("CREATE.S.X30", {"deliver_subject": "dx", "rate_limit_bps": -1}, None),
]


@pytest.mark.parametrize(
    ("tail", "config", "expected"), _BAD, ids=[row[0] + json.dumps(row[1]) for row in _BAD]
)
def test_invalid_configs_get_the_servers_errors(
    tail: str, config: dict, expected: tuple[int, int, str] | None
) -> None:
    stream = tail.split(".")[1] if tail.startswith("CREATE") else tail.split(".")[2]
    body = json.dumps({"stream_name": stream, "config": config}).encode()
    with pytest.raises(ApiError) as caught:
        create("$JS.API.CONSUMER." + tail, body)
    if expected is None:
        assert caught.value.err_code == 10025
    else:
        assert (caught.value.code, caught.value.err_code, caught.value.description) == expected


def test_stream_name_must_match_the_subject() -> None:
    with pytest.raises(ApiError) as caught:
        create("$JS.API.CONSUMER.CREATE.S", b"")
    assert caught.value.err_code == 10056


def test_defaults_as_the_server_fills_them() -> None:
    body = json.dumps({"stream_name": "S", "config": {"max_deliver": 0, "max_waiting": -5}}).encode()
    config = create("$JS.API.CONSUMER.CREATE.S", body)
    assert (config.max_deliver, config.max_waiting, config.inactive_threshold) == (-1, 512, 5_000_000_000)
    body = json.dumps(
        {"stream_name": "S", "config": {"durable_name": "D", "ack_policy": "explicit"}}
    ).encode()
    config = create("$JS.API.CONSUMER.CREATE.S.D", body)
    assert (config.ack_wait, config.max_ack_pending, config.inactive_threshold) == (30_000_000_000, 1000, 0)
    body = json.dumps(
        {"stream_name": "S", "config": {"name": "B", "backoff": [2, 4], "ack_wait": 500, "max_deliver": 5}}
    ).encode()
    assert create("$JS.API.CONSUMER.CREATE.S.B", body).ack_wait == 2


LIMITED = StreamConfig(
    name="L", subjects=("l.>",), num_replicas=1, consumer_limits=ConsumerLimits(inactive_threshold=5 * 10**9, max_ack_pending=100)
)


def test_the_streams_consumer_limits_are_every_consumers_defaults() -> None:
    """nats-server 2.15.1: a durable takes the stream's inactive_threshold, an ack-none consumer its
    max_ack_pending; an inactive_threshold above the limit is refused (10153)."""
    durable = normalize_consumer_config(ConsumerConfig(durable_name="d", ack_policy=AckPolicy.EXPLICIT), LIMITED)
    assert (durable.inactive_threshold, durable.max_ack_pending) == (5 * 10**9, 100)
    assert normalize_consumer_config(ConsumerConfig(durable_name="n", ack_policy=AckPolicy.NONE), LIMITED).max_ack_pending == 100
    with pytest.raises(ApiError) as info:
        normalize_consumer_config(ConsumerConfig(durable_name="x", inactive_threshold=9 * 10**9), LIMITED)
    assert info.value.to_json() == {
        "code": 400,
        "err_code": 10153,
        "description": "consumer inactive threshold exceeds system limit of 5s",
    }


@pytest.mark.parametrize(
    ("config", "stream", "description"),
    [
        # nats-server 2.15.1's answers to the same requests with `pedantic: true`
        (ConsumerConfig(durable_name="c", max_deliver=-5), STREAMS["WORK"], "max_deliver must be set to -1"),
        (ConsumerConfig(durable_name="c", max_waiting=-1), STREAMS["WORK"], "max_waiting must not be negative"),
        (ConsumerConfig(durable_name="c", max_batch=-1), STREAMS["WORK"], "max_batch must not be negative"),
        (
            ConsumerConfig(durable_name="c", ack_policy=AckPolicy.EXPLICIT, backoff=(10**9, 2 * 10**9)),
            STREAMS["WORK"],
            "first backoff value has to equal batch AckWait",
        ),
        (
            ConsumerConfig(durable_name="c", ack_policy=AckPolicy.EXPLICIT),
            LIMITED,
            "max_ack_pending must be set if it's configured in stream limits",
        ),
        (
            ConsumerConfig(durable_name="c", ack_policy=AckPolicy.EXPLICIT, max_ack_pending=50),
            LIMITED,
            "inactive_threshold must be set if it's configured in stream limits",
        ),
    ],
)
def test_pedantic_mode_refuses_what_nats_server_would_adjust(
    config: ConsumerConfig, stream: StreamConfig, description: str
) -> None:
    normalize_consumer_config(config, stream)  # adjusted and accepted without it
    with pytest.raises(ApiError) as info:
        normalize_consumer_config(config, stream, pedantic=True)
    assert (info.value.err_code, info.value.description) == (10157, f"pedantic mode: {description}")


def test_pedantic_mode_takes_a_config_that_needs_no_adjusting() -> None:
    config = ConsumerConfig(
        durable_name="c", ack_policy=AckPolicy.EXPLICIT, ack_wait=10**9, backoff=(10**9,), max_deliver=5
    )
    assert normalize_consumer_config(config, STREAMS["WORK"], pedantic=True).ack_wait == 10**9
    body = json.dumps({"stream_name": "S", "config": {"durable_name": "D"}, "pedantic": True}).encode()
    assert parse_create_request(body).pedantic


def test_a_name_in_the_subject_wins() -> None:
    body = json.dumps({"stream_name": "S", "config": {"name": "Y"}}).encode()
    assert create("$JS.API.CONSUMER.CREATE.S.Z", body).name == "Z"


def test_workqueue_filters_must_not_overlap() -> None:
    first = create(
        "$JS.API.CONSUMER.CREATE.WQ.D3",
        json.dumps(
            {
                "stream_name": "WQ",
                "config": {"durable_name": "D3", "ack_policy": "explicit", "filter_subject": "wq.a"},
            }
        ).encode(),
    )
    body = {
        "stream_name": "WQ",
        "config": {"durable_name": "D4", "ack_policy": "explicit", "filter_subject": "wq.>"},
    }
    with pytest.raises(ApiError) as caught:
        create("$JS.API.CONSUMER.CREATE.WQ.D4", json.dumps(body).encode(), {"D3": first})
    assert caught.value.err_code == 10100
    body["config"]["filter_subject"] = "wq.b"
    assert (
        create("$JS.API.CONSUMER.CREATE.WQ.D4", json.dumps(body).encode(), {"D3": first}).filter_subject
        == "wq.b"
    )


def test_create_or_update_decisions() -> None:
    base = normalize_consumer_config(ConsumerConfig(durable_name="P1"), STREAMS["S"])
    assert decide_create(CreateAction.CREATE_OR_UPDATE, base, base) is None
    changed = dataclasses.replace(base, max_ack_pending=7)
    assert decide_create(CreateAction.UPDATE, base, changed) == changed
    with pytest.raises(ApiError) as caught:
        decide_create(CreateAction.CREATE, base, changed)
    assert (caught.value.err_code, caught.value.description) == (10148, "consumer already exists")
    with pytest.raises(ApiError) as caught:
        decide_create(CreateAction.UPDATE, None, changed)
    assert caught.value.err_code == 10149
    for update, message in [
        ({"ack_policy": AckPolicy.EXPLICIT}, "ack policy can not be updated"),
        ({"deliver_subject": "ds"}, "can not update pull consumer to push based"),
    ]:
        with pytest.raises(ApiError) as caught:
            decide_create(CreateAction.CREATE_OR_UPDATE, base, dataclasses.replace(base, **update))
        assert (caught.value.code, caught.value.err_code, caught.value.description) == (500, 10012, message)


def test_a_filter_in_the_create_subject_and_filter_subjects_in_the_body_is_refused_first() -> None:
    # nats-server 2.15.1: 10137 comes before the filter mismatch (10131) that the body's lack of a
    # `filter_subject` would also be
    body = json.dumps({"stream_name": "S", "config": {"name": "C", "filter_subjects": ["s.a", "s.b"]}})
    with pytest.raises(ApiError) as refused:
        create("$JS.API.CONSUMER.CREATE.S.C.s.a", body.encode())
    assert refused.value.to_json() == {
        "code": 400,
        "err_code": 10137,
        "description": "consumer with multiple subject filters cannot use subject based API",
    }
