"""ADR-42 priority groups: the config checks and pull request checks, with nats-server 2.15.1's codes and
words (the same requests go to both in tests/node/test_consumer_parity.py, which also compares what the
`overflow`, `prioritized` and `pinned_client` policies deliver), and the waiting queue's order."""

from __future__ import annotations

import pytest

from cluster.api.errors import ApiError
from cluster.consumer.config import ConsumerConfig, consumer_config_from_json
from cluster.consumer.config_check import normalize_consumer_config, required_api_level
from cluster.consumer.pull import (
    PullRequest,
    PullRequestError,
    WaitingQueue,
    check_pull_request,
    parse_pull_request,
)
from cluster.stream.config import StreamConfig

STREAM = StreamConfig(name="S", subjects=("s.>",), num_replicas=1)


def _normalized(**config: object) -> ConsumerConfig:
    return normalize_consumer_config(consumer_config_from_json({"durable_name": "c", **config}), STREAM)


@pytest.mark.parametrize(
    ("config", "err_code"),
    [
        ({"priority_policy": "overflow"}, 10159),
        ({"priority_groups": ["g"]}, 10196),
        ({"priority_timeout": 1}, 10197),
        ({"priority_policy": "overflow", "priority_groups": ["g", ""]}, 10161),
        ({"priority_policy": "overflow", "priority_groups": ["seventeen-chars-x"]}, 10162),
        ({"priority_policy": "prioritized", "priority_groups": ["g"], "deliver_subject": "out"}, 10178),
    ],
)
def test_priority_configs_refused_with_nats_servers_error(config: dict[str, object], err_code: int) -> None:
    with pytest.raises(ApiError) as refused:
        _normalized(**config)
    assert refused.value.err_code == err_code


def test_an_unknown_policy_is_a_decoding_error() -> None:
    with pytest.raises(Exception, match='unknown priority policy: "bogus"'):
        consumer_config_from_json({"durable_name": "c", "priority_policy": "bogus"})


def test_accepted_priority_configs() -> None:
    overflow = _normalized(priority_policy="overflow", priority_groups=["g", "h"], priority_timeout=-5)
    assert (overflow.priority_policy, overflow.priority_groups, overflow.priority_timeout) == ("overflow", ("g", "h"), 0)
    assert required_api_level(overflow) == 1
    pinned = _normalized(priority_policy="pinned_client", priority_groups=["g"])
    assert pinned.priority_timeout == 120 * 10**9  # nats-server's two minutes
    none = _normalized(priority_policy="none")
    assert none.priority_policy == "" and "priority_policy" not in none.to_json()
    assert required_api_level(none) == 0


def _refusal(config: ConsumerConfig, body: bytes) -> str | None:
    try:
        check_pull_request(config, parse_pull_request(body))
    except PullRequestError as exc:
        return exc.frame.decode().split("\r\n")[0]
    return None


def test_pull_requests_checked_in_nats_servers_order() -> None:
    overflow = _normalized(priority_policy="overflow", priority_groups=["jobs"], max_expires=10**9, max_bytes=10)
    plain = _normalized()
    assert _refusal(overflow, b'{"batch": 1}') == "NATS/1.0 400 Bad Request - Priority Group missing"
    assert _refusal(overflow, b'{"group": "x"}') == "NATS/1.0 400 Bad Request - Invalid Priority Group"
    assert _refusal(overflow, b'{"group": "jobs", "id": "p"}') == (
        "NATS/1.0 400 Bad Request - Not a Pinned Client Priority consumer"
    )
    assert _refusal(overflow, b'{"group": "jobs", "priority": 10}') == (
        "NATS/1.0 400 Bad Request - Priority must be between 0 and 9"
    )
    assert _refusal(overflow, b'{"group": "jobs", "min_pending": 5}') is None
    assert _refusal(overflow, b"3") is None  # not JSON: no priority group to check
    assert _refusal(plain, b'{"min_ack_pending": 1}') == "NATS/1.0 400 Bad Request - Not a Overflow Priority consumer"
    assert _refusal(plain, b'{"group": "any"}') is None  # a consumer without a policy ignores the group
    # the consumer's limits first: expires before max_bytes, as nats-server checks them
    assert _refusal(overflow, b'{"expires": 2000000000, "max_bytes": 20}') == (
        "NATS/1.0 409 Exceeded MaxRequestExpires of 1s"
    )
    # a heartbeat too large for its expiry is found while the request is read, before any limit
    with pytest.raises(PullRequestError, match="heartbeat value too large"):
        parse_pull_request(b'{"expires": 2000000000, "idle_heartbeat": 1500000000, "max_bytes": 20}')


def _add(queue: WaitingQueue, reply: str, prioritized: bool, **fields: object) -> None:
    queue.add(reply, PullRequest(batch=2, **fields), 0, prioritized=prioritized)  # type: ignore[arg-type]


def test_a_prioritized_queue_serves_the_lowest_number_first_and_in_turn_within_it() -> None:
    queue = WaitingQueue(10)
    _add(queue, "five", True, group="g", priority=5)
    _add(queue, "plain", True)  # not JSON: behind every prioritized request
    _add(queue, "one-a", True, group="g", priority=1)
    _add(queue, "one-b", True, group="g", priority=1)
    order = []
    while (head := queue.peek()) is not None:
        order.append(head.reply)
        queue.served(head, 1, 0, 0, prioritized=True)
    assert order == ["one-a", "one-b", "one-a", "one-b", "five", "five", "plain", "plain"]


def test_an_overflow_queue_passes_over_requests_whose_minimum_is_not_reached() -> None:
    queue = WaitingQueue(10)
    _add(queue, "ten pending", False, group="g", min_pending=10)
    _add(queue, "two unacked", False, group="g", min_ack_pending=2)
    _add(queue, "three pending", False, group="g", min_pending=3)
    assert queue.peek_overflowing(num_pending=2, num_ack_pending=1) is None
    chosen = queue.peek_overflowing(num_pending=3, num_ack_pending=1)
    assert chosen is not None and chosen.reply == "three pending"
    chosen = queue.peek_overflowing(num_pending=0, num_ack_pending=2)
    assert chosen is not None and chosen.reply == "two unacked"
