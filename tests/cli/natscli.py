"""Running the nats CLI (natscli, built by `make nats-cli`) against a server, and what its output
may legitimately differ in between nats-server and jetraft."""

from __future__ import annotations

import os
import pty
import re
import select
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.pipeline.servers import HOST, NATS_SERVER, NatsServerProcesses

REPO = Path(__file__).resolve().parents[2]
CLI_ENV = "NATS_CLI"
# the system account's user on the reference nats-server; jetraft has no accounts and lets anyone
# ask the `$SYS` requests, so the same credentials work on both
SYS_USER, SYS_PASSWORD = "admin", "admin"
APP_ACCOUNT = "APP"
CLUSTER = "jetraft"


def find_cli() -> Path | None:
    """$NATS_CLI, else the project's build (.tools/bin/nats), else `nats` on PATH."""
    for candidate in (os.environ.get(CLI_ENV), str(REPO / ".tools" / "bin" / "nats"), shutil.which("nats")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


@dataclass
class CliResult:
    returncode: int
    output: str  # stdout and stderr together, as an operator sees them


def run_cli(cli: Path, url: str, args: list[str], timeout: float = 30.0, system: bool = False) -> CliResult:
    argv = [str(cli), "--no-context", "-s", url]
    if system:
        argv += ["--user", SYS_USER, "--password", SYS_PASSWORD]
    env = {**os.environ, "NO_COLOR": "1", "HOME": os.environ.get("HOME", "/tmp")}
    proc = subprocess.run(
        argv + args, capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL
    )
    return CliResult(proc.returncode, proc.stdout + proc.stderr)


def run_in_terminal(cli: Path, url: str, args: list[str], timeout: float = 30.0) -> CliResult:
    """A command that insists on a terminal (`stream view` pages): run on a pseudo-terminal, its
    output read until it exits (bounded by `timeout`)."""
    main, child = pty.openpty()
    argv = [str(cli), "--no-context", "-s", url, *args]
    with subprocess.Popen(argv, stdin=child, stdout=child, stderr=child) as proc:
        os.close(child)
        chunks: list[bytes] = []
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                ready, _, _ = select.select([main], [], [], 0.2)
                if not ready:
                    if proc.poll() is not None:
                        break
                    continue
                try:
                    data = os.read(main, 65536)
                except OSError:  # EIO: the child side closed
                    break
                if not data:
                    break
                chunks.append(data)
        finally:
            os.close(main)
            if proc.poll() is None:
                proc.kill()
        returncode = proc.wait(timeout=10)
    return CliResult(returncode, b"".join(chunks).decode(errors="replace").replace("\r\n", "\n"))


def run_bounded(cli: Path, url: str, args: list[str], seconds: float) -> CliResult:
    """A command that runs until stopped (`kv watch`): what it printed in `seconds`, then SIGTERM."""
    argv = [str(cli), "--no-context", "-s", url, *args]
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True
    ) as proc:
        try:
            output, _ = proc.communicate(timeout=seconds)
            return CliResult(proc.returncode, output)
        except subprocess.TimeoutExpired:
            proc.terminate()
            output, _ = proc.communicate(timeout=10)
            return CliResult(0, output)  # still watching when stopped: what a watch should do


class ReferenceCluster(NatsServerProcesses):
    """nats-server nodes named n1.. in a cluster named like jetraft's, with a system account (the
    CLI's `server` commands need one) beside the account clients land in without credentials."""

    def command(self, name: str, jetstream: bool = True) -> list[str]:
        routes = ", ".join(
            f'"nats://{HOST}:{port}"' for peer, port in self.cluster_ports.items() if peer != name
        )
        cluster = (
            f"cluster {{ name: {CLUSTER}, listen: {HOST}:{self.cluster_ports[name]}, routes: [{routes}] }}"
            if self.cluster_ports
            else ""
        )
        config = f"""
listen: {HOST}:{self.ports[name]}
http: {HOST}:{self.monitor_ports[name]}
server_name: {name}
jetstream {{ store_dir: "{self.workdir / name}" }}
{cluster}
accounts {{
  $SYS {{ users = [ {{ user: {SYS_USER}, password: {SYS_PASSWORD} }} ] }}
  {APP_ACCOUNT} {{ jetstream: enabled, users = [ {{ user: app, password: app }} ] }}
}}
no_auth_user: app
"""
        self.workdir.mkdir(parents=True, exist_ok=True)
        path = self.workdir / f"{name}.conf"
        path.write_text(config)
        return [str(NATS_SERVER), "-c", str(path)]


