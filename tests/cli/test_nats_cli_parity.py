"""The nats CLI's everyday operator commands against nats-server 2.15.1 and against jetraft.

One script of commands runs against a three-node nats-server cluster, then against a three-node
jetraft cluster. Every command that succeeds on nats-server must succeed on jetraft, and its output,
once what legitimately differs is normalised (times, durations, ids, which node leads, the account's
name), must be the same; a few commands whose figures are each server's own (memory, CPU, uptime,
subscription counts) are compared by their shape instead. Skipped when the CLI is not built
(`make nats-cli` builds it when Go is present).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from local.cluster import LocalCluster
from tests.cli.natscli import (
    CliResult,
    ReferenceCluster,
    find_cli,
    normalise,
    run_bounded,
    run_cli,
    run_in_terminal,
)
from tests.node.cluster_fixtures import local_cluster

CLI = find_cli()
pytestmark = pytest.mark.skipif(CLI is None, reason="nats CLI not built (make nats-cli needs Go)")


def same_text(ref: CliResult, ours: CliResult) -> list[str]:
    a, b = normalise(ref.output).splitlines(), normalise(ours.output).splitlines()
    return [line for line in difflib.unified_diff(a, b, "nats-server", "jetraft", lineterm="", n=1)]


def _table_rows(text: str) -> list[str]:
    """A table's row labels (first cells), which name servers, streams or buckets."""
    rows = []
    for line in text.splitlines():
        if line.startswith("│"):
            cells = [cell.strip() for cell in line.strip("│").split("│")]
            rows.append(cells[0])
    return rows


def same_server_rows(ref: CliResult, ours: CliResult) -> list[str]:
    """Tables whose figures are each server's own: the same rows, named the same (one per server; a node
    of several workers is one server, as its `$SYS` answers say)."""
    a = _table_rows(normalise(ref.output))
    b = _table_rows(normalise(ours.output))
    return [] if a == b else [f"rows {a} from nats-server's, {b} on jetraft"]


def same_server_count(pattern: str) -> Callable[[CliResult, CliResult], list[str]]:
    """The counts of servers `pattern` finds (e.g. how many replied): nats-server's."""

    def compare(ref: CliResult, ours: CliResult) -> list[str]:
        a = [int(n) for n in re.findall(pattern, normalise(ref.output), re.M)]
        b = [int(n) for n in re.findall(pattern, normalise(ours.output), re.M)]
        return [] if a == b and a else [f"{a} from nats-server's, {b} on jetraft"]

    return compare


def same_matches(pattern: str) -> Callable[[CliResult, CliResult], list[str]]:
    """Output whose figures are timings: only what `pattern` finds (e.g. how many replied) must agree."""

    def compare(ref: CliResult, ours: CliResult) -> list[str]:
        a = re.findall(pattern, normalise(ref.output), re.M)
        b = re.findall(pattern, normalise(ours.output), re.M)
        return [] if a == b and a else [f"{a} on nats-server, {b} on jetraft"]

    return compare


@dataclass
class Step:
    args: list[str]
    compare: Callable[[CliResult, CliResult], list[str]] = same_text
    system: bool = False
    watch_seconds: float = 0.0
    terminal: bool = False
    results: dict[str, CliResult] = field(default_factory=dict)

    def run(self, cli: Path, url: str, kind: str) -> None:
        args = self.args
        if self.watch_seconds:
            self.results[kind] = run_bounded(cli, url, args, self.watch_seconds)
        elif self.terminal:
            self.results[kind] = run_in_terminal(cli, url, args)
        else:
            self.results[kind] = run_cli(cli, url, args, system=self.system)


