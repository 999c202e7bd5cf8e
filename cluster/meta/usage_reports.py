"""Every USAGE_INTERVAL, each node tells all nodes how many bytes the streams it leads hold (on all their
replicas), so that a stream's leader can check a publish against the account's max_memory / max_storage
(cluster/runtime/account_usage.py); only while the account has such a limit, otherwise nobody asks. And
how many API responses it has sent the account's clients (ACCOUNT INFO's `api`), when that changed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from cluster.runtime.account_usage import API_USAGE_SUBJECT, USAGE_INTERVAL, USAGE_SUBJECT, encode_usage
from cluster.runtime.context import NodeContext
from cluster.stream.config import StorageType
from cluster.stream.replica import StreamReplica
from gateway.router import Message


def has_byte_limit(ctx: NodeContext) -> bool:
    return ctx.account_limits.max_memory >= 0 or ctx.account_limits.max_storage >= 0


def replica_usage(replicas: Mapping[str, StreamReplica], led_only: bool) -> dict[str, tuple[bool, int]]:
    """(in memory, bytes on all replicas) of each stream with a replica here (or led here)."""
    usage: dict[str, tuple[bool, int]] = {}
    for name, replica in list(replicas.items()):
        if not led_only or replica.is_leader():
            cfg = replica.config
            size = replica.machine.store.state().bytes * max(cfg.num_replicas, 1)
            usage[name] = (cfg.storage is StorageType.MEMORY, size)
    return usage


def listen_for_usage(ctx: NodeContext, replicas: Mapping[str, StreamReplica]) -> None:
    ctx.account_usage.count_local(lambda: replica_usage(replicas, led_only=False))
    shown: set[str] = set()
    gauge = ctx.metrics.account_stream_bytes

    def on_report(msg: Message) -> None:
        ctx.account_usage.record(msg.payload)
        heard = ctx.account_usage.heard()
        for name, size in heard.items():
            gauge.labels(ctx.name, name).set(size)
        for gone in shown - heard.keys():
            gauge.remove(ctx.name, gone)
        shown.clear()
        shown.update(heard)

    ctx.router.subscribe(USAGE_SUBJECT, on_report)


async def report_usage(ctx: NodeContext, replicas: Mapping[str, StreamReplica], stopped: Callable[[], bool]) -> None:
    while not stopped():
        usage = replica_usage(replicas, led_only=True)
        if usage:
            ctx.router.publish(USAGE_SUBJECT, encode_usage(usage))
        await asyncio.sleep(USAGE_INTERVAL)


def listen_for_api_counts(ctx: NodeContext) -> None:
    gauge = ctx.metrics.account_api_responses

    def on_report(msg: Message) -> None:
        ctx.api_counts.record(msg.payload, ctx.name)
        total, errors = ctx.api_counts.cluster_totals()
        gauge.labels(ctx.name, "total").set(total)
        gauge.labels(ctx.name, "errors").set(errors)

    ctx.router.subscribe(API_USAGE_SUBJECT, on_report)


async def report_api_counts(ctx: NodeContext, stopped: Callable[[], bool]) -> None:
    sent = (0, 0)
    while not stopped():
        counts = ctx.api_counts
        if (counts.total, counts.errors) != sent:
            sent = (counts.total, counts.errors)
            ctx.router.publish(API_USAGE_SUBJECT, counts.encode(ctx.name))
        await asyncio.sleep(USAGE_INTERVAL)
