"""A node's configuration: from `jetraft node` flags or a TOML file, one dataclass either way."""

from __future__ import annotations

import argparse
import math
import os
import socket
import ssl
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from cluster.node.natsconf.parser import ConfSyntaxError, parse
from cluster.node.natsconf.settings import ConfKeyError, node_settings
from cluster.runtime.account_limits import UNLIMITED, JetStreamAccountLimits
from cluster.runtime.default_limits import default_limits
from cluster.runtime.server_limits import ServerJetStreamLimits
from gateway.accounts import SYSTEM_ACCOUNT, Accounts
from gateway.auth import NkeyUser, User
from gateway.jwt.claims import JwtAccount
from gateway.limits import DEFAULT_MAX_PENDING
from gateway.protocol import DEFAULT_MAX_PAYLOAD
from gateway.queue_policy import POLICY_NAMES
from gateway.transports.tls import TlsSettings, server_context
from gateway.transports.websocket_settings import WebSocketSettings
from storage.nats_time import format_go_duration

DIRECT_GET_POLICIES = POLICY_NAMES
DEFAULT_DIRECT_GET_POLICY = "random"
# The secret every node of a cluster proves itself with on the cluster port, when no config file sets one.
CLUSTER_SECRET_ENV = "JETRAFT_CLUSTER_SECRET"


class ConfigError(ValueError):
    """A node configuration that cannot run; the message names the offending setting."""


