"""The read-after-write demonstration's pure parts: samples, summary rows, table, JSON, chart, link naming."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from nats.js.api import StreamConfig
from nats.js.errors import NotFoundError

from chaos.readafterwrite.chart import write_chart
from chaos.readafterwrite.faults import link_ends, touches
from chaos.readafterwrite.report import format_table, results_document, write_json
from chaos.readafterwrite.scenario import DemoSettings, create_streams
from chaos.readafterwrite.stats import (
    Outcome,
    ReadPath,
    ReadSample,
    local_answer_fraction,
    percentile,
    summarize,
)
from chaos.readafterwrite.workload import Endpoint, ReadAfterWrite, WorkloadSettings, answering_node
from cli import demo as demo_cli

REQUIRED_ROW_FIELDS = {
    "lag_ms", "path", "responder", "lagging", "reads", "stale", "stale_fraction",
    "behind_seq_p99", "latency_ms_p50", "latency_ms_p99",
}  # fmt: skip


def _sample(
    lag_ms: int,
    path: ReadPath,
    responder: str,
    outcome: Outcome = Outcome.MESSAGE,
    acked: int = 10,
    returned: int = 10,
    latency_ms: float = 1.0,
    behind_seq: int = 0,
    behind_ms: float = 0.0,
) -> ReadSample:
    return ReadSample(lag_ms, path, responder, outcome, acked, returned, latency_ms, behind_seq, behind_ms)


def _samples() -> list[ReadSample]:
    samples = [_sample(0, ReadPath.MSG_GET, "n1", latency_ms=2.0) for _ in range(4)]
    samples += [_sample(200, ReadPath.MSG_GET, "n1", latency_ms=3.0) for _ in range(4)]
    # the lagged follower: 3 of 4 stale (one a 404: it did not have the key at all), one fresh
    samples += [
        _sample(200, ReadPath.DIRECT_GET, "n2", returned=7, behind_seq=3, behind_ms=40.0),
        _sample(200, ReadPath.DIRECT_GET, "n2", returned=8, behind_seq=2, behind_ms=20.0),
        _sample(200, ReadPath.DIRECT_GET, "n2", Outcome.NOT_FOUND, returned=0, behind_seq=10, behind_ms=90.0),
        _sample(200, ReadPath.DIRECT_GET, "n2", returned=10),
    ]
    # read-your-writes on the lagged follower: refused (412) or fresh, never stale; a timeout is an error
    samples += [
        _sample(200, ReadPath.DIRECT_GET_MIN_LAST_SEQ, "n2", Outcome.REFUSED, returned=0, latency_ms=500.0),
        _sample(200, ReadPath.DIRECT_GET_MIN_LAST_SEQ, "n2", latency_ms=250.0),
        _sample(200, ReadPath.DIRECT_GET_MIN_LAST_SEQ, "n2", Outcome.ERROR, returned=0, latency_ms=0.0),
    ]
    samples += [_sample(0, ReadPath.DIRECT_GET, "n2", latency_ms=1.5) for _ in range(2)]
    return samples


def _rows_by_key() -> dict[tuple[int, str, str], Any]:
    return {(r.lag_ms, r.path, r.responder): r for r in summarize(_samples(), lag_targets=["n2", "m1"])}


def test_percentile_is_nearest_rank_and_zero_for_nothing() -> None:
    assert percentile([], 0.99) == 0.0
    assert percentile([5.0], 0.5) == 5.0
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.50) == 50.0
    assert percentile(values, 0.99) == 99.0
    assert percentile([1.0, 100.0], 0.99) == 100.0


def test_a_sample_is_stale_only_when_it_answered_with_an_older_sequence() -> None:
    assert _sample(0, ReadPath.DIRECT_GET, "n2", returned=9).stale
    assert _sample(0, ReadPath.DIRECT_GET, "n2", Outcome.NOT_FOUND, returned=0).stale
    assert not _sample(0, ReadPath.DIRECT_GET, "n2", returned=10).stale
    assert not _sample(0, ReadPath.DIRECT_GET, "n2", returned=11).stale
    assert not _sample(0, ReadPath.DIRECT_GET_MIN_LAST_SEQ, "n2", Outcome.REFUSED, returned=0).stale
    assert not _sample(0, ReadPath.DIRECT_GET, "n2", Outcome.ERROR, returned=0).stale


def test_summary_counts_stale_reads_refusals_and_errors_per_lag_path_and_responder() -> None:
    rows = _rows_by_key()
    lagged = rows[(200, "direct_get", "n2")]
    assert (lagged.reads, lagged.stale, lagged.stale_fraction) == (4, 3, 0.75)
    assert lagged.lagging and lagged.lag_target
    # behind percentiles are over the stale reads only
    assert (lagged.behind_seq_p50, lagged.behind_seq_p99) == (3.0, 10.0)
    assert (lagged.behind_ms_p50, lagged.behind_ms_p99) == (40.0, 90.0)

    ryw = rows[(200, "direct_get_min_last_seq", "n2")]
    assert (ryw.reads, ryw.stale, ryw.refused, ryw.errors) == (1, 0, 1, 1)
    assert ryw.latency_ms_p99 == 500.0, "a refusal's wait is part of the path's latency"

    coherent = rows[(200, "msg_get", "n1")]
    assert (coherent.reads, coherent.stale, coherent.lagging, coherent.lag_target) == (4, 0, False, False)
    assert coherent.latency_ms_p50 == 3.0 and coherent.behind_seq_p99 == 0.0

    unlagged_round = rows[(0, "direct_get", "n2")]
    assert unlagged_round.lag_target and not unlagged_round.lagging, "no latency is injected at lag 0"


def test_rows_are_ordered_by_lag_then_path_then_responder() -> None:
    rows = summarize(_samples(), lag_targets=["n2"])
    keys = [(r.lag_ms, r.path, r.responder) for r in rows]
    assert keys == [
        (0, "msg_get", "n1"),
        (0, "direct_get", "n2"),
        (200, "msg_get", "n1"),
        (200, "direct_get", "n2"),
        (200, "direct_get_min_last_seq", "n2"),
    ]


def test_table_shows_one_lag_with_its_rows() -> None:
    rows = summarize(_samples(), lag_targets=["n2"])
    table = format_table(200, rows)
    lines = table.splitlines()
    assert lines[0].startswith("injected latency 200 ms")
    assert "stale%" in lines[1] and "latency ms p50/p99" in lines[1]
    body = lines[3:]
    assert len(body) == 3
    lagged_line = next(line for line in body if line.startswith("direct_get ") and "n2" in line)
    assert "n2 (lagged)" in lagged_line and "75.0" in lagged_line and "3/10" in lagged_line
    assert "(target)" in format_table(0, rows) and "(lagged)" not in format_table(0, rows)


def test_json_document_has_a_results_list_with_the_required_fields(tmp_path: Path) -> None:
    rows = summarize(_samples(), lag_targets=["n2"])
    document = results_document(rows, {"settings": {"lags": [0, 200]}})
    assert document["run"] == {"settings": {"lags": [0, 200]}}
    path = tmp_path / "raw.json"
    write_json(path, rows, {"settings": {}})
    loaded = json.loads(path.read_text())
    assert isinstance(loaded["results"], list) and len(loaded["results"]) == len(rows)
    for row in loaded["results"]:
        assert set(row) >= REQUIRED_ROW_FIELDS
        assert row["path"] in {"msg_get", "direct_get", "direct_get_min_last_seq"}
        assert isinstance(row["lagging"], bool) and 0.0 <= row["stale_fraction"] <= 1.0


def test_chart_is_written_as_a_png_even_when_a_path_was_only_refused(tmp_path: Path) -> None:
    samples = [
        *_samples(),
        _sample(1000, ReadPath.DIRECT_GET_MIN_LAST_SEQ, "m1", Outcome.REFUSED, returned=0, latency_ms=501.0),
    ]
    path = tmp_path / "raw.png"
    write_chart(path, summarize(samples, lag_targets=["n2", "m1"]))
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_proxy_names_say_which_links_touch_a_node() -> None:
    assert link_ends("n1-to-m1") == ("n1", "m1")
    assert link_ends("redis") is None and link_ends("-to-n1") is None
    assert touches("n1-to-n2", ["n2"]) and touches("n2-to-n3", ["n2"])
    assert not touches("n1-to-n3", ["n2", "m1"])
    assert not touches("api", ["n2"])


class _StubJetStream:
    def jetstream(self, timeout: float) -> object:
        return object()


def test_behind_comes_from_the_responder_position_and_the_ack_time_of_its_first_missing_write() -> None:
    endpoint = Endpoint(node="n1", url="nats://127.0.0.1:1", nc=cast(Any, _StubJetStream()))
    workload = ReadAfterWrite(WorkloadSettings(stream="RAW", subject_prefix="raw"), endpoint, [endpoint])
    now = time.monotonic()
    workload.ack_times = {8: now - 0.5, 9: now - 0.2, 10: now - 0.01}
    started = time.perf_counter()
    stale = workload._sample(
        200, ReadPath.DIRECT_GET, "n2", Outcome.MESSAGE, 10, 6, started, responder_last=7
    )
    assert stale.behind_seq == 3  # the responder has applied 7 of 10
    assert 500 <= stale.behind_ms < 600, "it has been missing seq 8 since seq 8 was acknowledged"
    unknown = workload._sample(
        200, ReadPath.DIRECT_GET, "n2", Outcome.MESSAGE, 10, 6, started, responder_last=2
    )
    assert unknown.behind_seq == 8 and 10 <= unknown.behind_ms < 100, "unknown ack time: since our own write"
    fresh = workload._sample(
        200, ReadPath.DIRECT_GET, "n2", Outcome.MESSAGE, 10, 10, started, responder_last=12
    )
    assert (fresh.behind_seq, fresh.behind_ms) == (0, 0.0)
    no_position = workload._sample(200, ReadPath.MSG_GET, "n1", Outcome.MESSAGE, 10, 4, started, None)
    assert no_position.behind_seq == 6


@pytest.mark.parametrize(
    "argv",
    [
        ["read-after-write", "--lags", "0,fast"],
        ["read-after-write", "--lags", "-5"],
        ["read-after-write", "--duration", "0"],
        ["read-after-write", "--attach", "--servers", "nats://127.0.0.1:4222"],
        ["no-such-demo"],
        [],
    ],
)
def test_cli_rejects_bad_arguments_with_status_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = demo_cli.main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    assert code == 2
    assert capsys.readouterr().err


def test_cli_is_reachable_through_the_jetraft_command() -> None:
    from cli.main import SUBCOMMANDS

    module, _, extra = SUBCOMMANDS["demo"]
    assert module == "cli.demo" and extra == "demo"
    with pytest.raises(SystemExit) as exc:
        demo_cli.main(["read-after-write", "--help"])
    assert exc.value.code == 0


def test_reads_answered_elsewhere_count_as_forwarded_for_the_node_that_answered() -> None:
    direct = ReadPath.DIRECT_GET
    samples = [
        ReadSample(300, direct, "n2", Outcome.MESSAGE, 10, 9, 610.0, 1, 300.0, via="n1"),
        ReadSample(300, direct, "n2", Outcome.MESSAGE, 10, 10, 1.0, via="n2"),
        ReadSample(300, direct, "n2", Outcome.ERROR, 10, via="n3"),  # no answer: not counted as forwarded
        ReadSample(300, ReadPath.MSG_GET, "n1", Outcome.MESSAGE, 10, 10, 1.0),
    ]
    (row,) = [r for r in summarize(samples, ["n2"]) if r.path == "direct_get"]
    assert (row.reads, row.stale, row.forwarded, row.errors) == (2, 1, 1, 1)
    assert "fwd" in format_table(300, [row])
    # of the two answered Direct Gets one was answered by the node asked; MSG.GET does not count
    assert local_answer_fraction(samples) == 0.5
    assert local_answer_fraction(samples[3:]) is None


class _PlacingJetStream:
    """Places the demo's stream and mirror on the members given, as stream info names them."""

    def __init__(self, stream: tuple[str, list[str]], mirror: str) -> None:
        self.stream, self.mirror = stream, mirror

    async def delete_stream(self, name: str) -> None:
        raise NotFoundError

    async def add_stream(self, config: StreamConfig) -> Any:
        leader, replicas = self.stream if config.mirror is None else (self.mirror, [])
        cluster = SimpleNamespace(leader=leader, replicas=[SimpleNamespace(name=name) for name in replicas])
        return SimpleNamespace(cluster=cluster)


