"""nats-server's `accounts { NAME: { users, jetstream, exports, imports } }` block."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cluster.node.natsconf.parser import ConfMap, Place
from cluster.node.natsconf.users import ConfPermissionError, parse_users
from cluster.runtime.account_limits import UNLIMITED, JetStreamAccountLimits
from gateway.accounts import Account, AccountConfigError, Accounts, Export, Import
from gateway.auth import NkeyUser, User
from subjects.grammar import is_valid_filter


def _fail(path: str, place: Place, why: str) -> ConfPermissionError:
    return ConfPermissionError(f"{place}: {path}: {why}")


def _entries(conf: ConfMap) -> list[tuple[str, Any, Place]]:
    return [(k, v, conf.places[k]) for k, v in conf.values.items() if k not in conf.used_as_variable]


def _subject(path: str, value: Any, place: Place) -> str:
    if not isinstance(value, str) or not is_valid_filter(value):
        raise _fail(path, place, f"expected a subject, got {value!r}")
    return value


def _export(path: str, entry: Any, place: Place) -> Export:
    if not isinstance(entry, ConfMap):
        raise _fail(path, place, f"expected {{service: SUBJECT}} or {{stream: SUBJECT}}, got {entry!r}")
    subject: str | None = None
    service = False
    accounts: tuple[str, ...] | None = None
    for key, value, key_place in _entries(entry):
        if key in ("service", "stream"):
            if subject is not None:
                raise _fail(path, key_place, "an export is a service or a stream, not both")
            subject, service = _subject(f"{path}.{key}", value, key_place), key == "service"
        elif key == "accounts":
            names = value if isinstance(value, list) else [value]
            if not all(isinstance(name, str) for name in names):
                raise _fail(f"{path}.accounts", key_place, "expected a list of account names")
            accounts = tuple(names)
        elif key in ("response", "response_type", "threshold", "response_threshold", "latency", "account_token_position",
                     "advertise", "allow_trace"):  # fmt: skip
            raise _fail(f"{path}.{key}", key_place, "nats-server's setting is not supported by jetraft yet")
        else:
            raise _fail(f"{path}.{key}", key_place, "unknown setting")
    if subject is None:
        raise _fail(path, place, "an export needs service or stream")
    return Export(subject, service, accounts)


def _import(path: str, entry: Any, place: Place) -> Import:
    if not isinstance(entry, ConfMap):
        raise _fail(path, place, f"expected {{service: {{account, subject}}}} or {{stream: ...}}, got {entry!r}")
    source: tuple[str, str, bool] | None = None
    local: str | None = None
    for key, value, key_place in _entries(entry):
        if key in ("service", "stream"):
            if not isinstance(value, ConfMap):
                raise _fail(f"{path}.{key}", key_place, "expected {account: NAME, subject: SUBJECT}")
            found: dict[str, str] = {}
            for sub, sub_value, sub_place in _entries(value):
                if sub not in ("account", "subject"):
                    raise _fail(f"{path}.{key}.{sub}", sub_place, "unknown setting")
                if not isinstance(sub_value, str) or not sub_value:
                    raise _fail(f"{path}.{key}.{sub}", sub_place, f"expected a name or subject, got {sub_value!r}")
                found[sub] = sub_value
            if set(found) != {"account", "subject"}:
                raise _fail(f"{path}.{key}", key_place, "needs account and subject")
            subject = _subject(f"{path}.{key}.subject", found["subject"], key_place)
            source = (found["account"], subject, key == "service")
        elif key == "to":
            local = _subject(f"{path}.to", value, key_place)
        elif key in ("prefix", "local_subject", "share", "allow_trace"):
            raise _fail(f"{path}.{key}", key_place, "nats-server's setting is not supported by jetraft yet")
        else:
            raise _fail(f"{path}.{key}", key_place, "unknown setting")
    if source is None:
        raise _fail(path, place, "an import needs service or stream")
    account, subject, service = source
    return Import(account, subject, local or subject, service)


# nats-server's names for each account JetStream limit (server/opts.go, parseJetStreamForAccount); keys are
# matched without regard to case, as there.
_LIMIT_KEYS = {
    **dict.fromkeys(("max_memory", "max_mem", "mem", "memory"), "max_memory"),
    **dict.fromkeys(("max_store", "max_file", "max_disk", "store", "disk"), "max_storage"),
    **dict.fromkeys(("max_streams", "streams"), "max_streams"),
    **dict.fromkeys(("max_consumers", "consumers"), "max_consumers"),
    **dict.fromkeys(("mem_max_stream_bytes", "memory_max_stream_bytes"), "memory_max_stream_bytes"),
    **dict.fromkeys(("disk_max_stream_bytes", "store_max_stream_bytes"), "storage_max_stream_bytes"),
    "max_ack_pending": "max_ack_pending",
}
_REQUIRED_KEYS = ("max_bytes_required", "max_stream_bytes", "max_bytes")


def account_jetstream(path: str, value: Any, place: Place) -> JetStreamAccountLimits | None:
    """The account's JetStream limits (no limits for `enabled`), or None when it has no JetStream."""
    if value is True:
        return UNLIMITED
    if value is False:
        return None
    if isinstance(value, str):
        if value.lower() in ("enabled", "enable"):
            return UNLIMITED
        if value.lower() in ("disabled", "disable"):
            return None
        raise _fail(path, place, f"expected 'enabled' or 'disabled', got {value!r}")
    if not isinstance(value, ConfMap):
        raise _fail(
            path, place, f"expected a block of limits, true or false, enabled or disabled, got {value!r}"
        )
    limits: dict[str, Any] = {}
    for key, item, key_place in _entries(value):
        name = key.lower()
        if name in _LIMIT_KEYS:
            if isinstance(item, bool) or not isinstance(item, int):
                raise _fail(f"{path}.{key}", key_place, f"expected a size, got {item!r}")
            limits[_LIMIT_KEYS[name]] = item
        elif name in _REQUIRED_KEYS:
            if not isinstance(item, bool):
                raise _fail(f"{path}.{key}", key_place, f"expected true or false, got {item!r}")
            limits["max_bytes_required"] = item
        elif name in ("cluster_traffic", "tiered_limits"):
            raise _fail(f"{path}.{key}", key_place, "nats-server's setting is not supported by jetraft yet")
        else:
            raise _fail(f"{path}.{key}", key_place, "unknown setting")
    return JetStreamAccountLimits(**limits)