@dataclass(slots=True)
class NodeConfig:
    name: str
    host: str = "127.0.0.1"
    client_port: int = 4222
    cluster_port: int = 6222
    http_port: int = 8222
    # peer name -> the host:port this node dials to reach that peer's cluster port
    # (a Toxiproxy proxy's address when the link is faultable)
    peers: dict[str, str] = field(default_factory=dict)
    data_dir: str = "./data"
    tags: list[str] = field(default_factory=list)
    # Which member of a queue group gets a message: clients' queue groups choose at random cluster-wide,
    # as nats-server does. Direct Get's group `_sys_` prefers the replica on the requester's node: in
    # jetraft a forwarded Direct Get costs the node it was sent to more than answering it would
    # (bench/README.md), so spreading one client's reads over the replicas only adds work.
    queue_policy: str = "random"
    direct_get_policy: str = DEFAULT_DIRECT_GET_POLICY
    log_level: str | None = None  # None: $JETRAFT_LOG_LEVEL, else INFO
    log_format: str = "auto"
    user: str | None = None
    # secrets stay out of repr, so that no log line carries them
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    # nats-server's `authorization { users = [...] }`: each user's password and permissions
    users: list[User | NkeyUser] = field(default_factory=list)
    # nats-server's no_auth_user: who a client that gives no credentials is (one of `users`)
    no_auth_user: str | None = None
    # the client URL other nodes advertise for this node (INFO connect_urls)
    advertise: str | None = None
    # nats-server's `jetstream { domain }` (or `--domain`): the cluster also answers $JS.<domain>.API (ADR-19)
    domain: str | None = None
    # A file-stored stream's group takes a snapshot (a store sync and a marker) every this many entries
    # and keeps this many entries behind it, for followers that lag a little.
    stream_snapshot_interval: int = 20_000
    stream_compact_keep: int = 5_000
    # nats-server's `cluster { name }`: shown to clients in INFO, as nats-server does
    cluster_name: str | None = None
    # The secret peers must present on the cluster port (cluster.authorization, or $JETRAFT_CLUSTER_SECRET);
    # None lets any caller in. Kept out of repr so that it is never logged.
    cluster_secret: str | None = field(default=None, repr=False)
    max_payload: int = DEFAULT_MAX_PAYLOAD
    # seconds a client has to send CONNECT when authentication is required (authorization.timeout)
    auth_timeout: float = 2.0
    # nats-server's max_connections (0: no limit, below 0: none) and max_subscriptions per connection
    max_connections: int = 0
    max_subscriptions: int = 0
    # nats-server's `tls { ... }` for the client port
    tls: TlsSettings | None = None
    # nats-server's `websocket { ... }`: the client protocol over WebSocket, on its own port
    websocket: WebSocketSettings | None = None
    # `cluster { tls { ... } }`: mutual TLS between nodes (each certificate names its node)
    cluster_tls: TlsSettings | None = None
    # nats-server's `accounts { ... }`: isolated subject spaces joined by exports and imports
    accounts: Accounts | None = None
    # the JetStream account's limits (`accounts { A: { jetstream { max_mem, ... } } }`); not a flag or TOML key
    jetstream_limits: JetStreamAccountLimits = UNLIMITED
    # every JetStream account's limits, the home account's included (absent: no limits); from the file too
    jetstream_account_limits: dict[str, JetStreamAccountLimits] = field(default_factory=dict)
    # operator mode (a config file's `operator` and `resolver_preload`): every account from its JWT, by
    # public key; clients then authenticate with user JWTs. Not a flag or TOML key.
    jwt_accounts: dict[str, JwtAccount] | None = None
    # nats-server's system_account: the account whose users may ask the servers' `$SYS.REQ.SERVER`
    # requests (one of `accounts`). Unset, jetraft answers them in the home account (a departure).
    system_account: str | None = None
    # nats-server's `jetstream { max_memory_store, max_file_store }`: bytes this node's streams may hold in
    # memory and on disk (one replica's worth, this node's own); None or below 0: not set, as nats-server
    # takes a negative one, and nats-server's defaults then (`server_limits`: 75% of memory and of the disk)
    max_memory_store: int | None = None
    max_file_store: int | None = None
    # nats-server's `jetstream { limits { max_ack_pending, max_request_batch } }` (0 or less: none): what a
    # consumer may ask for, and its default where lower
    jetstream_max_ack_pending: int = 0
    jetstream_max_request_batch: int = 0
    # `jetstream { limits { duplicate_window } }`, in nanoseconds (0 or less: none): a stream's largest
    # duplicate window, and its default's cap
    jetstream_duplicate_window: int = 0
    # Idle Raft groups quiesce: no heartbeats or ticks until something happens; the node's keepalive
    # frames (one per pair of nodes) carry liveness instead (docs/architecture.md). On by default;
    # `--no-quiesce` or `quiesce = false` keeps every group heartbeating.
    quiesce: bool = True
    # Seconds a client's publish on a stream's subject that meets no stream leader is held by its node,
    # waiting for the leader's interest (cluster/runtime/publish_hold.py, docs/config-fields.md). 0, the
    # default, holds nothing: the publish is answered 503 no responders at once, as nats-server does.
    publish_hold: float = 0.0
    # nats-server's lame_duck_duration and lame_duck_grace_period, in seconds: on SIGUSR2 the node stops
    # taking clients, hands its Raft leaderships over, tells its clients, waits the grace period, then
    # closes them spread over the rest of the duration and stops (cluster/node/lame_duck.py)
    lame_duck_duration: float = 120.0
    lame_duck_grace_period: float = 10.0
    # Worker processes of this node (cluster/node/supervision/supervisor.py): more than one, and a supervisor runs
    # them, each a cluster member of its own (`<name>/w<i>`) on the node's client port (SO_REUSEPORT)
    # and on cluster port `cluster_port + i`. Every node of a cluster must run the same number: a peer's
    # workers are found at its cluster port plus their index.
    workers: int = 1
    # set by the supervisor on the command line of the worker it starts; never in a config file
    worker_index: int | None = None

    @property
    def system_account_name(self) -> str:
        """The system account as nats-server reports it: the configured one, else `$SYS`."""
        return self.system_account or SYSTEM_ACCOUNT

    def validate(self) -> None:
        if not self.name or any(ch in self.name for ch in " .*>/"):
            raise ConfigError(
                f"node name {self.name!r} must be non-empty without spaces, dots, slashes or wildcards"
            )
        for setting, value in (("queue_policy", self.queue_policy), ("direct_get_policy", self.direct_get_policy)):
            if value not in POLICY_NAMES:
                raise ConfigError(f"{setting} {value!r} is not one of {', '.join(POLICY_NAMES)}")
        for port_name in ("client_port", "cluster_port", "http_port"):
            port = getattr(self, port_name)
            if not 0 <= port <= 65535:
                raise ConfigError(f"{port_name} {port} is out of range")
        if self.name in self.peers:
            raise ConfigError(f"node {self.name!r} lists itself as a peer")
        for peer, address in self.peers.items():
            if "/" in peer:
                raise ConfigError(f"peer name {peer!r} must not contain a slash (it names a worker)")
            host, sep, port = address.rpartition(":")
            if not sep or not host or not port.isdigit():
                raise ConfigError(f"peer {peer!r} address {address!r} is not host:port")
        if (self.user is None) != (self.password is None):
            raise ConfigError("user and password go together")
        if self.domain is not None and (not self.domain or any(ch in self.domain for ch in " .*>")):
            raise ConfigError(f"domain {self.domain!r} must be one token: no spaces, dots or wildcards")
        if self.stream_snapshot_interval < 1 or self.stream_compact_keep < 0:
            raise ConfigError("stream_snapshot_interval must be at least 1 and stream_compact_keep not negative")
        if not isinstance(self.quiesce, bool):
            raise ConfigError(f"quiesce must be true or false, not {self.quiesce!r}")
        hold = self.publish_hold
        if isinstance(hold, bool) or not isinstance(hold, int | float) or not math.isfinite(hold) or hold < 0:
            raise ConfigError(f"publish_hold must be a number of seconds, 0 (off) or more, not {hold!r}")
        if self.token is not None and self.user is not None:
            raise ConfigError("use either a token or a user and password, not both")
        if self.users and (self.user is not None or self.token is not None):
            raise ConfigError("use a users list, or a single user or token, not both")
        names = [user.name if isinstance(user, User) else user.public_key for user in self.users]
        if len(set(names)) != len(names):
            raise ConfigError("a user or nkey is listed twice in authorization.users")
        if self.no_auth_user is not None and self.no_auth_user not in names:
            raise ConfigError(f"no_auth_user {self.no_auth_user!r} is not one of the users")
        if self.cluster_secret is not None and not self.cluster_secret:
            raise ConfigError("the cluster secret must not be empty")
        if self.tls is not None:
            try:
                server_context(self.tls)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(
                    f"tls: cannot serve with cert_file {self.tls.cert_file}, key_file {self.tls.key_file}"
                    f"{f', ca_file {self.tls.ca_file}' if self.tls.ca_file else ''}: {exc}"
                ) from exc
        if self.system_account is not None and (
            self.accounts is None or self.system_account not in self.accounts.accounts
        ):
            raise ConfigError(f"system_account {self.system_account!r} is not one of the configured accounts")
        if self.accounts is not None:
            for user in self.users:
                if user.account not in self.accounts.accounts:
                    raise ConfigError(f"a user is in account {user.account!r}, which is not configured")
        if self.cluster_tls is not None:
            if not self.cluster_tls.ca_file:
                raise ConfigError("cluster tls: ca_file is needed, to verify the other nodes' certificates")
            try:
                server_context(self.cluster_tls)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(f"cluster tls: cannot use its files: {exc}") from exc
        if self.max_payload < 1 or self.auth_timeout <= 0:
            raise ConfigError("max_payload must be at least 1 and the auth timeout positive")
        if self.max_payload > DEFAULT_MAX_PENDING:  # nats-server's check and words (max_pending is not settable yet)
            raise ConfigError(
                f"max_payload ({self.max_payload}) cannot be higher than max_pending ({DEFAULT_MAX_PENDING})"
            )
        for setting in (
            "max_memory_store", "max_file_store", "jetstream_max_ack_pending", "jetstream_max_request_batch",
            "jetstream_duplicate_window",
        ):  # fmt: skip
            value = getattr(self, setting)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ConfigError(f"{setting} must be an integer, not {value!r}")
        if self.websocket is not None:
            problem = self.websocket.problem()
            if problem is not None:
                raise ConfigError(problem)
            if self.websocket.tls is not None:
                try:
                    server_context(self.websocket.tls)
                except (OSError, ssl.SSLError) as exc:
                    raise ConfigError(f"websocket tls: cannot use its files: {exc}") from exc
        if self.lame_duck_duration > 0 and self.lame_duck_grace_period >= self.lame_duck_duration:
            grace, duration = (format_go_duration(int(x * 1e9)) for x in (self.lame_duck_grace_period, self.lame_duck_duration))
            raise ConfigError(
                f"lame duck grace period ({grace}) should be strictly lower than lame duck duration ({duration})"
            )
        self._validate_account_within_node()
        self._validate_workers()

    def _validate_account_within_node(self) -> None:
        """A nats-server without a cluster will not start JetStream when the account may hold more than the
        server (sufficientResources; a clustered one does not check): nor does a node without peers. Its
        default memory limit counts there, its default storage limit does not (nats-server 2.15.1 starts
        with an account's max_file of a petabyte unless max_file_store is set)."""
        if self.peers or self.workers > 1:
            return
        node, account = self.server_limits, self.jetstream_limits
        storage_set = self.max_file_store is not None and self.max_file_store >= 0
        for kind, code, account_limit, node_limit in (
            ("memory", 10028, account.max_memory, node.max_memory),
            ("storage", 10047, account.max_storage, node.max_storage if storage_set else None),
        ):
            if node_limit is not None and account_limit > 0 and account_limit > node_limit:
                raise ConfigError(
                    "Can't start JetStream: Error enabling jetstream on configured accounts: "
                    f"insufficient {kind} resources available ({code})"
                )

    def _validate_workers(self) -> None:
        if self.workers < 1:
            raise ConfigError(f"workers {self.workers} must be at least 1")
        if self.workers > 1 and (self.client_port == 0 or self.cluster_port == 0):
            raise ConfigError("a node with several workers needs a fixed client port and cluster port (not 0)")
        if self.cluster_port + self.workers - 1 > 65535:
            raise ConfigError(f"cluster ports {self.cluster_port}..+{self.workers - 1} are out of range")
        if self.worker_index is not None and not 0 <= self.worker_index < self.workers:
            raise ConfigError(f"worker index {self.worker_index} is not below workers {self.workers}")

    @property
    def server_limits(self) -> ServerJetStreamLimits:
        """The node's own limits: those configured, else nats-server's defaults (cluster/runtime/default_limits.py)."""
        memory, storage = default_limits(str(self.node_data_dir))

        def configured(value: int | None, default: int) -> int:
            return value if value is not None and value >= 0 else default

        return ServerJetStreamLimits(
            configured(self.max_memory_store, memory),
            configured(self.max_file_store, storage),
            max_ack_pending=self.jetstream_max_ack_pending,
            max_request_batch=self.jetstream_max_request_batch,
            duplicate_window_ns=self.jetstream_duplicate_window,
        )

    @property
    def client_url(self) -> str:
        return self.advertise or f"nats://{self.host}:{self.client_port}"

    @property
    def node_data_dir(self) -> Path:
        return Path(self.data_dir) / self.name


