"""The account's JetStream limits as pure checks: reservations, updates, consumer defaults and caps."""

from __future__ import annotations

import dataclasses

import pytest

from cluster.api.errors import ApiError, JSErrors
from cluster.consumer.config import AckPolicy, ConsumerConfig
from cluster.consumer.config_check import normalize_consumer_config
from cluster.meta.account_limits import check_create_limits, check_update_limits, reserved_bytes
from cluster.runtime.account_limits import JetStreamAccountLimits
from cluster.runtime.account_usage import (
    USAGE_STALE,
    AccountUsage,
    ApiCounts,
    encode_usage,
    is_error_response,
)
from cluster.runtime.server_limits import ServerJetStreamLimits
from cluster.stream.config import StorageType, StreamConfig, stream_config_from_json
from cluster.stream.config_check import normalize_stream_config
from cluster.stream.publish import exceeds_account_bytes

LIMITS = JetStreamAccountLimits(max_memory=1000, max_storage=10_000, max_streams=3, max_ack_pending=100)


def _stream(name: str, max_bytes: int = -1, replicas: int = 1, memory: bool = False) -> StreamConfig:
    storage = StorageType.MEMORY if memory else StorageType.FILE
    return normalize_stream_config(
        StreamConfig(name=name, subjects=(name,), max_bytes=max_bytes, num_replicas=replicas, storage=storage)
    )


def test_reserved_bytes_are_the_max_bytes_set_by_storage_type() -> None:
    streams = [_stream("A", 100), _stream("B"), _stream("C", 7, memory=True), _stream("D", 50, replicas=3)]
    assert reserved_bytes(streams) == (7, 150)


def test_a_replicated_stream_reserves_its_bytes_on_every_replica() -> None:
    existing = {"A": _stream("A", 3000, replicas=3)}  # 9000 of 10000
    check_create_limits(_stream("B", 1000), existing, LIMITS)
    with pytest.raises(ApiError) as raised:
        check_create_limits(_stream("B", 1000, replicas=3), existing, LIMITS)
    assert raised.value == JSErrors.STORAGE_RESOURCES_EXCEEDED()


def test_a_stream_without_max_bytes_needs_one_byte_free() -> None:
    full = {"A": _stream("A", 10_000)}
    with pytest.raises(ApiError) as raised:
        check_create_limits(_stream("B"), full, LIMITS)
    assert raised.value == JSErrors.STORAGE_RESOURCES_EXCEEDED()
    check_create_limits(_stream("B", memory=True), full, LIMITS)  # memory is counted apart


def test_the_stream_count_leaves_out_the_stream_being_created() -> None:
    three = {name: _stream(name, 10) for name in "ABC"}
    check_create_limits(_stream("C", 10), three, LIMITS)
    with pytest.raises(ApiError) as raised:
        check_create_limits(_stream("D", 10), three, LIMITS)
    assert raised.value == JSErrors.MAXIMUM_STREAMS_LIMIT()


def test_an_update_counts_its_own_new_reservation_once() -> None:
    streams = {"A": _stream("A", 4000), "B": _stream("B", 4000)}
    check_update_limits(streams["B"], _stream("B", 6000), streams, LIMITS)
    with pytest.raises(ApiError) as raised:
        check_update_limits(streams["B"], _stream("B", 6001), streams, LIMITS)
    assert raised.value == JSErrors.STORAGE_RESOURCES_EXCEEDED()
    check_update_limits(streams["B"], _stream("B", 10), streams, LIMITS)  # shrinking is always allowed


def test_consumer_max_ack_pending_defaults_to_the_account_limit_and_is_capped_by_it() -> None:
    stream = _stream("A", 10)
    explicit = ConsumerConfig(durable_name="d", ack_policy=AckPolicy.EXPLICIT)
    assert normalize_consumer_config(explicit, stream, None, 100).max_ack_pending == 100
    assert normalize_consumer_config(explicit, stream, None, 5000).max_ack_pending == 1000
    assert normalize_consumer_config(explicit, stream).max_ack_pending == 1000
    over = ConsumerConfig(durable_name="d", ack_policy=AckPolicy.EXPLICIT, max_ack_pending=101)
    with pytest.raises(ApiError) as raised:
        normalize_consumer_config(over, stream, None, 100)
    assert raised.value == JSErrors.CONSUMER_MAX_PENDING_ACK_EXCESS(limit=100)


