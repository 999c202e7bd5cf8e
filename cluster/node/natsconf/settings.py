"""What a jetraft node takes from a nats-server configuration file: the NodeConfig fields it sets.

Every key is one of three kinds: read (it sets something jetraft does), refused (nats-server knows it
but jetraft does not do it yet: accepting and ignoring it would mislead the operator), or unknown (a
typo, most likely). Refused and unknown keys are errors that name the key and where it was set. A key
that served as a `$variable` is not a setting, as in nats-server.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from cluster.node.natsconf.accounts import parse_accounts
from cluster.node.natsconf.operator import (
    OperatorConfigError,
    check_resolver,
    operator_mode,
    read_operators,
    read_preload,
)
from cluster.node.natsconf.parser import ConfMap, Place
from cluster.node.natsconf.users import ConfPermissionError, parse_permissions, parse_users
from gateway.auth import NkeyUser, User
from gateway.jwt.claims import TrustedOperator
from gateway.transports.tls import TlsSettings
from gateway.transports.websocket_settings import WebSocketSettings
from storage.msg_ttl import parse_go_duration
from storage.nats_time import format_go_duration

# nats-server's top-level keys (server/opts.go) that jetraft does not implement yet.
_NATS_TOP_LEVEL_KEYS_NOT_YET = """client_advertise net debug trace trace_verbose trace_headers logtime logtime_utc mappings maps
    disable_sublist_cache no_sublist_cache default_sentinel https https_port http_base_path
    gateway leaf leafnodes logfile log_file logfile_size_limit log_size_limit logfile_max_num log_max_num
    syslog remote_syslog pidfile pid_file ports_file_dir prof_port prof_block_rate max_control_line
    max_pending proxy_protocol max_traced_msg_len max_sub_tokens max_subscription_tokens ping_interval ping_max ocsp allow_non_tls write_deadline
    write_timeout resolver_tls
    resolver_pinned_accounts no_system_account no_system no_sys_acc
    no_header_support trusted trusted_keys connect_error_reports reconnect_error_reports mqtt
    server_tags server_metadata feature_flags default_js_domain ocsp_cache no_fast_producer_stall
    max_closed_clients proxies"""
_NATS_TOP_LEVEL_NOT_YET = frozenset(_NATS_TOP_LEVEL_KEYS_NOT_YET.split())
# nats-server's spellings of the trusted operators and of the account resolver (server/opts.go)
_OPERATOR_KEYS = ("operator", "operators", "root_operator", "root_operators", "root", "roots")
_RESOLVER_KEYS = ("resolver", "account_resolver", "accounts_resolver")


# the client port's TLS keys a WebSocket listener does not act on: its TLS is the HTTP server's own
# (gateway/transports/websocket.py), set up with the certificate files and `verify` alone
_WEBSOCKET_TLS_NOT_YET = frozenset({"handshake_first", "first", "immediate", "timeout"})


class ConfKeyError(ValueError):
    """A key jetraft cannot take; the message names the key and where it was set."""


def _fail(block: str, key: str, place: Place, why: str) -> ConfKeyError:
    return ConfKeyError(f"{place}: {block}{key}: {why}")


def _not_yet(block: str, key: str, place: Place) -> ConfKeyError:
    return _fail(block, key, place, "nats-server's setting is not supported by jetraft yet")


def _unknown(block: str, key: str, place: Place) -> ConfKeyError:
    return _fail(block, key, place, "unknown setting")


def _check_sync_setting(key: str, value: Any, place: Place) -> None:
    """`jetstream { sync_interval }` (or `sync`): nats-server's `always` fsyncs every write before it is
    acknowledged, which is what a jetraft node does to each Raft log write whatever its configuration,
    so `always` is accepted. A duration (nats-server's default is 2m: a write is acknowledged from
    the OS's page cache and synced later) is a periodic sync jetraft does not have."""
    if isinstance(value, str) and value.lower() == "always":
        return
    _duration("jetstream.", key, value, place)  # anything else must be a duration, as for nats-server
    raise _fail(
        "jetstream.",
        key,
        place,
        "jetraft fsyncs every write before acknowledging it (nats-server's `always`); "
        "a periodic sync interval is not supported",
    )


def _settings(conf: ConfMap) -> list[tuple[str, Any, Place]]:
    return [(k, v, conf.places[k]) for k, v in conf.values.items() if k not in conf.used_as_variable]


def _string(block: str, key: str, value: Any, place: Place) -> str:
    if not isinstance(value, str) or not value:
        raise _fail(block, key, place, f"expected a non-empty string, got {value!r}")
    return value


def _integer(block: str, key: str, value: Any, place: Place, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _fail(block, key, place, f"expected an integer of at least {minimum}, got {value!r}")
    return value


def _number(block: str, key: str, value: Any, place: Place) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise _fail(block, key, place, f"expected a positive number of seconds, got {value!r}")
    return float(value)


_STRING_SIZE_SHIFTS = {"K": 10, "M": 20, "G": 30, "T": 40}


def storage_size(block: str, key: str, value: Any, place: Place) -> int:
    """A size in bytes as nats-server's getStorageSize reads it: an integer (the config syntax's own
    suffixes: `1G` is 10^9, `512MB` 512 * 2^20), or a string of digits ending in K, M, G or T (powers of
    1024; "" is 0). A negative one means nats-server's default."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, str):
        raise _fail(block, key, place, f"expected a size (an integer, or a string such as '1G'), got {value!r}")
    if value == "":
        return 0
    digits, suffix = value[:-1], value[-1:]
    # the digits first, then the suffix, as nats-server checks them
    if re.fullmatch(r"[+-]?[0-9]+", digits) is None:
        raise _fail(block, key, place, f"{digits!r} of {value!r} is not an integer")
    if suffix not in _STRING_SIZE_SHIFTS:
        raise _fail(block, key, place, f"sizes defined as strings must end in K, M, G, T, got {value!r}")
    size = int(digits) << _STRING_SIZE_SHIFTS[suffix]
    if not -(2**63) <= size < 2**63:
        raise _fail(block, key, place, f"{value!r} does not fit in 64 bits")
    return size


def _duration(block: str, key: str, value: Any, place: Place) -> int:
    """Nanoseconds of a Go duration string such as "1m30s" (nats-server reads it with time.ParseDuration)."""
    if isinstance(value, str):
        try:
            return parse_go_duration(value)
        except ValueError:
            pass
    raise _fail(block, key, place, f"expected a duration such as '2m' or '90s', got {value!r}")


def _handshake_timeout(block: str, key: str, value: Any, place: Place) -> float:
    """Seconds: an integer is seconds, a string a Go duration (nats-server's parseWebsocket)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return parse_go_duration(value) / 1e9
        except ValueError:
            raise _fail(block, key, place, f'time: invalid duration "{value}"') from None
    raise _fail(block, key, place, f"error parsing handshake timeout: unsupported type {type(value).__name__}")


def _map(block: str, key: str, value: Any, place: Place) -> ConfMap:
    if not isinstance(value, ConfMap):
        raise _fail(block, key, place, f"expected a block {{ ... }}, got {value!r}")
    return value


def split_host_port(block: str, key: str, value: Any, place: Place) -> tuple[str | None, int]:
    """`host:port`, `:port` or a port number, as nats-server's `listen` takes them."""
    if isinstance(value, int) and not isinstance(value, bool):
        host, port_text = None, str(value)
    elif isinstance(value, str):
        host_text, sep, port_text = value.rpartition(":")
        host = host_text.strip("[]") or None if sep else None
        if not sep:
            port_text = value
    else:
        raise _fail(block, key, place, f"expected host:port or a port, got {value!r}")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise _fail(block, key, place, f"expected host:port or a port, got {value!r}")
    return host, int(port_text)


class _Collector:
    """Builds the NodeConfig fields; one method per block."""

    def __init__(self) -> None:
        self.fields: dict[str, Any] = {}
        self.host_place: Place | None = None
        self.account_users: list[User | NkeyUser] = []
        self.no_auth_user_place: Place | None = None
        # operator mode: where each of its settings was given, and what they hold
        self.operator_places: dict[str, Place] = {}
        self.operators: tuple[TrustedOperator, ...] = ()
        self.preload: dict[str, tuple[str, Place]] = {}

    def set_host(self, block: str, key: str, host: str | None, place: Place) -> None:
        # jetraft listens on one address for clients, the cluster and HTTP.
        if host is None:
            return
        if "host" in self.fields and self.fields["host"] != host:
            raise _fail(
                block, key, place,
                f"jetraft listens on one address for clients, cluster and HTTP; {host} differs from "
                f"{self.fields['host']} set at {self.host_place}",
            )  # fmt: skip
        self.fields["host"] = host
        self.host_place = place

    def top(self, conf: ConfMap) -> None:
        handlers: dict[str, Callable[[str, Any, Place], None]] = {
            "listen": self.listen,
            "host": lambda k, v, p: self.set_host("", k, _string("", k, v, p), p),
            "port": lambda k, v, p: self.fields.__setitem__("client_port", _integer("", k, v, p)),
            "server_name": lambda k, v, p: self.fields.__setitem__("name", _string("", k, v, p)),
            "http": self.http,
            "http_port": self.http,
            "monitor_port": self.http,
            "jetstream": self.jetstream,
            "store_dir": lambda k, v, p: self.fields.__setitem__("data_dir", _string("", k, v, p)),
            "storedir": lambda k, v, p: self.fields.__setitem__("data_dir", _string("", k, v, p)),
            "cluster": self.cluster,
            "authorization": self.authorization,
            "max_payload": lambda k, v, p: self.fields.__setitem__("max_payload", _integer("", k, v, p, minimum=1)),
            "tls": self.tls,
            "accounts": self.accounts,
            "max_connections": self.max_connections,
            "max_conn": self.max_connections,
            "max_subscriptions": self.max_subscriptions,
            "max_subs": self.max_subscriptions,
            "no_auth_user": self.no_auth_user,
            "websocket": self.websocket,
            "ws": self.websocket,
            "lame_duck_duration": self.lame_duck,
            "lame_duck_grace_period": self.lame_duck,
            **dict.fromkeys(_OPERATOR_KEYS, self.operator),
            **dict.fromkeys(_RESOLVER_KEYS, self.resolver),
            "resolver_preload": self.resolver_preload,
            "system_account": self.system_account,
            "system": self.system_account,
        }
        for key, value, place in _settings(conf):
            if key in handlers:
                handlers[key](key, value, place)
            elif key in _NATS_TOP_LEVEL_NOT_YET:
                raise _not_yet("", key, place)
            else:
                raise _unknown("", key, place)

    def system_account(self, key: str, value: Any, place: Place) -> None:
        self.fields["system_account"] = _string("", key, value, place)

    def operator(self, key: str, value: Any, place: Place) -> None:
        self.operator_places["operator"] = place
        self.operators = read_operators(value, place)

    def resolver(self, key: str, value: Any, place: Place) -> None:
        self.operator_places["resolver"] = place
        check_resolver(value, place)

    def resolver_preload(self, key: str, value: Any, place: Place) -> None:
        self.operator_places["resolver_preload"] = place
        self.preload = read_preload(value, place)

    def operator_mode(self) -> None:
        """The accounts the operator's resolver holds, in place of configured accounts and users."""
        places = self.operator_places
        if "operator" not in places:
            key = next(iter(places))
            raise ConfKeyError(f"{places[key]}: {key}: needs an operator (operator mode)")
        if "resolver" not in places:
            raise ConfKeyError(f"{places['operator']}: operators require an account resolver to be configured")
        # nats-server's own refusals of what operator mode replaces
        if "accounts" in self.fields:
            raise ConfKeyError(f"{places['operator']}: operators do not allow Accounts to be configured directly")
        if self.fields.get("users") or self.account_users:
            raise ConfKeyError(f"{places['operator']}: operators do not allow users to be configured directly")
        for key in ("user", "token", "no_auth_user"):
            if key in self.fields:
                raise ConfKeyError(f"{places['operator']}: operator mode authenticates user JWTs; {key} has no place in it")
        mode = operator_mode(
            self.operators,
            self.preload,
            places.get("resolver_preload", places["resolver"]),
            self.fields.get("system_account"),
        )
        self.fields["system_account"] = mode.system_account
        self.fields["jwt_accounts"] = mode.jwt_accounts
        self.fields["accounts"] = mode.accounts
        self.fields["jetstream_limits"] = mode.jetstream_limits
        self.fields["jetstream_account_limits"] = mode.account_limits

    def accounts(self, key: str, value: Any, place: Place) -> None:
        parsed = parse_accounts(value, place)
        self.fields["accounts"] = parsed.accounts
        self.fields["jetstream_limits"] = parsed.jetstream_limits
        self.fields["jetstream_account_limits"] = parsed.account_limits
        self.account_users = parsed.users

    def lame_duck(self, key: str, value: Any, place: Place) -> None:
        """nats-server's lame duck settings (cluster/node/lame_duck.py), read and bounded with its words."""
        try:
            ns = parse_go_duration(value) if isinstance(value, str) else None
        except ValueError:
            ns = None
        if ns is None:
            raise _fail("", key, place, f"error parsing {key}: time: invalid duration")
        if key == "lame_duck_duration" and ns < 30 * 10**9:
            raise _fail("", key, place, f"invalid lame_duck_duration of {format_go_duration(ns)}, minimum is 30 seconds")
        if key == "lame_duck_grace_period" and ns < 0:
            raise _fail("", key, place, "invalid lame_duck_grace_period, needs to be positive")
        self.fields[key] = ns / 1e9

    def websocket(self, key: str, value: Any, place: Place) -> None:
        """nats-server's `websocket { }`: the port, its address, TLS (or `no_tls`), compression, the origins
        allowed, the handshake's timeout and the upgrade's extra headers."""
        conf = _map("", key, value, place)
        found: dict[str, Any] = {}
        block = "websocket."
        for sub, sub_value, sub_place in _settings(conf):
            if sub == "port":
                found["port"] = _integer(block, sub, sub_value, sub_place, minimum=-1)
            elif sub in ("host", "net"):
                found["host"] = _string(block, sub, sub_value, sub_place)
            elif sub == "listen":
                found["host"], found["port"] = split_host_port(block, sub, sub_value, sub_place)
            elif sub in ("no_tls", "compression", "compress", "same_origin"):
                if not isinstance(sub_value, bool):
                    raise _fail(block, sub, sub_place, f"expected true or false, got {sub_value!r}")
                found["compression" if sub == "compress" else sub] = sub_value
            elif sub in ("allowed_origins", "allowed_origin", "allow_origins", "allow_origin", "origins", "origin"):
                origins = sub_value if isinstance(sub_value, list) else [sub_value]
                found["allowed_origins"] = tuple(_string(block, sub, origin, sub_place) for origin in origins)
            elif sub == "handshake_timeout":
                found["handshake_timeout"] = _handshake_timeout(block, sub, sub_value, sub_place)
            elif sub == "headers":
                headers = _map(block, sub, sub_value, sub_place)
                found["headers"] = tuple(
                    (name, _string(f"{block}headers.", name, value, place)) for name, value, place in _settings(headers)
                )
            elif sub == "tls":
                found["tls"] = self.client_tls(block, sub, sub_value, sub_place, _WEBSOCKET_TLS_NOT_YET)
            elif sub in (
                "advertise", "no_auth_user", "username", "user", "password", "pass", "token", "auth_timeout",
                "authorization", "authentication", "jwt_cookie", "user_cookie", "pass_cookie", "token_cookie",
                "ping_interval",
            ):  # fmt: skip
                raise _not_yet(block, sub, sub_place)
            else:
                raise _unknown(block, sub, sub_place)
        if not found.get("port"):
            return  # nats-server: without a port (or port 0), no WebSocket listener
        if found["port"] == -1:  # nats-server's RANDOM_PORT
            found["port"] = 0
        self.fields["websocket"] = WebSocketSettings(**found)

    def no_auth_user(self, key: str, value: Any, place: Place) -> None:
        self.fields["no_auth_user"] = _string("", key, value, place)
        self.no_auth_user_place = place

    def tls(self, key: str, value: Any, place: Place) -> None:
        self.fields["tls"] = self.client_tls("", key, value, place)

    @staticmethod
    def client_tls(
        block: str, key: str, value: Any, place: Place, listener_only: frozenset[str] = frozenset()
    ) -> TlsSettings:
        """A `tls { }` block for clients (the client port's, or `block`'s); `listener_only`: keys of the
        client port's block that `block`'s listener does not act on, refused as not supported."""
        conf = _map(block, key, value, place)
        sub_block = f"{block}{key}."
        found: dict[str, Any] = {}
        for sub, sub_value, sub_place in _settings(conf):
            if sub in listener_only:
                raise _not_yet(sub_block, sub, sub_place)
            if sub in ("cert_file", "key_file", "ca_file"):
                found[sub] = _string(sub_block, sub, sub_value, sub_place)
            elif sub in ("verify", "handshake_first", "first", "immediate"):
                if not isinstance(sub_value, bool):
                    # nats-server also takes a duration here (a fallback to TLS after INFO): not supported.
                    raise _fail(sub_block, sub, sub_place, f"expected true or false, got {sub_value!r}")
                found["verify" if sub == "verify" else "handshake_first"] = sub_value
            elif sub == "timeout":
                found["timeout"] = _number(sub_block, sub, sub_value, sub_place)
            elif sub in (
                "cipher_suites", "curve_preferences", "insecure", "verify_and_map", "verify_cert_and_check_known_urls",
                "connection_rate_limit", "pinned_certs", "cert_store", "cert_match", "cert_match_by",
                "cert_match_skip_invalid", "ca_certs_match", "ocsp_peer", "certs", "min_version",
            ):  # fmt: skip
                raise _not_yet(sub_block, sub, sub_place)
            else:
                raise _unknown(sub_block, sub, sub_place)
        if "cert_file" not in found or "key_file" not in found:
            raise _fail(block, key, place, "TLS needs cert_file and key_file")
        return TlsSettings(**found)

    def max_connections(self, key: str, value: Any, place: Place) -> None:
        # Any integer, as nats-server: 0 is no limit, below 0 refuses every client.
        self.fields["max_connections"] = _integer("", key, value, place, minimum=-(2**63))

    def max_subscriptions(self, key: str, value: Any, place: Place) -> None:
        self.fields["max_subscriptions"] = _integer("", key, value, place, minimum=-(2**63))

    def listen(self, key: str, value: Any, place: Place) -> None:
        host, port = split_host_port("", key, value, place)
        self.set_host("", key, host, place)
        self.fields["client_port"] = port

    def http(self, key: str, value: Any, place: Place) -> None:
        host, port = split_host_port("", key, value, place)
        self.set_host("", key, host, place)
        self.fields["http_port"] = port

    def jetstream(self, key: str, value: Any, place: Place) -> None:
        # jetraft always runs JetStream: `enabled` (or true) is what it does; turning it off is refused.
        if value in (True, "enabled", "enable") or (isinstance(value, str) and value.lower() == "enabled"):
            return
        if value is False or (isinstance(value, str) and value.lower() in ("disabled", "disable")):
            raise _fail("", key, place, "jetraft always runs JetStream; it cannot be disabled")
        conf = _map("", key, value, place)
        for sub, sub_value, sub_place in _settings(conf):
            name = sub.lower()  # nats-server matches this block's keys whatever their case
            if name in ("store_dir", "store", "storedir"):
                self.fields["data_dir"] = _string("jetstream.", sub, sub_value, sub_place)
            elif name == "domain":
                self.fields["domain"] = _string("jetstream.", sub, sub_value, sub_place)
            elif name in ("max_memory_store", "max_mem_store", "max_mem"):
                self.fields["max_memory_store"] = storage_size("jetstream.", sub, sub_value, sub_place)
            elif name in ("max_file_store", "max_file"):
                self.fields["max_file_store"] = storage_size("jetstream.", sub, sub_value, sub_place)
            elif name in ("enabled", "enable"):
                if sub_value is not True:
                    raise _fail("jetstream.", sub, sub_place, "jetraft always runs JetStream")
            elif name == "limits":
                self.jetstream_limits(sub, sub_value, sub_place)
            elif name in ("sync", "sync_interval"):
                _check_sync_setting(sub, sub_value, sub_place)
            elif name in (
                "key", "ek", "encryption_key", "prev_key", "prev_ek",
                "prev_encryption_key", "cipher", "extension_hint", "unique_tag", "max_outstanding_catchup",
                "max_buffered_size", "max_buffered_msgs", "request_queue_limit", "info_queue_limit", "strict", "tpm",
                "meta_compact", "meta_compact_size", "meta_compact_sync", "max_concurrent_io",
            ):  # fmt: skip
                raise _not_yet("jetstream.", sub, sub_place)
            else:
                raise _unknown("jetstream.", sub, sub_place)

    def jetstream_limits(self, key: str, value: Any, place: Place) -> None:
        """`jetstream { limits { ... } }`: what this server lets streams and consumers ask for
        (parseJetStreamLimits)."""
        block = "jetstream.limits."
        conf = _map("jetstream.", key, value, place)
        for sub, sub_value, sub_place in _settings(conf):
            name = sub.lower()
            if name in ("max_ack_pending", "max_request_batch"):
                # any integer, as nats-server: 0 or less is no limit
                if isinstance(sub_value, bool) or not isinstance(sub_value, int):
                    raise _fail(block, sub, sub_place, f"expected an integer, got {sub_value!r}")
                self.fields[f"jetstream_{name}"] = sub_value
            elif name == "duplicate_window":
                self.fields["jetstream_duplicate_window"] = _duration(block, sub, sub_value, sub_place)
            elif name in ("max_ha_assets", "batch"):
                raise _not_yet(block, sub, sub_place)
            else:
                raise _unknown(block, sub, sub_place)

    def cluster(self, key: str, value: Any, place: Place) -> None:
        conf = _map("", key, value, place)
        for sub, sub_value, sub_place in _settings(conf):
            if sub == "name":
                self.fields["cluster_name"] = _string("cluster.", sub, sub_value, sub_place)
            elif sub == "listen":
                host, port = split_host_port("cluster.", sub, sub_value, sub_place)
                self.set_host("cluster.", sub, host, sub_place)
                self.fields["cluster_port"] = port
            elif sub == "port":
                self.fields["cluster_port"] = _integer("cluster.", sub, sub_value, sub_place)
            elif sub == "routes":
                self.fields["peers"] = self.routes(sub_value, sub_place)
            elif sub == "authorization":
                self.cluster_authorization(sub_value, sub_place)
            elif sub == "tls":
                self.fields["cluster_tls"] = self.cluster_tls(sub_value, sub_place)
            elif sub in (
                "host", "net", "cluster_advertise", "advertise", "no_advertise", "connect_retries",
                "connect_backoff", "permissions", "pool_size", "accounts", "compression", "ping_interval",
                "ping_max", "write_deadline", "write_timeout",
            ):  # fmt: skip
                raise _not_yet("cluster.", sub, sub_place)
            else:
                raise _unknown("cluster.", sub, sub_place)

    @staticmethod
    def cluster_tls(value: Any, place: Place) -> TlsSettings:
        conf = _map("cluster.", "tls", value, place)
        found: dict[str, Any] = {}
        for sub, sub_value, sub_place in _settings(conf):
            if sub in ("cert_file", "key_file", "ca_file"):
                found[sub] = _string("cluster.tls.", sub, sub_value, sub_place)
            elif sub == "timeout":
                found["timeout"] = _number("cluster.tls.", sub, sub_value, sub_place)
            elif sub == "verify":
                if sub_value is not True:
                    raise _fail("cluster.tls.", sub, sub_place, "nodes always verify each other's certificates")
            elif sub in ("cipher_suites", "curve_preferences", "insecure", "verify_and_map", "pinned_certs",
                         "min_version", "handshake_first", "cert_store", "cert_match", "ocsp_peer"):  # fmt: skip
                raise _not_yet("cluster.tls.", sub, sub_place)
            else:
                raise _unknown("cluster.tls.", sub, sub_place)
        for needed in ("cert_file", "key_file", "ca_file"):
            if needed not in found:
                raise _fail("cluster.", "tls", place, f"mutual TLS between nodes needs {needed}")
        return TlsSettings(**found, verify=True)

    @staticmethod
    def routes(value: Any, place: Place) -> dict[str, str]:
        """jetraft names its peers: each route is `NAME=HOST:PORT` (or `NAME=nats-route://HOST:PORT`)."""
        items = value if isinstance(value, list) else [value]
        peers: dict[str, str] = {}
        for item in items:
            name, sep, address = item.partition("=") if isinstance(item, str) else ("", "", "")
            address = address.split("://", 1)[-1]
            if "@" in address:
                raise _fail(
                    "cluster.", "routes", place,
                    f"{item!r}: credentials in a route URL are not supported; jetraft nodes prove themselves "
                    "with cluster.authorization, shared by every node",
                )  # fmt: skip
            if not sep or not name or ":" not in address:
                raise _fail(
                    "cluster.", "routes", place, f"{item!r}: jetraft routes name their peer: NAME=HOST:PORT"
                )
            peers[name] = address
        return peers

    def cluster_authorization(self, value: Any, place: Place) -> None:
        conf = _map("cluster.", "authorization", value, place)
        found: dict[str, str] = {}
        for sub, sub_value, sub_place in _settings(conf):
            if sub in ("user", "username", "password", "pass", "token"):
                found[sub] = _string("cluster.authorization.", sub, sub_value, sub_place)
            elif sub == "timeout":
                raise _not_yet("cluster.authorization.", sub, sub_place)
            else:
                raise _unknown("cluster.authorization.", sub, sub_place)
        user = found.get("user") or found.get("username")
        password = found.get("password") or found.get("pass")
        token = found.get("token")
        if token is not None and (user or password):
            raise _fail("cluster.", "authorization", place, "use either a token or a user and password")
        if (user is None) != (password is None):
            raise _fail("cluster.", "authorization", place, "user and password go together")
        # Every node holds the same secret; a user and password together make one.
        self.fields["cluster_secret"] = token if token is not None else f"{user}:{password}"

    def authorization(self, key: str, value: Any, place: Place) -> None:
        conf = _map("", key, value, place)
        entries = _settings(conf)
        default_permissions = None
        for sub, sub_value, sub_place in entries:
            if sub == "default_permissions":
                default_permissions = parse_permissions("authorization.default_permissions", sub_value, sub_place)
        for sub, sub_value, sub_place in entries:
            if sub in ("user", "username"):
                self.fields["user"] = _string("authorization.", sub, sub_value, sub_place)
            elif sub in ("password", "pass"):
                self.fields["password"] = _string("authorization.", sub, sub_value, sub_place)
            elif sub == "token":
                self.fields["token"] = _string("authorization.", sub, sub_value, sub_place)
            elif sub == "timeout":
                self.fields["auth_timeout"] = _number("authorization.", sub, sub_value, sub_place)
            elif sub == "users":
                self.fields["users"] = parse_users(sub_value, sub_place, default_permissions)
            elif sub == "default_permissions":
                if "users" not in conf.values:
                    raise _fail("authorization.", sub, sub_place, "applies to a users list; there is none")
            elif sub in ("nkey", "permissions", "account", "proxy_required", "auth_callout"):
                raise _not_yet("authorization.", sub, sub_place)
            else:
                raise _unknown("authorization.", sub, sub_place)


def node_settings(conf: ConfMap) -> dict[str, Any]:
    """The NodeConfig fields a parsed configuration sets; ConfKeyError for what jetraft cannot take."""
    collector = _Collector()
    try:
        collector.top(conf)
        if collector.operator_places:
            collector.operator_mode()
    except (ConfPermissionError, OperatorConfigError) as exc:
        raise ConfKeyError(str(exc)) from exc
    fields = collector.fields
    if collector.account_users:
        if "user" in fields or "token" in fields:
            raise ConfKeyError("accounts hold users: use authorization.users beside them, not a single user or token")
        fields["users"] = [*fields.get("users", []), *collector.account_users]
    no_auth_user = fields.get("no_auth_user")
    if no_auth_user is not None:
        names = {user.name if isinstance(user, User) else user.public_key for user in fields.get("users", [])}
        if not names:
            why = f'no_auth_user: "{no_auth_user}" present, but users/nkeys are not defined'
            raise ConfKeyError(f"{collector.no_auth_user_place}: {why}")
        if no_auth_user not in names:
            why = (
                f'no_auth_user: "{no_auth_user}" not present as user or nkey in authorization block or '
                "account configuration"
            )
            raise ConfKeyError(f"{collector.no_auth_user_place}: {why}")
    return fields