def parse_peer(spec: str) -> tuple[str, str]:
    name, sep, address = spec.partition("=")
    if not sep or not name or not address:
        raise ConfigError(f"--peer {spec!r} must be NAME=HOST:PORT")
    return name, address


def load_toml(path: str | Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
    known = {f.name for f in fields(NodeConfig)} - {"worker_index", "jetstream_limits", "jetstream_account_limits", "jwt_accounts"}  # not settings of a TOML file
    unknown = set(data) - known
    if unknown:
        raise ConfigError(f"config file {path}: unknown settings {', '.join(sorted(unknown))}")
    return data


def load_nats_conf(path: str | Path, environment: dict[str, str] | None = None) -> dict[str, Any]:
    """The NodeConfig fields a nats-server configuration file sets (`include`s read beside it)."""

    def read_file(name: str, including: str) -> tuple[str, str]:
        included = Path(including).parent / name
        return str(included), included.read_text()

    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 text: {exc}") from exc
    try:
        conf = parse(text, file=str(path), read_file=read_file, environment=environment or dict(os.environ))
        return node_settings(conf)
    except (ConfSyntaxError, ConfKeyError) as exc:
        raise ConfigError(str(exc)) from exc


def load_config_file(path: str | Path) -> dict[str, Any]:
    """TOML for a `.toml` file, nats-server's format for any other."""
    return load_toml(path) if str(path).endswith(".toml") else load_nats_conf(path)


def add_node_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        help="nats-server configuration file, or a .toml file with the same settings as the flags (flags win)",
    )
    parser.add_argument("--name", help="node name, e.g. n1")
    parser.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", dest="client_port", type=int, help="NATS client port (default 4222)")
    parser.add_argument("--cluster-port", type=int, help="node-to-node gRPC port (default 6222)")
    parser.add_argument("--http-port", type=int, help="/healthz and /metrics port (default 8222)")
    parser.add_argument("--peer", action="append", default=[], help="NAME=HOST:PORT of a peer's cluster port")
    parser.add_argument("--data-dir", help="directory for this node's data (a subdirectory per node name)")
    parser.add_argument("--tag", action="append", default=[], dest="tags", help="placement tag (repeatable)")
    parser.add_argument(
        "--queue-policy", choices=POLICY_NAMES, help="member choice for clients' queue groups (random)"
    )
    parser.add_argument(
        "--direct-get-policy", choices=DIRECT_GET_POLICIES, help="responder choice for Direct Get (random, as nats-server)"
    )
    parser.add_argument("--log-level", help="DEBUG, INFO, WARNING, ERROR (or $JETRAFT_LOG_LEVEL)")
    parser.add_argument("--log-format", choices=("json", "console", "auto"))
    parser.add_argument("--user")
    parser.add_argument("--password")
    parser.add_argument("--token")
    parser.add_argument("--advertise", help="client URL to advertise to clients, e.g. nats://host:4222")
    parser.add_argument(
        "--domain", help="JetStream domain, answered as $JS.<domain>.API: the config file's jetstream { domain: D }"
    )
    parser.add_argument(
        "--workers",
        type=int,
        help="worker processes, each a cluster member on the node's ports (1; the same on every node)",
    )
    parser.add_argument("--worker-index", type=int, help=argparse.SUPPRESS)  # the supervisor's, for its workers
    parser.add_argument(
        "--stream-snapshot-interval", type=int, help="entries between file-stored streams' snapshots (20000)"
    )
    parser.add_argument(
        "--stream-compact-keep", type=int, help="entries a stream's log keeps behind its snapshot (5000)"
    )
    parser.add_argument(
        "--quiesce",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="idle Raft groups stop heartbeating; node keepalives carry liveness (on by default)",
    )
    parser.add_argument(
        "--publish-hold",
        type=_seconds,
        metavar="SECONDS",
        help="hold a client's publish on a stream's subject that meets no stream leader this long, waiting"
        " for one (0: off, the default: answered 503 no responders at once, as nats-server does)",
    )


