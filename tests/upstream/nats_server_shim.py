"""Stand in for `nats-server` in nats-py's upstream test harness: start a one-node jetraft instead.

nats-py's tests (`nats/tests/utils.py`, class NATSD) run `nats-server -p PORT -m HTTP_PORT -a 127.0.0.1
[-js -sd=DIR] [--user U --pass P] [--auth TOKEN] [--config FILE] ...`, wait until GET /varz on the
HTTP port answers 200, and stop the server with SIGKILL. This shim translates the flags it can into
`jetraft node` flags, runs the node as its child, answers /varz on the HTTP port once the node's
/healthz says it is ready, and takes the node down with it (the node gets SIGKILL when the shim dies,
through PR_SET_PDEATHSIG, since a SIGKILLed shim cannot pass anything on).

A harness cluster (`--cluster_listen` with `--routes` naming every member) becomes a jetraft cluster of
those members, each shim's node one of them (see cluster_args).

A flag with no jetraft equivalent is not dropped silently: each one is reported as a `notice:` line on
stderr and appended to $JETRAFT_SHIM_LOG when set (the runner prints them in its summary).
"""

from __future__ import annotations

import contextlib
import ctypes
import http.server
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NODE_NAME = "n1"
READY_TIMEOUT = 30.0  # seconds for the node's meta group to elect itself
PORT_FREE_TIMEOUT = 10.0  # seconds for the previous test's node (SIGKILLed with its shim) to let go
PR_SET_PDEATHSIG = 1

# nats-server flags whose value is the next argument (when not given as -flag=value)
VALUE_FLAGS = {
    "p", "port", "m", "http_port", "a", "addr", "net", "user", "pass", "auth", "sd", "store_dir",
    "c", "config", "tlscert", "tlskey", "tlscacert", "cluster_listen", "cluster", "routes",
    "cluster_name", "n", "name", "server_name", "l", "log", "P", "pid", "ms", "https_port",
    "ports_file_dir", "client_advertise", "cluster_advertise", "connect_retries",
}  # fmt: skip
DEBUG_FLAGS = {"D", "V", "DV", "VV", "DVV", "debug", "trace"}
# nats-server's TLS flags -> the `tls { }` key each sets ("tls" itself turns TLS on)
TLS_FLAGS = {"tls": "tls", "tlscert": "cert_file", "tlskey": "key_file", "tlscacert": "ca_file", "tlsverify": "verify"}


@dataclass
class Translation:
    node_args: list[str] = field(default_factory=list)
    http_port: int = 8222
    client_port: int = 4222
    host: str = "127.0.0.1"
    data_dir: str | None = None
    jetstream: bool = False
    # --tls with its files: handed to the node as a config file's `tls { }` block (see config_args)
    tls: dict[str, str] = field(default_factory=dict)
    # the config file handed to the node whole, if any: the --tls flags' block is added beside it
    config_file: str | None = None
    # --cluster_listen's address and --routes (see cluster_args)
    cluster_listen: str | None = None
    routes: list[str] = field(default_factory=list)
    node_name: str = NODE_NAME
    cluster_port: int | None = None  # set for a member of a harness cluster (see cluster_args); else a free one
    notices: list[str] = field(default_factory=list)

    @property
    def clustered(self) -> bool:
        """A member of a harness cluster (see cluster_args)."""
        return self.cluster_port is not None


def split_flags(argv: list[str]) -> list[tuple[str, str | None]]:
    """nats-server's flags as (name, value): Go's flag package takes -f, --f, -f=v and -f v alike."""
    flags: list[tuple[str, str | None]] = []
    args = iter(argv)
    for arg in args:
        if not arg.startswith("-"):
            flags.append(("", arg))
            continue
        name, sep, value = arg.lstrip("-").partition("=")
        if sep:
            flags.append((name, value))
        elif name in VALUE_FLAGS:
            flags.append((name, next(args, None)))
        else:
            flags.append((name, None))
    return flags


def translate(argv: list[str]) -> Translation:
    out = Translation()
    for name, value in split_flags(argv):
        if name in ("p", "port"):
            out.client_port = int(value or 4222)
        elif name in ("m", "http_port"):
            out.http_port = int(value or 8222)
        elif name in ("a", "addr", "net"):
            out.host = value or out.host
        elif name == "user":
            out.node_args += ["--user", value or ""]
        elif name == "pass":
            out.node_args += ["--password", value or ""]
        elif name == "auth":
            out.node_args += ["--token", value or ""]
        elif name in ("js", "jetstream"):
            out.jetstream = True
        elif name in ("sd", "store_dir"):
            out.data_dir = value
        elif name in DEBUG_FLAGS:
            out.node_args += ["--log-level", "DEBUG"]
        elif name in ("c", "config"):
            whole = translate_config_file(value or "", out.notices)
            if whole[:1] == ["--config"]:
                out.config_file = whole[1]
            else:
                out.node_args += whole
        elif name in TLS_FLAGS:
            out.tls[TLS_FLAGS[name]] = value or "true"
        elif name in ("cluster_listen", "cluster"):
            out.cluster_listen = route_address(value or "")
        elif name == "routes":
            out.routes = [route_address(route) for route in (value or "").split(",") if route]
        else:
            shown = f"-{name}" + (f" {value}" if value is not None else "") if name else repr(value)
            out.notices.append(f"{shown}: no jetraft equivalent, not applied")
    if out.tls and "tls" not in out.tls:
        out.notices.append("--tlscert/--tlskey without --tls: not applied (nats-server serves plain then too)")
        out.tls.clear()
    out.node_args += cluster_args(out)
    if not out.jetstream:
        out.notices.append(
            "no -js: jetraft always runs JetStream, where this nats-server would answer JetStream "
            "API requests with no responders"
        )
    return out