def test_usage_heard_from_other_nodes_counts_until_stale_and_local_replicas_count_as_they_are() -> None:
    usage = AccountUsage()
    usage.record(encode_usage({"A": (False, 100), "B": (True, 7), "C": (False, 30)}), now=10.0)
    usage.record(b"not json", now=10.0)
    assert usage.total(in_memory=False, except_stream="X", now=11.0) == 130
    assert usage.total(in_memory=False, except_stream="A", now=11.0) == 30
    assert usage.total(in_memory=True, except_stream="X", now=11.0) == 7
    usage.count_local(lambda: {"A": (False, 250)})  # a replica here: what it holds now, not what was heard
    assert usage.total(in_memory=False, except_stream="X", now=11.0) == 280
    assert usage.total(in_memory=False, except_stream="X", now=10.0 + USAGE_STALE + 1) == 250


def test_a_publish_is_checked_with_the_message_on_every_replica() -> None:
    limits = JetStreamAccountLimits(max_storage=300)
    usage = AccountUsage()
    r1, r3 = _stream("S", replicas=1), _stream("S", replicas=3)
    assert not exceeds_account_bytes(r1, limits, usage, lambda: 3 * 71, "s", b"", b"x" * 40)  # 284 of 300
    assert exceeds_account_bytes(r1, limits, usage, lambda: 4 * 71, "s", b"", b"x" * 40)
    assert exceeds_account_bytes(r3, limits, usage, lambda: 71, "s", b"", b"x" * 40)  # (71 + 71) * 3
    unread = lambda: pytest.fail("the store is read though memory has no limit")  # noqa: E731
    assert not exceeds_account_bytes(_stream("M", memory=True), limits, usage, unread, "s", b"", b"x")


def test_an_api_response_is_an_error_by_its_top_level_error_only() -> None:
    assert is_error_response(b'{"type":"io.nats.jetstream.api.v1.stream_create_response","error":{"code":400}}')
    assert not is_error_response(b'{"type":"io.nats.jetstream.api.v1.stream_info_response","config":{}}')
    # a mirror's error inside a stream info is not the response's
    assert not is_error_response(b'{"type":"t","total":1,"mirror":{"error":{"code":503}}}')
    assert not is_error_response(b'{"error":{"code":400}}')


def test_api_counts_add_up_every_nodes_latest_report() -> None:
    here, there = ApiCounts(), ApiCounts()
    here.count(b'{"type":"t","error":{}}')
    there.count(b'{"type":"t","ok":1}')
    there.count(b'{"type":"t","ok":1}')
    here.record(there.encode("n2"), own_node="n1")
    here.record(here.encode("n1"), own_node="n1")  # its own report comes back: not counted twice
    here.record(b"[1]", own_node="n1")
    assert here.cluster_totals() == (3, 1)
    there.count(b'{"type":"t","error":{}}')
    here.record(there.encode("n2"), own_node="n1")  # the latest replaces the last
    assert here.cluster_totals() == (4, 2)


def test_the_servers_consumer_limits_come_before_the_accounts() -> None:
    stream = stream_config_from_json({"name": "S", "subjects": ["s"]})
    explicit = ConsumerConfig(durable_name="d", ack_policy=AckPolicy.EXPLICIT)
    server = ServerJetStreamLimits(max_ack_pending=100, max_request_batch=10)
    chosen = normalize_consumer_config(explicit, stream, None, 500, server)
    assert (chosen.max_ack_pending, chosen.max_batch) == (100, 10)
    assert normalize_consumer_config(explicit, stream, None, 50, server).max_ack_pending == 50
    with pytest.raises(ApiError, match="system limit of 100"):
        normalize_consumer_config(dataclasses.replace(explicit, max_ack_pending=101), stream, None, 500, server)
    with pytest.raises(ApiError, match="server limit of 10"):
        normalize_consumer_config(dataclasses.replace(explicit, max_batch=11), stream, None, -1, server)
    push = dataclasses.replace(explicit, deliver_subject="out")
    assert normalize_consumer_config(push, stream, None, -1, server).max_batch == 0