def _seconds(text: str) -> float:
    """A flag's number of seconds (argparse prefixes the error with the flag); `validate` checks its range."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None


def host_node_name(hostname: str) -> str:
    """A node name from the host's name: its first label, with what a name may not hold made dashes."""
    label = hostname.split(".", 1)[0]
    name = "".join("-" if ch in " */>" else ch for ch in label)
    return name or "jetraft"


def config_from_args(args: argparse.Namespace) -> NodeConfig:
    settings: dict[str, Any] = load_config_file(args.config) if args.config else {}
    if "cluster_secret" not in settings and os.environ.get(CLUSTER_SECRET_ENV):
        settings["cluster_secret"] = os.environ[CLUSTER_SECRET_ENV]
    for key in (
        "name", "host", "client_port", "cluster_port", "http_port", "data_dir", "queue_policy",
        "direct_get_policy", "log_level", "log_format", "user", "password", "token", "advertise", "domain",
        "stream_snapshot_interval", "stream_compact_keep", "quiesce", "publish_hold", "workers", "worker_index",
    ):  # fmt: skip
        value = getattr(args, key)
        if value is not None:
            settings[key] = value
    if args.peer:
        settings["peers"] = dict(parse_peer(spec) for spec in args.peer)
    if args.tags:
        settings["tags"] = list(args.tags)
    if not settings.get("name"):
        if settings.get("peers"):
            # its peers know it by name, and its Raft groups keep their members' names on disk
            raise ConfigError("a node with peers needs a name (--name, or server_name in the config file)")
        # a node on its own may go unnamed, as a nats-server without server_name does: the host's name is
        # stable across restarts, which the name in its Raft groups on disk needs to be
        settings["name"] = host_node_name(socket.gethostname())
    config = NodeConfig(**settings)
    config.validate()
    return config