def route_address(url: str) -> str:
    """`nats://127.0.0.1:6223` (or `nats-route://...`) -> `127.0.0.1:6223`."""
    return url.split("://", 1)[-1].rstrip("/")


def member_name(address: str) -> str:
    """The node name a cluster member gets from its cluster address: every shim of one harness cluster
    derives the same names from the same --routes."""
    return "r" + address.rsplit(":", 1)[-1]


def cluster_args(plan: Translation) -> list[str]:
    """A harness cluster (`--cluster_listen` and `--routes`) as jetraft members named up front.

    nats-py's ClusteringTestCase gives every server the whole list of routes, its own among them, and starts
    them one at a time: each shim can name every member, so its node is one of a fixed cluster of them, and
    serves its clients alone until the others come up, then tells them the others' client URLs (INFO
    connect_urls). A list that leaves the server itself out is a seed to learn the rest from by gossip
    (ClusteringDiscoveryAuthTestCase: every server routes to the first only), which jetraft does not do: such
    a node runs alone, and the notice says so."""
    if plan.cluster_listen is None:
        if plan.routes:
            plan.notices.append("--routes without --cluster_listen: not applied")
        return []
    if plan.cluster_listen not in plan.routes:
        if plan.routes:
            plan.notices.append(
                "--routes naming seeds (not every member): jetraft names its members up front and finds "
                "no others by gossip; the node runs alone"
            )
        return []
    plan.node_name = member_name(plan.cluster_listen)
    plan.cluster_port = int(plan.cluster_listen.rsplit(":", 1)[-1])
    args: list[str] = []
    for address in plan.routes:
        if address != plan.cluster_listen:
            args += ["--peer", f"{member_name(address)}={address}"]
    return args


def config_args(plan: Translation, directory: str) -> list[str]:
    """`--config FILE` for the node: the harness's file, with the `tls { }` block nats-server's --tls flags
    make added beside it (the file included whole), or that block alone; nothing without either."""
    if not plan.tls:
        return ["--config", plan.config_file] if plan.config_file else []
    lines = [f'  {key}: "{value}"' for key, value in plan.tls.items() if key not in ("tls", "verify")]
    if "verify" in plan.tls:
        lines.append("  verify: true")
    included = f'include "{plan.config_file}"\n' if plan.config_file else ""
    path = Path(directory) / "tls-flags.conf"
    path.write_text(included + "tls {\n" + "\n".join(lines) + "\n}\n")
    return ["--config", str(path)]


