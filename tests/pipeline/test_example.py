"""The order-totals example pipeline: stream -> Spark aggregation -> KV bucket, checked against Python."""

from __future__ import annotations

import json
from decimal import Decimal

import nats

from pipeline.examples.order_totals import _parser, expected_totals, run_order_totals, seed_orders
from tests.pipeline.servers import JetStreamTarget
from tests.pipeline.streams import run

STREAM = "EXAMPLE_ORDERS"
PREFIX = "example_orders"
BUCKET = "example_totals"


async def kv_values(servers: list[str], bucket: str, keys: list[str]) -> dict[str, tuple[int, Decimal]]:
    nc = await nats.connect(servers)
    try:
        kv = await nc.jetstream().key_value(bucket)
        values = {}
        for key in keys:
            entry = await kv.get(key)
            assert entry.value is not None
            value = json.loads(entry.value, parse_float=Decimal)
            values[key] = (value["count"], Decimal(value["total"]))
        return values
    finally:
        await nc.close()


def test_order_totals_land_in_the_kv_bucket(spark, cluster_target: JetStreamTarget) -> None:  # type: ignore[no-untyped-def]
    servers = cluster_target.urls
    first = run(seed_orders(servers, STREAM, 2000, replicas=3, subject_prefix=PREFIX))
    want = expected_totals(first)
    assert len(want) > 1

    got = run_order_totals(spark, servers, STREAM, BUCKET)
    assert got == sorted((subject, count, total) for subject, (count, total) in want.items())
    assert run(kv_values(servers, BUCKET, sorted(want))) == want

    # More orders, then a second run: every key now holds the new totals (none taken for a duplicate).
    second = run(seed_orders(servers, STREAM, 500, replicas=3, subject_prefix=PREFIX))
    want = expected_totals(first + second)
    run_order_totals(spark, servers, STREAM, BUCKET)
    assert run(kv_values(servers, BUCKET, sorted(want))) == want


def test_cli_defaults() -> None:
    args = _parser().parse_args(["--servers", "nats://127.0.0.1:4222", "--seed", "10"])
    assert (args.stream, args.bucket, args.seed, args.master) == ("ORDERS", "order_totals", 10, "local[2]")
