"""The `jetraft` command: a thin dispatcher to each subcommand's own module.

Subcommand modules are imported lazily so that `jetraft sim` does not pay for
gRPC or RocksDB imports, and so each package owns its own command line.
"""

from __future__ import annotations

import importlib
import sys

# subcommand -> (module exposing `main(argv) -> int`, one-line help, the pip extra it needs beyond
# what running nodes needs: `pip install jetraft` runs nodes and local clusters, `jetraft[demo]` the demo)
SUBCOMMANDS: dict[str, tuple[str, str, str | None]] = {
    "node": ("cluster.node.command", "run one node from flags or a config file", None),
    "local": ("cli.local", "run a local cluster of node processes on 127.0.0.1", None),
    "sim": ("raft.sim_cli", "run the deterministic Raft simulator over many seeds", None),
    "toxiproxy": ("chaos.toxiproxy_cli", "serve the Toxiproxy HTTP API with an embedded proxy", None),
    "chaos": ("cli.chaos", "chaos runs: workloads under seeded faults, checked as Jepsen does", "demo"),
    "demo": ("cli.demo", "run a demonstration (read-after-write under injected lag)", "demo"),
}


def _usage() -> str:
    lines = ["usage: jetraft <command> [options]", "", "commands:"]
    lines += [f"  {name:<10} {help_}" for name, (_, help_, _) in SUBCOMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(_usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in SUBCOMMANDS:
        print(f"jetraft: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module_name, _, extra = SUBCOMMANDS[name]
    if name == "node":
        # before the node's imports (about a second): a SIGUSR2 then would kill it, and structlog would
        # import rich (cluster/node/process_setup.py)
        from cluster.node.process_setup import prepare_node_process

        prepare_node_process()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if extra is None or exc.name is None:
            raise
        print(
            f"jetraft {name}: needs jetraft's '{extra}' extra ({exc.name} is not installed): "
            f"pip install 'jetraft[{extra}]'",
            file=sys.stderr,
        )
        return 2
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