# What legitimately differs between two runs or two servers, each replaced by a placeholder.
_NORMALISERS: list[tuple[re.Pattern[str], str]] = [
    # timestamps: RFC 3339 and the CLI's "2006-01-02 15:04:05" / "15:04:05" forms
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d| UTC)?"), "<time>"),
    (re.compile(r"\b\d\d:\d\d:\d\d\b"), "<time>"),
    # durations as Go and humanize print them ("1.5ms", "2m0s", "3s ago", "4 seconds")
    (re.compile(r"\b(\d+(\.\d+)?(y|d|h|m|s|ms|µs|us|ns))+\b"), "<dur>"),
    (re.compile(r"\b\d+ (seconds?|minutes?|milliseconds?)\b"), "<dur>"),
    # nats-server ids: server ids, client ids, nuid inboxes, Raft group names
    (re.compile(r"\bN[A-Z0-9]{55}\b"), "<server-id>"),
    (re.compile(r"\b[SC]-[A-Za-z0-9_-]+\b"), "<group>"),
    (re.compile(r"_INBOX\.[A-Za-z0-9.]+"), "<inbox>"),
    (re.compile(r"nats://127\.0\.0\.1:\d+"), "<url>"),
    (re.compile(r"127\.0\.0\.1:\d+"), "<address>"),
    (re.compile(r"(Client ID:\s+)\d+"), r"\1<cid>"),
    # a replica's progress as its leader saw it at that moment (timing: one operation behind, last
    # heard from a moment ago or not yet); tests/node/test_cli_shapes.py checks jetraft reports it
    (re.compile(r"(Replica: n[1-9](/w[0-9]+)?),.*$", re.M), r"\1, <replica-state>"),
    # which node leads or answers (placement is each server's own choice); a several-worker node's
    # member is one of its workers (`n1/w0`, cluster/runtime/workers.py), on the same machine
    # (a stream report marks the leader with * and a replica not current at that moment with !)
    (re.compile(r"\bn[1-9](/w[0-9]+)?[*!]*"), "<node>"),
    # the account clients land in: nats-server's configured APP (user app), jetraft's only one ($G)
    (re.compile(r"Account: (APP \(APP\)|\$G \(\$G\))"), "Account: <account>"),
    (re.compile(r"(User:) (app)?$", re.M), r"\1 <user>"),
    # table borders stretch with the width of what they hold
    (re.compile(r"[─━┄]+"), "─"),
    # account usage: nats-server adds up what each server reports of its replicas a moment later,
    # so its figure trails until every replica has reported (tests/node/test_account_usage.py
    # checks jetraft's: each stream's bytes times its replicas)
    (re.compile(r"(Storage:) [0-9.]+ [KMG]?i?B"), r"\1 <size>"),
    (re.compile(r"storage=\d+B"), "storage=<size>"),
    # go-cmp (stream edit's diff) puts non-breaking spaces in at random, to stop exactly this
    (re.compile(r"^[ \t\u00a0]+", re.M), ""),
    (re.compile(r"[ \t\u00a0]+"), " "),
]


def normalise(text: str) -> str:
    for pattern, replacement in _NORMALISERS:
        text = pattern.sub(replacement, text)
    return "\n".join(line.rstrip() for line in text.strip().splitlines())