def translate_config_file(path: str, notices: list[str]) -> list[str]:
    """A file jetraft reads whole (`jetraft node --config`: accounts, their JetStream limits, no_auth_user,
    `jetstream { domain }`, ...) is handed to the node as it is; the flags the harness gives beside it win,
    as on nats-server. A file jetraft refuses is reported with jetraft's reason, and only its
    `jetstream { domain }` is applied (as --domain); every other top-level block is reported by name."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        notices.append(f"--config {path}: cannot read ({exc.strerror}), not applied")
        return []
    reason = jetraft_refuses(path)
    if reason is None:
        return ["--config", str(Path(path).resolve())]
    notices.append(f"--config {Path(path).name}: jetraft refuses it ({reason}); only its domain is applied")
    text = re.sub(r"(?m)^\s*(#|//).*$", "", text)
    args: list[str] = []
    for key, body in top_level_blocks(text):
        domain = re.search(r"\bdomain\s*[:=]?\s*\"?([\w-]+)", body) if key == "jetstream" else None
        if domain:
            args += ["--domain", domain.group(1)]
            rest = body.replace(domain.group(0), "").strip(' \t\r\n{}":=')
            if rest:
                notices.append(f"--config {Path(path).name}: jetstream settings besides domain not applied")
        else:
            notices.append(f"--config {Path(path).name}: '{key}' has no jetraft equivalent, not applied")
    return args


def jetraft_refuses(path: str) -> str | None:
    """Why `jetraft node --config path` would not start (jetraft's own reading of the file), or None."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from cluster.node.config import ConfigError, load_nats_conf

    try:
        load_nats_conf(path)
    except ConfigError as exc:
        return str(exc)
    return None


def top_level_blocks(text: str) -> list[tuple[str, str]]:
    """(key, text up to the next top-level key) for each key at brace depth 0."""
    blocks: list[tuple[str, str]] = []
    depth, start, key = 0, 0, None
    for match in re.finditer(r"[{}]|^\s*([A-Za-z_][\w-]*)", text, re.MULTILINE):
        if match.group(0) == "{":
            depth += 1
        elif match.group(0) == "}":
            depth -= 1
        elif depth == 0 and match.group(1):
            if key is not None:
                blocks.append((key, text[start : match.start()]))
            key, start = match.group(1), match.end()
    if key is not None:
        blocks.append((key, text[start:]))
    return blocks


def report(notices: list[str]) -> None:
    log_path = os.environ.get("JETRAFT_SHIM_LOG")
    for notice in notices:
        print(f"nats-server shim: notice: {notice}", file=sys.stderr)
    if log_path and notices:
        with open(log_path, "a") as log:
            log.writelines(f"{notice}\n" for notice in notices)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_port_free(host: str, port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
                return
            except OSError:
                pass
        time.sleep(0.05)


def die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def wait_healthy(node: subprocess.Popen, health_url: str, deadline: float) -> bool:
    while time.monotonic() < deadline and node.poll() is None:
        with contextlib.suppress(OSError), urllib.request.urlopen(health_url, timeout=1) as response:
            if response.status == 200:
                return True
        time.sleep(0.05)
    return False


class MonitoringProxy(http.server.BaseHTTPRequestHandler):
    """The harness's HTTP port: each GET (its readiness probe /varz, the tests' /varz and /connz) is
    answered by the node's own monitoring port, status and body as the node gives them."""

    node_http = ""  # set on a subclass once the node's port is known

    def do_GET(self) -> None:
        try:
            with urllib.request.urlopen(f"{self.node_http}{self.path}", timeout=10) as response:
                status, body, kind = response.status, response.read(), response.headers.get("Content-Type")
        except urllib.error.HTTPError as exc:
            status, body, kind = exc.code, exc.read(), exc.headers.get("Content-Type")
        except OSError as exc:
            status, body, kind = 502, f"jetraft node unreachable: {exc}".encode(), "text/plain"
        self.send_response(status)
        self.send_header("Content-Type", kind or "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def main(argv: list[str]) -> int:
    plan = translate(argv)
    report(plan.notices)
    scratch = None
    if plan.data_dir is None:  # no -sd: a scratch dir under the runner's work dir (or /tmp)
        scratch = tempfile.mkdtemp(prefix="jetraft-shim-", dir=os.environ.get("JETRAFT_SHIM_SCRATCH"))
    node_http = free_port()
    conf_dir = tempfile.mkdtemp(prefix="jetraft-shim-conf-", dir=os.environ.get("JETRAFT_SHIM_SCRATCH")) if plan.tls else ""
    plan.node_args += config_args(plan, conf_dir)
    cmd = [
        sys.executable, "-m", "cluster.node.command", "--name", plan.node_name, "--host", plan.host,
        "--port", str(plan.client_port), "--cluster-port", str(plan.cluster_port or free_port()),
        "--http-port", str(node_http),
        "--data-dir", plan.data_dir or scratch or "", "--log-format", "console", *plan.node_args,
    ]  # fmt: skip
    wait_port_free(plan.host, plan.client_port, time.monotonic() + PORT_FREE_TIMEOUT)
    # in the harness's directory, as nats-server would be: a config file's relative paths (ws_tls.conf's
    # certificates) are read from there
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    node = subprocess.Popen(cmd, env=env, preexec_fn=die_with_parent)
    stopping = threading.Event()

    def stop(_signum: int, _frame: object) -> None:
        stopping.set()
        node.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    # lame duck mode (the harness's send_signal(SIGUSR2)): the node's own, which ends in its exit
    signal.signal(signal.SIGUSR2, lambda _signum, _frame: node.send_signal(signal.SIGUSR2))
    # A member started before the others has no meta leader, so its /healthz says 503 until they come, as a
    # nats-server JetStream cluster's does; it serves its clients already, which is what the harness awaits
    # (and what nats-server's js-enabled-only health check, the NATS Helm chart's probe, asks).
    health = f"http://127.0.0.1:{node_http}/healthz" + ("?js-enabled-only=true" if plan.clustered else "")
    if not wait_healthy(node, health, time.monotonic() + READY_TIMEOUT):
        print("nats-server shim: the jetraft node did not become ready", file=sys.stderr)
        node.kill()
        return node.wait() or 1
    # Only now bind the harness's HTTP port: it retries a refused connection, but spins on a non-200.
    handler = type("NodeMonitoring", (MonitoringProxy,), {"node_http": f"http://127.0.0.1:{node_http}"})
    varz = http.server.ThreadingHTTPServer((plan.host, plan.http_port), handler)
    threading.Thread(target=varz.serve_forever, daemon=True).start()
    code = node.wait()
    varz.shutdown()
    return 0 if stopping.is_set() else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