async def test_the_layout_names_nodes_when_the_peers_are_workers_of_several_worker_nodes() -> None:
    # latency goes on a node's links (its proxies are named after nodes), so the layout names nodes
    js = _PlacingJetStream(("n2/w1", ["n3/w0", "n1/w1"]), "m1/w0")
    layout = await create_streams(cast(Any, js), DemoSettings(stream="S", mirror="S_M", subject_prefix="s"))
    assert (layout.leader, layout.followers, layout.mirror_node) == ("n2", ["n1", "n3"], "m1")
    assert layout.lagged == ["n1", "m1"] and layout.responders == ["m1", "n1", "n2", "n3"]
    js = _PlacingJetStream(("n2", ["n3", "n1"]), "m1")
    layout = await create_streams(cast(Any, js), DemoSettings(stream="S", mirror="S_M", subject_prefix="s"))
    assert (layout.leader, layout.followers, layout.mirror_node) == ("n2", ["n1", "n3"], "m1")


def test_a_direct_get_is_counted_for_the_node_of_the_worker_that_answered() -> None:
    assert answering_node({"Jetraft-Node": "n2/w1"}, "n1") == "n2"
    assert answering_node({"Jetraft-Node": "n2"}, "n1") == "n2"
    # nats-server names no responder: the read is counted for the endpoint it went out on
    assert answering_node({}, "nats://127.0.0.1:4222") == "nats://127.0.0.1:4222"
