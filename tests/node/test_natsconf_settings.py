"""`jetraft node --config FILE.conf`: what a node takes from a nats-server configuration file."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from cluster.node.config import ConfigError, NodeConfig, add_node_arguments, config_from_args, load_nats_conf
from cluster.node.natsconf.accounts import account_jetstream
from cluster.node.natsconf.parser import parse
from cluster.runtime.account_limits import UNLIMITED, JetStreamAccountLimits
from cluster.runtime.default_limits import default_limits
from gateway.auth import User
from gateway.permissions import ConnectionPermissions
from tests.gateway.throwaway_ca import make_certificates

# nats-server's own test/configs/cluster.conf, with jetraft's named routes and one shared secret.
CLUSTER_CONF = """# Cluster config file
server_name: n1
listen: 127.0.0.1:5242
http: 8222

jetstream {
  store_dir: "/tmp/js"
  domain: hub
}

cluster {
  listen: 127.0.0.1:5244
  name: xyz

  authorization {
    user: route_user
    password: top_secret
  }

  routes = [
    n2=nats-route://127.0.0.1:5245
    n3=127.0.0.1:5246
  ]
}

authorization {
  user:     derek
  password: monkey
  timeout:  1
}
max_payload: 512KB
"""


def _load(tmp_path: Path, text: str, *argv: str) -> NodeConfig:
    path = tmp_path / "node.conf"
    path.write_text(text)
    parser = argparse.ArgumentParser()
    add_node_arguments(parser)
    return config_from_args(parser.parse_args(["--config", str(path), *argv]))


def test_a_nats_server_config_sets_the_node(tmp_path: Path) -> None:
    config = _load(tmp_path, CLUSTER_CONF)
    assert (config.name, config.host, config.client_port, config.http_port) == ("n1", "127.0.0.1", 5242, 8222)
    assert (config.cluster_port, config.cluster_name) == (5244, "xyz")
    assert config.peers == {"n2": "127.0.0.1:5245", "n3": "127.0.0.1:5246"}
    assert (config.data_dir, config.domain) == ("/tmp/js", "hub")
    assert (config.user, config.password, config.auth_timeout) == ("derek", "monkey", 1.0)
    assert config.max_payload == 512 * 1024
    assert config.cluster_secret == "route_user:top_secret"
    assert "top_secret" not in repr(config)


def test_flags_still_win_over_the_file(tmp_path: Path) -> None:
    config = _load(tmp_path, CLUSTER_CONF, "--port", "4999", "--name", "other")
    assert (config.client_port, config.name) == (4999, "other")


def test_the_cluster_secret_comes_from_the_environment_when_the_file_has_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JETRAFT_CLUSTER_SECRET", "from-env")
    assert _load(tmp_path, "server_name: n1\n").cluster_secret == "from-env"
    assert _load(tmp_path, CLUSTER_CONF).cluster_secret == "route_user:top_secret"


def test_a_token_authorizes_the_cluster(tmp_path: Path) -> None:
    config = _load(tmp_path, "server_name: n1\ncluster { authorization { token: s3cr3t } }\n")
    assert config.cluster_secret == "s3cr3t"


def test_variables_used_as_variables_are_not_settings(tmp_path: Path) -> None:
    config = _load(tmp_path, "PW: monkey\nserver_name: n1\nauthorization { user: derek, password: $PW }\n")
    assert config.password == "monkey"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("server_name: n1\nlisten: 4222\nlisen: 4223\n", r"node.conf line 3: lisen: unknown setting"),
        ("server_name: n1\njetstream {\n  store_dri: x\n}\n", r"line 3: jetstream.store_dri: unknown setting"),
        ("server_name: n1\ntls {\n cert_file: a\n}\n", r"line 2: tls: TLS needs cert_file and key_file"),
        ("server_name: n1\ntls {\n cert_file: a\n key_file: b\n}\n", r"tls: cannot serve with cert_file a, key_file b"),
        ("server_name: n1\ncluster {\n tls { cert_file: a, key_file: b }\n}\n", "mutual TLS between nodes needs ca_file"),
        ("server_name: n1\ncluster {\n tls { cert_file: a, key_file: b, ca_file: c }\n}\n", "cluster tls: cannot use its files"),
        ("server_name: n1\ntls {\n cipher_suites: []\n}\n", r"line 3: tls.cipher_suites: nats-server's setting is not"),
        ("server_name: n1\ntls {\n handshake_first: 300ms\n}\n", r"line 3: tls.handshake_first: expected true or false"),
        # nats-server acknowledges from the page cache and syncs every interval: jetraft syncs every write
        (
            "server_name: n1\njetstream { sync_interval: 1s }\n",
            r"line 2: jetstream.sync_interval: jetraft fsyncs every write .* a periodic sync interval is not",
        ),
        # nats-server: "sync should be converted to a duration" (1m is a size, one million, in its format)
        ("server_name: n1\njetstream { sync: 1m }\n", r"line 2: jetstream.sync: expected a duration"),
        ("server_name: n1\njetstream { sync: often }\n", r"line 2: jetstream.sync: expected a duration"),
        # nats-server: unknown field "max_ack_pending" (it belongs in jetstream.limits, or an account's block)
        ("server_name: n1\njetstream {\n  max_ack_pending: 5\n}\n", r"line 3: jetstream.max_ack_pending: unknown"),
        # nats-server's getStorageSize: a string size ends in an upper-case K, M, G or T
        ("server_name: n1\njetstream {\n  max_mem: '1g'\n}\n", r"line 3: jetstream.max_mem: sizes defined as strings"),
        ("server_name: n1\njetstream {\n  max_file: '512MB'\n}\n", r"line 3: jetstream.max_file: '512M' of '512MB' is not"),
        ("server_name: n1\njetstream {\n  max_file_store: 1.5\n}\n", r"line 3: jetstream.max_file_store: expected a size"),
        ("server_name: n1\njetstream {\n  limits: 5\n}\n", r"line 3: jetstream.limits: expected a block"),
        ("server_name: n1\njetstream { limits {\n  max_ha_assets: 5\n} }\n", r"line 3: jetstream.limits.max_ha_assets: nats-server's"),
        ("server_name: n1\njetstream { limits {\n  batch: {}\n} }\n", r"line 3: jetstream.limits.batch: nats-server's"),
        ("server_name: n1\njetstream { limits {\n  duplicate_window: 1m\n} }\n", r"line 3: jetstream.limits.duplicate_window: expected a duration"),
        ("server_name: n1\njetstream { limits {\n  duplicate_window: '1 m'\n} }\n", r"jetstream.limits.duplicate_window: expected a duration"),
        ("server_name: n1\njetstream { limits {\n  max_acks_pending: 5\n} }\n", r"line 3: jetstream.limits.max_acks_pending: unknown"),
        ("server_name: n1\njetstream { limits {\n  max_ack_pending: '5'\n} }\n", r"line 3: jetstream.limits.max_ack_pending: expected an integer"),
        ("server_name: n1\njetstream {\n  max_memory_store: true\n}\n", r"line 3: jetstream.max_memory_store: expected a size"),
        ("server_name: n1\njetstream: disabled\n", "cannot be disabled"),
        ("server_name: n1\ncluster { routes: [nats-route://127.0.0.1:1] }\n", "routes name their peer"),
        ("server_name: n1\ncluster { routes: [n2=nats-route://u:p@127.0.0.1:1] }\n", "credentials in a route"),
        ("server_name: n1\ncluster { authorization { user: a } }\n", "user and password go together"),
        ("server_name: n1\nlisten: 127.0.0.1:4222\nhttp: 10.0.0.1:8222\n", "one address"),
        ("server_name: n1\nlisten: 127.0.0.1:70000\n", "expected host:port"),
        ("server_name: n1\nmax_payload: -1\n", "max_payload: expected an integer"),
        # nats-server's own words: max_payload may not pass max_pending (64 MB by default)
        ("server_name: n1\nmax_payload: 65MB\n", r"max_payload \(68157440\) cannot be higher than max_pending \(67108864\)"),
        (
            "server_name: n1\nauthorization { users: [ {nkey: UABC} ] }\n",
            r"authorization.users\[0\].nkey: 'UABC' is not an nkey user public key",
        ),
        (
            "server_name: n1\nauthorization { users: [ {user: a, password: b, permissions: {publish: {alow: x}}} ] }\n",
            r"line 2: authorization.users\[0\].permissions.publish.alow: unknown setting",
        ),
        (
            "server_name: n1\nauthorization { users: [ {user: a, password: b, permissions: {subscribe: 'a..b'}} ] }\n",
            "not a valid subject",
        ),
        ("server_name: n1\nauthorization { users: [ {password: a} ] }\n", "a user needs a user name"),
        ("server_name: n1\nno_auth_user: b\nauthorization { users: [ {user: a} ] }\n",
         r'line 2: no_auth_user: "b" not present as user or nkey'),
        ("server_name: n1\nno_auth_user: b\n", r'line 2: no_auth_user: "b" present, but users/nkeys are not defined'),
        ("server_name: n1\nlisten: [\n", "missing ']'"),
    ],
)
def test_what_jetraft_cannot_take_is_refused_by_name_and_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, text)


@pytest.mark.parametrize("setting", ["sync_interval: always", "sync: ALWAYS", 'sync_interval: "Always"'])
def test_sync_always_is_what_a_node_does_and_is_taken(tmp_path: Path, setting: str) -> None:
    # nats-server takes `always` under either name, in any case: an fsync before every acknowledgement
    config = _load(tmp_path, f"server_name: n1\njetstream {{ {setting} }}\n")
    assert config.name == "n1"


@pytest.mark.parametrize(
    ("written", "size"),
    [
        ("1G", 10**9),  # the config syntax's own suffixes: k, m, g are powers of 1000
        ("512MB", 512 * 2**20),  # ... and kb, mb, gb (or ki, mi, gi) powers of 1024
        ("'1G'", 2**30),  # a string's K, M, G, T are powers of 1024 (getStorageSize)
        ("\"3K\"", 3 * 1024),
        ("0", 0),  # nothing may be stored there
        ("''", 0),
        ("4096", 4096),
    ],
)
def test_jetstream_sizes_read_as_nats_server_reads_them(tmp_path: Path, written: str, size: int) -> None:
    config = _load(tmp_path, f"server_name: n1\njetstream {{ max_memory_store: {written}, MAX_FILE: {written} }}\n")
    assert (config.max_memory_store, config.max_file_store) == (size, size)
    assert (config.server_limits.max_memory, config.server_limits.max_storage) == (size, size)


def test_jetstream_sizes_by_every_name_and_a_negative_one_is_the_default(tmp_path: Path) -> None:
    config = _load(tmp_path, "server_name: n1\njetstream { max_mem_store: 5K, max_file: -1 }\n")
    memory, storage = default_limits(str(config.node_data_dir))
    assert (config.max_memory_store, config.max_file_store) == (5000, -1)
    assert (config.server_limits.max_memory, config.server_limits.max_storage) == (5000, storage)
    config = _load(tmp_path, "server_name: n1\njetstream { max_mem: '-5K' }\n")
    assert config.server_limits.max_memory == memory
    assert _load(tmp_path, "server_name: n1\njetstream: enabled\n").server_limits.max_storage == storage


def test_the_domain_flag_is_the_config_files_jetstream_domain(tmp_path: Path) -> None:
    by_config = _load(tmp_path, "server_name: n1\njetstream { domain: hub }\n")
    by_flag = _load(tmp_path, "server_name: n1\n", "--domain", "hub")
    assert by_flag.domain == "hub"
    assert by_flag == by_config
    # the flag wins over the file, as every flag does
    assert _load(tmp_path, "server_name: n1\njetstream { domain: hub }\n", "--domain", "edge").domain == "edge"


def test_the_api_prefix_flag_is_gone_an_import_does_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _load(tmp_path, "server_name: n1\n", "--api-prefix", "JS.acc1")
    assert "unrecognized arguments: --api-prefix" in capsys.readouterr().err
    toml = tmp_path / "n1.toml"
    toml.write_text('name = "n1"\napi_prefixes = ["JS.acc1"]\n')
    with pytest.raises(ConfigError, match="unknown settings api_prefixes"):
        _load_toml(toml)


def _load_toml(path: Path) -> NodeConfig:
    parser = argparse.ArgumentParser()
    add_node_arguments(parser)
    return config_from_args(parser.parse_args(["--config", str(path)]))


def test_jetstream_limits_block_sets_what_consumers_may_ask_for(tmp_path: Path) -> None:
    config = _load(tmp_path, "server_name: n1\njetstream { limits { MAX_ACK_PENDING: 100, max_request_batch: 1K } }\n")
    assert (config.server_limits.max_ack_pending, config.server_limits.max_request_batch) == (100, 1000)
    config = _load(tmp_path, "server_name: n1\njetstream { limits { duplicate_window: '1m30s' } }\n")
    assert config.server_limits.duplicate_window_ns == 90 * 10**9
    assert _load(tmp_path, "server_name: n1\njetstream: enabled\n").server_limits.max_ack_pending == 0


def test_a_toml_file_is_still_read_as_toml(tmp_path: Path) -> None:
    path = tmp_path / "n1.toml"
    path.write_text('name = "n1"\nclient_port = 4400\n')
    parser = argparse.ArgumentParser()
    add_node_arguments(parser)
    assert config_from_args(parser.parse_args(["--config", str(path)])).client_port == 4400


ADR_19_SPEC = Path(__file__).resolve().parents[2].parent / "shared" / "spec" / "adr-19-api-prefixes.txt"


@pytest.mark.skipif(not ADR_19_SPEC.exists(), reason="shared/spec is not beside the repository")
def test_adr_19_testing_config_loads_as_written(tmp_path: Path) -> None:
    lines = ADR_19_SPEC.read_text().splitlines()
    start = lines.index("jetstream: enabled")
    end = start + next(i for i, line in enumerate(lines[start:]) if line == "}")
    text = "server_name: n1\n" + "\n".join(lines[start : end + 1]) + "\n"
    config = _load(tmp_path, text)
    assert config.accounts is not None and config.accounts.home == "A"
    assert sorted(config.accounts.accounts) == ["$G", "A", "I"]
    assert sorted((u.name, u.account) for u in config.users if isinstance(u, User)) == [("a", "A"), ("i", "I")]


def test_users_with_permissions_and_defaults(tmp_path: Path) -> None:
    config = _load(
        tmp_path,
        "server_name: n1\nauthorization {\n"
        "  default_permissions: { publish: 'public.>' }\n"
        "  users = [\n"
        "    {user: a, password: sekrit-a, permissions: { publish: {allow: 'x.*', deny: 'x.y'}, subscribe: ['s', 't.>'] }}\n"
        "    {user: b, password: pb}\n"
        "    {user: c, password: pc, permissions: { subscribe: req, allow_responses: { max: 3, ttl: '1m30s' } }}\n"
        "  ]\n}\n",
    )
    a, b, c = config.users
    assert a.permissions is not None and b.permissions is not None and c.permissions is not None
    assert (a.permissions.publish.allow, a.permissions.publish.deny) == (("x.*",), ("x.y",))
    assert a.permissions.subscribe.allow == ("s", "t.>")
    assert b.permissions.publish.allow == ("public.>",)  # the defaults, for a user without its own
    assert c.permissions.publish.allow == ()  # allow_responses turns off the blanket publish allow
    assert c.permissions.responses is not None
    assert (c.permissions.responses.max_msgs, c.permissions.responses.ttl) == (3, 90.0)
    assert "sekrit-a" not in repr(config)


def test_connection_and_subscription_limits_and_their_aliases(tmp_path: Path) -> None:
    config = _load(tmp_path, "server_name: n1\nmax_connections: 5\nmax_subscriptions: 3\n")
    assert (config.max_connections, config.max_subscriptions) == (5, 3)
    config = _load(tmp_path, "server_name: n1\nmax_conn: 7\nmax_subs: 2\n")
    assert (config.max_connections, config.max_subscriptions) == (7, 2)


def test_the_example_in_docs_security_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    example = doc.split("## A full example", 1)[1].split("```", 2)[1]
    for name in ("CLUSTER_SECRET", "ORDERS_PASSWORD", "PRICING_PASSWORD"):
        monkeypatch.setenv(name, f"{name.lower()}-value")
    certs = make_certificates(tmp_path / "certs")
    example = (
        example.replace("/etc/jetraft/server-key.pem", str(certs.server_key))
        .replace("/etc/jetraft/server.pem", str(certs.server_cert))
        .replace("/etc/jetraft/ca.pem", str(certs.ca))
        .replace("/etc/jetraft/n1-key.pem", str(certs.server_key))
        .replace("/etc/jetraft/n1.pem", str(certs.server_cert))
    )
    config = _load(tmp_path, example)
    assert (config.name, config.client_port, config.http_port, config.cluster_port) == ("n1", 4222, 8222, 6222)
    assert config.peers == {"n2": "10.0.0.2:6222", "n3": "10.0.0.3:6222"}
    assert config.cluster_secret == "cluster_secret-value"
    assert (config.max_payload, config.max_connections, config.max_subscriptions) == (1024 * 1024, 10000, 1000)
    assert len(config.users) == 5
    assert config.cluster_tls is not None and config.cluster_tls.ca_file == str(certs.ca)
    assert config.tls is not None and config.tls.verify and config.tls.ca_file == str(certs.ca)


@pytest.mark.parametrize(
    ("accounts", "message"),
    [
        ("A: { users: [ {user: a, password: a} ], limits: {} }", r"accounts.A.limits: nats-server's setting"),
        ("A: { exports: [ {service: 'x', response_type: stream} ] }", r"accounts.A.exports\[0\].response_type"),
        ("A: { imports: [ {service: {account: B, subject: x}} ] }", "unknown account 'B'"),
        ("A: { jetstream: { max_mem: 1G, cluster_traffic: owner } }", r"line 3: accounts.A.jetstream.cluster_traffic: nats"),
        ("A: { jetstream: { tiered_limits: { R1: { max_mem: 1M } } } }", r"accounts.A.jetstream.tiered_limits: nats-server's"),
        ("A: { jetstream: { max_mem: 1G, max_memmory: 1G } }", r"accounts.A.jetstream.max_memmory: unknown setting"),
        ("A: { jetstream: { max_mem: '1G' } }", r"accounts.A.jetstream.max_mem: expected a size"),
        ("A: { jetstream: { max_bytes_required: 1 } }", r"accounts.A.jetstream.max_bytes_required: expected true"),
        ("A: { jetstream: maybe }", r"accounts.A.jetstream: expected 'enabled' or 'disabled'"),
        ("A: { jetstream_limits: {} }", r"accounts.A.jetstream_limits: unknown setting"),
        ("A: { imports: [ {service: {account: A}} ] }", "needs account and subject"),
        ("A: { bogus: 1 }", r"accounts.A.bogus: unknown setting"),
    ],
)
def test_accounts_that_jetraft_cannot_take(tmp_path: Path, accounts: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, f"server_name: n1\naccounts {{\n  {accounts}\n}}\n")


def test_account_jetstream_limits_by_every_name_nats_server_takes() -> None:
    conf = parse(
        "jetstream: {\n    MAX_MEM: 64MB, max_file: 32MB, streams: 10, consumers: 20, max_ack_pending: 100,\n"
        "    mem_max_stream_bytes: 2048, disk_max_stream_bytes: 4096, max_stream_bytes: true\n  }\n",
        file="a.conf",
    )
    limits = account_jetstream("accounts.A.jetstream", conf.values["jetstream"], conf.places["jetstream"])
    assert limits == JetStreamAccountLimits(
        max_memory=64 * 1024 * 1024,
        max_storage=32 * 1024 * 1024,
        max_streams=10,
        max_consumers=20,
        max_ack_pending=100,
        memory_max_stream_bytes=2048,
        storage_max_stream_bytes=4096,
        max_bytes_required=True,
    )


@pytest.mark.parametrize("enabled", ["enabled", "true", "enable"])
def test_account_jetstream_enabled_has_no_limits(tmp_path: Path, enabled: str) -> None:
    config = _load(tmp_path, f"server_name: n1\naccounts {{\n  A: {{ jetstream: {enabled} }}\n}}\n")
    assert config.accounts is not None and config.accounts.home == "A"
    assert config.jetstream_limits == UNLIMITED


def test_every_account_that_enables_jetstream_has_its_own_limits(tmp_path: Path) -> None:
    config = _load(
        tmp_path,
        "server_name: n1\naccounts {\n  B: { jetstream: { max_streams: 2 } }\n  A: { jetstream: enabled }\n"
        "  C: {}\n}\n",
    )
    assert config.accounts is not None
    assert config.accounts.jetstream_accounts == ("A", "B")
    assert config.accounts.home == "A"  # the first by name: its streams keep their un-prefixed names
    assert config.jetstream_limits == UNLIMITED
    assert config.jetstream_account_limits == {"A": UNLIMITED, "B": JetStreamAccountLimits(max_streams=2)}


def test_users_of_accounts_know_their_account(tmp_path: Path) -> None:
    config = _load(
        tmp_path,
        "server_name: n1\naccounts {\n  A: { users: [ {user: a, password: a} ], jetstream: enabled }\n"
        "  B: { users: [ {user: b, password: b} ] }\n}\n",
    )
    assert config.accounts is not None and config.accounts.home == "A"
    assert sorted((u.name, u.account) for u in config.users if isinstance(u, User)) == [("a", "A"), ("b", "B")]


@pytest.mark.parametrize("size", ["8MB", "64MB"])
def test_max_payload_up_to_max_pending_is_taken(tmp_path: Path, size: str) -> None:
    config = _load(tmp_path, f"server_name: n1\nmax_payload: {size}\n")
    assert config.max_payload == int(size.removesuffix("MB")) * 1024 * 1024


def test_responses_allowed_without_a_ttl_expire_after_nats_servers_two_minutes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `allow_responses: true` and a ttl of 0 both take nats-server's DEFAULT_ALLOW_RESPONSE_EXPIRATION
    conf = tmp_path / "n.conf"
    conf.write_text(
        "authorization { users: [\n"
        "  {user: a, password: a, permissions: { allow_responses: true }}\n"
        "  {user: b, password: b, permissions: { allow_responses: { ttl: '0s' } }}\n"
        "  {user: c, password: c, permissions: { allow_responses: { ttl: '-1s' } }}\n"
        "] }\n"
    )
    users = load_nats_conf(conf)["users"]
    assert [user.permissions.responses.ttl for user in users] == [120.0, 120.0, 0.0]
    now = [0.0]
    perms = ConnectionPermissions(users[0].permissions)
    monkeypatch.setattr(perms, "_now", lambda: now[0])
    perms.delivered_request("r")
    now[0] = 119.0
    assert perms.may_publish("r")
    perms.delivered_request("s")
    now[0] = 119.0 + 120.5
    assert not perms.may_publish("s")
