"""`jetraft demo read-after-write`: the read-after-write trade-off under injected lag, as a table, JSON and a chart."""

from __future__ import annotations

import argparse
import asyncio
import sys

from chaos.readafterwrite.report import format_table, write_json
from chaos.readafterwrite.scenario import DemoResult, DemoSettings, run_read_after_write
from chaos.readafterwrite.stats import local_answer_fraction
from local.cluster import faultable_cluster


def _lags(text: str) -> list[int]:
    try:
        lags = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--lags {text!r} must be comma-separated milliseconds") from None
    if not lags or any(lag < 0 for lag in lags):
        raise argparse.ArgumentTypeError(f"--lags {text!r} must list at least one lag, none negative")
    return lags


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jetraft demo", description="demonstrations on a faultable cluster")
    sub = parser.add_subparsers(dest="demo", required=True)
    raw = sub.add_parser(
        "read-after-write",
        help="write keys and read them back (MSG.GET, Direct Get, Direct Get with min_last_seq) under lag",
    )
    raw.add_argument(
        "--lags",
        type=_lags,
        default=[0, 50, 200, 1000],
        help="injected latencies, ms (default 0,50,200,1000)",
    )
    raw.add_argument("--duration", type=float, default=8.0, help="seconds per lag (default 8)")
    raw.add_argument("--max-writes", type=int, default=2_000, help="writes per lag at most (default 2000)")
    raw.add_argument("--warmup", type=float, default=1.0, help="seconds of each lag not recorded (default 1)")
    raw.add_argument("--keys", type=int, default=16)
    raw.add_argument("--workers", type=int, default=4, help="concurrent writers, each on its own keys")
    raw.add_argument("--jitter", type=int, default=0, help="latency jitter, ms")
    raw.add_argument("--json", dest="json_path", help="write the rows here")
    raw.add_argument("--png", dest="png_path", help="write the chart here")
    raw.add_argument(
        "--data-dir", help="own cluster's data directory (default: a temporary one, removed after)"
    )
    raw.add_argument("--attach", action="store_true", help="use a running cluster and its Toxiproxy")
    raw.add_argument("--servers", help="with --attach: comma-separated client URLs, one per node")
    raw.add_argument("--toxiproxy", help="with --attach: the Toxiproxy API URL (proxies named nX-to-nY)")
    return parser


def _settings(args: argparse.Namespace) -> DemoSettings:
    return DemoSettings(
        lags=args.lags,
        duration=args.duration,
        max_writes=args.max_writes,
        warmup=min(args.warmup, args.duration / 2),
        keys=args.keys,
        workers=args.workers,
        jitter_ms=args.jitter,
    )


def _report(
    result: DemoResult, settings: DemoSettings, servers: list[str], toxiproxy: str, args: argparse.Namespace
) -> None:
    for lag_ms in settings.lags:
        print()
        print(format_table(lag_ms, result.rows))
    local = local_answer_fraction(result.samples)
    if local is not None and local < 0.9:
        print(
            f"\nnote: {100 * local:.0f}% of Direct Gets were answered by the node they were sent to (the "
            "others were spread over the responders, as nats-server spreads them): rows count each read "
            "for the node that answered it, and reads reaching or leaving a lagged node crossed its lagged "
            "links (column fwd)"
        )
    if args.json_path:
        write_json(args.json_path, result.rows, result.run_info(settings, servers, toxiproxy))
        print(f"\nJSON: {args.json_path}")
    if args.png_path:
        from chaos.readafterwrite.chart import write_chart  # matplotlib only when a chart is asked for

        write_chart(args.png_path, result.rows)
        print(f"chart: {args.png_path}")


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def read_after_write(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if args.attach:
        if not args.servers or not args.toxiproxy:
            print("jetraft demo: --attach needs --servers and --toxiproxy", file=sys.stderr)
            return 2
        servers = [url.strip() for url in args.servers.split(",") if url.strip()]
        result = asyncio.run(run_read_after_write(settings, servers, args.toxiproxy, _progress))
        _report(result, settings, servers, args.toxiproxy, args)
        return 0
    _progress("starting a faultable cluster: 3 nodes and a mirror node, links through Toxiproxy")
    with faultable_cluster(args.data_dir) as cluster:
        servers = cluster.client_urls
        toxiproxy = cluster.toxiproxy_url
        _progress(f"nodes {', '.join(servers)}; toxiproxy {toxiproxy}")
        result = asyncio.run(run_read_after_write(settings, servers, toxiproxy, _progress))
    _report(result, settings, servers, toxiproxy, args)
    return 0


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.demo == "read-after-write":
        if args.duration <= 0 or args.max_writes < 1 or args.keys < 1 or args.workers < 1:
            print(
                "jetraft demo: --duration, --max-writes, --keys and --workers must be positive",
                file=sys.stderr,
            )
            return 2
        return read_after_write(args)
    return 2
