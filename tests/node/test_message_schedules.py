"""Message schedules (ADR-51) against a 3-node nats-server 2.15.1 cluster and a 3-node jetraft cluster:
the same refusals, the same produced messages, schedules stopped the same way; and a schedule keeps
firing across a change of the stream's leader."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import nats
import pytest
from nats.js import JetStreamContext

from local.cluster import node_available
from tests.pipeline.servers import NATS_SERVER, JetStreamTarget, request_when_served, side_by_side

pytestmark = pytest.mark.skipif(
    not (node_available() and NATS_SERVER.exists()), reason="needs `jetraft node` and nats-server"
)

TIMEOUT = 10.0
EVERY = {"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "out.a"}

REFUSED: list[tuple[str, dict[str, str]]] = [
    ("plain.1", {"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "plain.2"}),  # not allowed there
    ("sched.a", {"Nats-Schedule": "bogus", "Nats-Schedule-Target": "out.a"}),
    ("sched.a", {"Nats-Schedule": "@every 500ms", "Nats-Schedule-Target": "out.a"}),  # under a second
    ("sched.a", {"Nats-Schedule": "0 * * * *", "Nats-Schedule-Target": "out.a"}),  # cron has 6 fields
    ("sched.a", {"Nats-Schedule": "@at tomorrow", "Nats-Schedule-Target": "out.a"}),
    ("sched.a", {"Nats-Schedule": "@every 1s"}),  # no target
    ("sched.a", {"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "sched.a"}),  # itself
    ("sched.a", {"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "elsewhere.a"}),  # not the stream's
    ("sched.a", {"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "out.*"}),
    ("sched.a", {**EVERY, "Nats-Schedule-TTL": "soon"}),
    ("sched.a", {**EVERY, "Nats-Schedule-Rollup": "all"}),
    ("sched.a", {**EVERY, "Nats-Rollup": "all"}),
    ("sched.a", {**EVERY, "Nats-Schedule-Source": "out.a"}),  # its own target
    ("sched.a", {**EVERY, "Nats-Schedule-Source": "elsewhere.x"}),
    ("sched.a", {**EVERY, "Nats-Schedule-Time-Zone": "Europe/Amsterdam"}),  # zones are for cron only
    (
        "sched.a",
        {
            "Nats-Schedule": "0 * * * * *",
            "Nats-Schedule-Target": "out.a",
            "Nats-Schedule-Time-Zone": "No/Where",
        },
    ),
    ("out.z", {"Nats-Schedule-Next": "later", "Nats-Scheduler": "sched.q"}),  # only purge
    ("out.z", {"Nats-Schedule-Next": "purge", "Nats-Scheduler": "out.z"}),  # not its own subject
    ("out.z", {"Nats-Schedule-Next": "purge"}),
    ("out.z", {"Nats-Scheduler": "sched.q"}),
    ("out.z", {"Nats-Schedule-Next": "purge", "Nats-Scheduler": "src.t"}),  # src.t holds no schedule
    ("plain.1", {"Nats-Schedule-Next": "purge", "Nats-Scheduler": "plain.2"}),
]


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, JetStreamTarget]]:
    with side_by_side(tmp_path_factory) as started:
        yield started


async def _api(nc: nats.NATS, subject: str, body: Any = None) -> Any:
    payload = b"" if body is None else json.dumps(body).encode()
    return json.loads((await nc.request(subject, payload, timeout=TIMEOUT)).data)


async def _create(nc: nats.NATS, config: dict[str, Any]) -> Any:
    config = {"storage": "file", "num_replicas": 3, **config}
    return await _api(nc, f"$JS.API.STREAM.CREATE.{config['name']}", config)


def _config_view(created: Any) -> Any:
    config = created["config"]
    return {key: config.get(key) for key in ("allow_msg_schedules", "allow_rollup_hdrs", "deny_purge")}


async def _publish(nc: nats.NATS, subject: str, headers: dict[str, str] | None, body: bytes = b"x") -> Any:
    return json.loads((await request_when_served(nc, subject, body, headers, timeout=TIMEOUT)).data)


async def _next(sub: JetStreamContext.PushSubscription) -> tuple[str, bytes, dict[str, str]]:
    msg = await sub.next_msg(timeout=TIMEOUT)
    return msg.subject, msg.data, dict(msg.headers or {})


async def _last_on(nc: nats.NATS, stream: str, subject: str) -> Any:
    got = await _api(nc, f"$JS.API.STREAM.MSG.GET.{stream}", {"last_by_subj": subject})
    return got.get("error", {}).get("err_code") or got["message"]["seq"]


def _next_at(headers: dict[str, str]) -> dt.datetime:
    return dt.datetime.fromisoformat(headers.pop("Nats-Schedule-Next").replace("Z", "+00:00"))


async def _scenario(url: str) -> list[Any]:
    nc = await nats.connect(url, max_reconnect_attempts=0)
    js = nc.jetstream()
    seen: list[Any] = []
    try:
        streams = [
            {
                "name": "S",
                "subjects": ["sched.>", "out.>", "src.>"],
                "allow_msg_schedules": True,
                "allow_msg_ttl": True,
            },
            {"name": "P", "subjects": ["plain.>"]},
            {"name": "D", "subjects": ["deny.>"], "allow_msg_schedules": True, "deny_purge": True},
        ]
        for config in streams:
            created = await _create(nc, config)
            assert "error" not in created, created
            seen.append(_config_view(created))
        seen.append(
            await _api(
                nc,
                "$JS.API.STREAM.UPDATE.D",
                {**streams[2], "allow_msg_schedules": False, "num_replicas": 3, "storage": "file"},
            )
        )
        seen.append(await _publish(nc, "src.t", {"Custom": "src"}, b"sample"))
        seen.extend([await _publish(nc, subject, headers) for subject, headers in REFUSED])
        out = await js.subscribe("out.>", stream="S", ordered_consumer=True)
        past = (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
        at = {
            "Nats-Schedule": f"@at {past}",
            "Nats-Schedule-Target": "out.at",
            "Custom": "1",
            "Nats-Msg-Id": "m1",
        }
        seen.append(await _publish(nc, "sched.at", {**at, "Nats-Schedule-TTL": "1m"}, b"at-body"))
        # a one-off schedule in the past fires at once and is purged by what it produced
        seen.append(await _next(out))
        seen.append(await _last_on(nc, "S", "sched.at"))
        sampled = {
            "Nats-Schedule": "@every 1s",
            "Nats-Schedule-Target": "out.src",
            "Nats-Schedule-Source": "src.t",
        }
        seen.append(await _publish(nc, "sched.src", sampled, b"fallback"))
        first, second = await _next(out), await _next(out)
        # each produced message announces the next firing, a second after the one before
        gap = _next_at(second[2]) - _next_at(first[2])
        seen.extend([first, second, gap == dt.timedelta(seconds=1)])
        seen.append(
            await _publish(nc, "out.stop", {"Nats-Schedule-Next": "purge", "Nats-Scheduler": "sched.src"})
        )
        seen.append(await _last_on(nc, "S", "sched.src"))
        seen.append(sorted((await js.stream_info("S", subjects_filter=">")).state.subjects or {}))
        await out.unsubscribe()
        return seen
    finally:
        await nc.close()


def _without_seqs(items: list[Any]) -> list[Any]:
    """Stream sequences differ with how many times a schedule fired before it was read."""
    return [
        {k: v for k, v in item.items() if k != "seq"} if isinstance(item, dict) else item for item in items
    ]


async def test_schedules_refuse_fire_and_stop_as_on_nats_server(clusters: dict[str, JetStreamTarget]) -> None:
    expected = await _scenario(clusters["nats-server"].urls[0])
    got = await _scenario(clusters["jetraft"].urls[0])
    assert _without_seqs(got) == _without_seqs(expected)
    codes = {item["error"]["err_code"] for item in expected if isinstance(item, dict) and "error" in item}
    assert codes >= {10188, 10189, 10190, 10191, 10192, 10203, 10212, 10223, 10052}


async def test_a_schedule_keeps_firing_after_the_leader_changes(clusters: dict[str, JetStreamTarget]) -> None:
    nc = await nats.connect(clusters["jetraft"].urls[0], max_reconnect_attempts=0)
    js = nc.jetstream()
    try:
        created = await _create(nc, {"name": "F", "subjects": ["f.>"], "allow_msg_schedules": True})
        assert "error" not in created, created
        out = await js.subscribe("f.out", stream="F", ordered_consumer=True)
        await _publish(nc, "f.sched", {"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "f.out"})
        await _next(out)
        before = (await js.stream_info("F")).cluster
        assert before is not None
        stepped = await _api(nc, "$JS.API.STREAM.LEADER.STEPDOWN.F")
        assert stepped.get("success") is True, stepped
        for _ in range(3):
            subject, _, headers = await _next(out)
            assert subject == "f.out" and headers["Nats-Scheduler"] == "f.sched"
        # a new term began (its leader may be the old one again: the preferred leader takes it back)
        after = (await js.stream_info("F")).cluster
        assert after is not None and after.leader_since != before.leader_since
        await out.unsubscribe()
    finally:
        await nc.close()