@dataclass(frozen=True, slots=True)
class ParsedAccounts:
    accounts: Accounts
    users: list[User | NkeyUser]  # every user the accounts hold (each knows its account)
    jetstream_limits: JetStreamAccountLimits  # those of the home account (gateway/accounts.py)
    account_limits: dict[str, JetStreamAccountLimits]  # those of every account that enables JetStream


def parse_accounts(value: Any, place: Place) -> ParsedAccounts:
    """The accounts, their users and the JetStream account's limits."""
    if not isinstance(value, ConfMap):
        raise _fail("accounts", place, f"expected a block of accounts, got {value!r}")
    accounts: dict[str, Account] = {}
    users: list[User | NkeyUser] = []
    limits: dict[str, JetStreamAccountLimits] = {}
    for name, body, account_place in _entries(value):
        path = f"accounts.{name}"
        if not isinstance(body, ConfMap):
            raise _fail(path, account_place, "expected a block { users, jetstream, exports, imports }")
        exports: list[Export] = []
        imports: list[Import] = []
        jetstream: JetStreamAccountLimits | None = None
        for key, item, key_place in _entries(body):
            if key == "users":
                users += parse_users(item, key_place, None, account=name, path=f"{path}.users")
            elif key == "jetstream":
                jetstream = account_jetstream(f"{path}.jetstream", item, key_place)
            elif key in ("exports", "imports"):
                if not isinstance(item, list):
                    raise _fail(f"{path}.{key}", key_place, "expected a list")
                for index, entry in enumerate(item):
                    if key == "exports":
                        exports.append(_export(f"{path}.exports[{index}]", entry, key_place))
                    else:
                        imports.append(_import(f"{path}.imports[{index}]", entry, key_place))
            elif key in ("nkey", "mappings", "limits", "default_permissions", "max_connections", "max_subscriptions",
                         "max_payload", "msg_trace", "trace_dest"):  # fmt: skip
                raise _fail(f"{path}.{key}", key_place, "nats-server's setting is not supported by jetraft yet")
            else:
                raise _fail(f"{path}.{key}", key_place, "unknown setting")
        accounts[name] = Account(name, tuple(exports), tuple(imports), jetstream is not None)
        if jetstream is not None:
            limits[name] = jetstream
    try:
        parsed = Accounts(accounts)
    except AccountConfigError as exc:
        raise _fail("accounts", place, str(exc)) from exc
    return ParsedAccounts(parsed, users, limits.get(parsed.home, UNLIMITED), limits)
