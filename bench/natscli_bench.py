"""`nats bench` side by side: a 3-node jetraft cluster against a 3-node nats-server 2.15.1 cluster.

    .venv/bin/python bench/natscli_bench.py [--rounds 2] [--msgs 20000] [--json rows.json]

The nats CLI's own load generator (Go, much faster than a Python client, so the servers are
what is measured) on R3 file streams: JetStream publish (sync, async), consume (fetch, callback,
ordered), gets (sync, batched Direct Get) and KV put/get. Clusters are `jetstream_bench.py`'s,
one at a time, order alternating per round; the figures are medians over the rounds.

The stream and the durable consumers are made with `nats stream add` / `nats consumer add`
first: `nats bench js pub --create` asks for atomic and fast batch publishing, which jetraft
refuses (it implements neither). The CLI is `make nats-cli`'s `.tools/bin/nats` unless
`--nats-cli` names another.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a script: bench/ is on sys.path, the packages are not
    sys.path.insert(0, str(REPO_ROOT))

from jetstream_bench import SERVERS, round_order, start_cluster  # noqa: E402

STREAM, SUBJECT, BUCKET = "benchstream", "benchsubj", "benchbucket"
COMMAND_TIMEOUT_S = 600.0
STATS = re.compile(r"stats: ([\d,]+) msgs/sec")
# publishers and getters time each operation; consumers report a rate only
P50 = re.compile(r"P50: ([\d,.]+)us")


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    args: list[str]  # after `nats bench`; {msgs} is the message count


WORKLOADS = [
    Workload("js_pub_sync", ["js", "pub", "sync", SUBJECT, "--msgs", "{small}"]),
    Workload("js_pub_async", ["js", "pub", "async", SUBJECT, "--msgs", "{msgs}"]),
    Workload("js_fetch", ["js", "fetch", "--consumer", "bench-fetch", "--msgs", "{msgs}"]),
    Workload("js_consume", ["js", "consume", "--consumer", "bench-consume", "--msgs", "{msgs}"]),
    Workload("js_ordered", ["js", "ordered", "--msgs", "{msgs}"]),
    Workload("js_get_sync", ["js", "get", "sync", "--msgs", "{small}"]),
    Workload("js_get_batch", ["js", "get", "batch", "--msgs", "{msgs}"]),
    Workload("kv_put", ["kv", "put", "--replicas", "3", "--msgs", "{small}"]),
    Workload("kv_get", ["kv", "get", "--msgs", "{small}"]),
]
SETUP = [
    ["stream", "add", STREAM, "--subjects", SUBJECT, "--replicas", "3", "--storage", "file",
     "--discard", "new", "--max-bytes", "1GB", "--allow-direct", "--defaults"],
    ["consumer", "add", STREAM, "bench-fetch", "--pull", "--deliver", "all", "--ack", "explicit", "--defaults"],
    ["consumer", "add", STREAM, "bench-consume", "--pull", "--deliver", "all", "--ack", "explicit", "--defaults"],
]  # fmt: skip


def run_nats(cli: Path, url: str, args: list[str]) -> str:
    proc = subprocess.run(
        [str(cli), "--no-context", "-s", url, *args],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"nats {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return proc.stdout + proc.stderr


def measure(cli: Path, url: str, workload: Workload, msgs: int, small: int) -> dict[str, object]:
    args = [arg.format(msgs=msgs, small=small) for arg in workload.args]
    output = run_nats(cli, url, ["bench", *args, "--no-progress"])
    found = STATS.search(output)
    if found is None:
        raise RuntimeError(f"no stats line in the output of nats bench {' '.join(args)}:\n{output}")
    row: dict[str, object] = {"workload": workload.name, "msgs_per_s": int(found.group(1).replace(",", ""))}
    p50 = P50.search(output, found.end())
    if p50 is not None:
        row["p50_us"] = float(p50.group(1).replace(",", ""))
    return row


def median(rows: list[dict[str, object]], server: str, workload: str, key: str) -> float | None:
    values = [
        float(row[key])  # type: ignore[arg-type]
        for row in rows
        if row["server"] == server and row["workload"] == workload and key in row
    ]
    return statistics.median(values) if values else None


def format_table(rows: list[dict[str, object]], workloads: list[str], servers: list[str]) -> str:
    head = " | ".join(f"{server} msgs/s" for server in servers)
    p50 = " / ".join(servers)
    lines = [
        f"| workload | {head} | jetraft/nats | p50 us {p50} |",
        "|---" * (len(servers) + 3) + "|",
    ]
    for workload in workloads:
        rates = [median(rows, server, workload, "msgs_per_s") for server in servers]
        p50s = [median(rows, server, workload, "p50_us") for server in servers]
        by_server = dict(zip(servers, rates, strict=True))
        nats, ours = by_server.get(SERVERS[0]), by_server.get("jetraft")
        ratio = f"{ours / nats:.2f}" if nats and ours is not None else "-"
        cells = " | ".join(f"{rate:,.0f}" if rate is not None else "-" for rate in rates)
        lat = " / ".join(f"{value:,.0f}" if value is not None else "-" for value in p50s)
        lines.append(f"| {workload} | {cells} | {ratio} | {lat} |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--msgs", type=int, default=20_000, help="messages for the batched workloads")
    parser.add_argument(
        "--small", type=int, default=2_000, help="messages for one-at-a-time workloads (sync publish, gets, KV)"
    )
    parser.add_argument("--workloads", default=",".join(w.name for w in WORKLOADS))
    parser.add_argument("--servers", default=",".join(SERVERS))
    parser.add_argument("--nats-cli", type=Path, default=REPO_ROOT / ".tools" / "bin" / "nats")
    parser.add_argument("--nats-server", type=Path, default=Path(sys.executable).with_name("nats-server"))
    parser.add_argument("--json", type=Path, help="write every measured row here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if not args.nats_cli.is_file():
        sys.exit(f"no nats CLI at {args.nats_cli}: run `make nats-cli` (needs Go) or pass --nats-cli")
    chosen = [w for w in WORKLOADS if w.name in args.workloads.split(",")]
    servers = [s for s in SERVERS if s in args.servers.split(",")]
    rows: list[dict[str, object]] = []
    for round_no in range(args.rounds):
        for server in [s for s in round_order(round_no) if s in servers]:
            with start_cluster(server, args.nats_server) as cluster:
                url = cluster.urls[0]
                for setup in SETUP:
                    run_nats(args.nats_cli, url, setup)
                for workload in chosen:
                    row: dict[str, object] = {"server": server, "round": round_no}
                    try:
                        row.update(measure(args.nats_cli, url, workload, args.msgs, args.small))
                    except (RuntimeError, subprocess.TimeoutExpired) as exc:
                        row.update({"workload": workload.name, "error": str(exc)[:2000]})
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    print()
    print(format_table(rows, [w.name for w in chosen], servers))
    errors = [row for row in rows if "error" in row]
    if errors:
        print(f"\n{len(errors)} measurement(s) failed; see the rows above")
        sys.exit(1)


if __name__ == "__main__":
    main()