def script(workdir: Path) -> list[Step]:
    """The commands."""
    payload = workdir / "hello.txt"
    payload.write_text("hello object store\n" * 100)
    fetched = workdir / "fetched.txt"
    stream = [
        "--subjects", "orders.>", "--storage", "file", "--replicas", "3", "--retention", "limits",
        "--discard", "old", "--max-msgs=-1", "--max-bytes=-1", "--max-age=1y", "--max-msg-size=-1",
        "--max-msgs-per-subject=-1", "--dupe-window=2m", "--no-allow-rollup", "--no-deny-delete",
        "--no-deny-purge", "--defaults",
    ]  # fmt: skip
    consumer = [
        "--pull", "--deliver", "all", "--ack", "explicit", "--replay", "instant", "--filter", "",
        "--max-deliver=-1", "--max-pending", "100", "--no-headers-only", "--backoff", "none", "--defaults",
    ]  # fmt: skip
    return [
        Step(["stream", "add", "ORDERS", *stream]),
        Step(["stream", "ls"]),
        Step(["stream", "info", "ORDERS"]),
        Step(["pub", "orders.new", "order {{Count}}", "--count", "3"]),
        Step(["request", "$JS.API.STREAM.NAMES", ""], compare=same_matches(r'"streams":\[[^]]*\]')),
        Step(["stream", "report"]),
        Step(["stream", "edit", "ORDERS", "--max-msgs", "1000", "-f"]),
        Step(["stream", "get", "ORDERS", "2"]),
        Step(["stream", "view", "ORDERS", "10"], terminal=True),
        Step(["consumer", "add", "ORDERS", "C1", *consumer]),
        Step(["consumer", "info", "ORDERS", "C1"]),
        Step(["consumer", "ls", "ORDERS"]),
        Step(["consumer", "next", "ORDERS", "C1", "--count", "2"]),
        Step(["consumer", "rm", "ORDERS", "C1", "-f"]),
        Step(["stream", "purge", "ORDERS", "-f"]),
        Step(["stream", "rm", "ORDERS", "-f"]),
        Step(["kv", "add", "CFG", "--replicas", "3", "--history", "5"]),
        Step(["kv", "put", "CFG", "colour", "red"]),
        Step(["kv", "put", "CFG", "colour", "blue"]),
        Step(["kv", "get", "CFG", "colour"]),
        Step(["kv", "history", "CFG", "colour"]),
        Step(["kv", "ls"]),
        Step(["kv", "ls", "CFG"]),
        Step(["kv", "watch", "CFG"], watch_seconds=3.0),
        Step(["kv", "del", "CFG", "colour", "-f"]),
        Step(["kv", "status", "CFG"]),
        Step(["kv", "rm", "CFG", "-f"]),
        Step(["object", "add", "FILES", "--replicas", "3"]),
        Step(["object", "put", "FILES", str(payload), "--name", "hello.txt"]),
        # before any object read: those make ordered consumers, which nats-server counts until they
        # time out and jetraft drops when their client goes
        Step(["account", "info"]),
        Step(["server", "check", "jetstream"]),
        Step(["server", "report", "jetstream"], compare=same_server_rows, system=True),
        Step(["object", "get", "FILES", "hello.txt", "-O", str(fetched), "--force"]),
        Step(["object", "ls", "FILES"]),
        Step(["object", "info", "FILES", "hello.txt"]),
        Step(["object", "rm", "FILES", "hello.txt", "-f"]),
        Step(["object", "rm", "FILES", "-f"]),
        Step(["server", "ls"], compare=same_server_rows, system=True),
        Step(
            ["server", "report", "health"],
            compare=same_server_count(r"(?:ok|err): (\d+)"),
            system=True,
        ),
        # waits for the servers expected: each node's (a node of several workers answers once)
        Step(["server", "ping", "3"], compare=same_server_count(r"^.*?(\d+) replies"), system=True),
    ]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReferenceCluster]:
    processes = ReferenceCluster(3, Path(tmp_path_factory.mktemp("reference")))
    processes.start()
    try:
        yield processes
    finally:
        processes.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("cli")) as running:
        yield running


def test_cli_script_works_on_jetraft_as_on_nats_server(
    reference: ReferenceCluster, cluster: LocalCluster, tmp_path: Path
) -> None:
    assert CLI is not None
    steps = script(tmp_path)
    for kind, url in (("nats-server", reference.target().urls[0]), ("jetraft", cluster.client_urls[0])):
        for step in steps:
            step.run(CLI, url, kind)
    problems: list[str] = []
    for step in steps:
        ref, ours = step.results["nats-server"], step.results["jetraft"]
        if ours.returncode != 0:
            problems.append(f"nats {' '.join(step.args)}: failed on jetraft:\n{ours.output}")
            continue
        differences = step.compare(ref, ours)
        if differences:
            problems.append(f"nats {' '.join(step.args)}:\n" + "\n".join(differences))
    # the script is one nats-server runs whole: a step that fails there is a mistake in the script
    failed_on_reference = [
        (step.args, step.results["nats-server"].output) for step in steps if step.results["nats-server"].returncode
    ]
    assert failed_on_reference == []
    assert not problems, "\n\n".join(problems)
