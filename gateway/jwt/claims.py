"""What operator, account and user JWTs say, as nats-server reads them in operator mode.

An operator JWT names the keys trusted to issue accounts (its own and its signing keys). An account JWT
names the keys that may issue its users, the users it revoked, its exports and imports, and its limits
(JetStream's among them: an account has JetStream when it is given memory or disk storage). A user JWT
names the user's key, its permissions and how and where it may connect.

Every field is read, refused (nats-server acts on it and jetraft does not yet: a `JwtError` naming it,
never a setting silently dropped) or informational (descriptions, tags, URLs for tools).
"""

from __future__ import annotations

import ipaddress
import time
from dataclasses import dataclass
from typing import Any

from gateway.accounts import Account, Export, Import
from gateway.jwt.decode import ACCOUNT, OPERATOR, USER, Claims, JwtError, decode, time_problem
from gateway.permissions import DEFAULT_RESPONSE_TTL_S, Permissions, ResponsePermission, SubjectRule
from subjects.grammar import has_wildcard, is_valid_filter

NO_LIMIT = -1
# nats-server's default for a response permission that leaves `max` at 0
DEFAULT_RESPONSE_MAX_MSGS = 1
# the connection types nats-server knows (jwt.ConnectionType*); jetraft serves the first two
CONNECTION_TYPES = frozenset(
    {"STANDARD", "WEBSOCKET", "LEAFNODE", "LEAFNODE_WS", "MQTT", "MQTT_WS", "IN_PROCESS"}
)

# fields for people and tools (nsc), which change nothing in the server
_INFORMATIONAL = frozenset({"description", "info_url", "tags", "type", "version"})
# the limits that count something per connection or per account; jetraft enforces none of them yet
_COUNT_LIMITS = ("subs", "conn", "data", "payload")
# JetStream's account limits in an account JWT, by nats-server's names for them in ACCOUNT INFO
JETSTREAM_LIMITS = {
    "mem_storage": "max_memory",
    "disk_storage": "max_storage",
    "streams": "max_streams",
    "consumer": "max_consumers",
    "max_ack_pending": "max_ack_pending",
    "mem_max_stream_bytes": "memory_max_stream_bytes",
    "disk_max_stream_bytes": "storage_max_stream_bytes",
}


def _not_yet(owner: str, field: str) -> JwtError:
    return JwtError(f"{owner}: JWT field {field} is not supported by jetraft yet")


def _empty(value: Any) -> bool:
    return value in (None, False, "", 0, [], {})


def _check_fields(owner: str, nats: dict[str, Any], read: frozenset[str], prefix: str = "nats.") -> None:
    """Refuse every field that is neither read nor informational, unless it is empty."""
    for key, value in nats.items():
        if key not in read and key not in _INFORMATIONAL and not _empty(value):
            raise _not_yet(owner, prefix + key)


def _integer(owner: str, field: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise JwtError(f"{owner}: JWT field {field} must be an integer, got {value!r}")
    return value


def _keys(owner: str, field: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise JwtError(f"{owner}: JWT field {field} must be a list of keys")
    keys = []
    for item in value:
        if not isinstance(item, str):
            # a scoped signing key ({kind: user_scope, key, role, template}) sets its users' permissions
            raise _not_yet(owner, f"{field} (scoped signing keys)")
        keys.append(item)
    return tuple(keys)


# --- operators ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TrustedOperator:
    public_key: str
    name: str
    signing_keys: tuple[str, ...]
    # only the signing keys may issue accounts, not the operator's own key
    strict_signing_key_usage: bool
    system_account: str  # "" when the operator names none

    @property
    def trusted_keys(self) -> frozenset[str]:
        """The keys whose account JWTs this server trusts (nats-server's TrustedKeys)."""
        own = () if self.strict_signing_key_usage else (self.public_key,)
        return frozenset((*own, *self.signing_keys))


_OPERATOR_FIELDS = frozenset(
    {"signing_keys", "strict_signing_key_usage", "system_account", "account_server_url", "operator_service_urls"}
)


def read_operator(token: str) -> TrustedOperator:
    claims = decode(token, OPERATOR)
    owner = f"operator {claims.subject}"
    nats = claims.nats
    # account_server_url and operator_service_urls are for tools (nsc push, say); the server's own
    # resolver is its configuration's. A version assertion acts on the server: not yet.
    _check_fields(owner, nats, _OPERATOR_FIELDS)
    problem = claims.time_problem(time.time())
    if problem is not None:
        raise JwtError(f"{owner}: {problem}")
    strict = nats.get("strict_signing_key_usage", False)
    if not isinstance(strict, bool):
        raise JwtError(f"{owner}: JWT field nats.strict_signing_key_usage must be true or false")
    system = nats.get("system_account") or ""
    if not isinstance(system, str):
        raise JwtError(f"{owner}: JWT field nats.system_account must be an account key")
    return TrustedOperator(
        claims.subject, claims.name, _keys(owner, "nats.signing_keys", nats.get("signing_keys")), strict, system
    )


# --- accounts ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JwtAccount:
    """An account as its JWT describes it. Its name is its public key, as in nats-server."""

    account: Account
    display_name: str
    signing_keys: frozenset[str]  # besides the account's own key, who may issue its users
    revocations: dict[str, int]  # user key (or "*": every user) -> users issued at or before it are revoked
    disallow_bearer: bool
    default_permissions: Permissions | None
    expires: int  # unix seconds; 0: never
    not_before: int
    # JetStream's limits by nats-server's ACCOUNT INFO names; None: no JetStream for this account
    jetstream: dict[str, int | bool] | None

    @property
    def public_key(self) -> str:
        return self.account.name

    def time_problem(self, now: float) -> str | None:
        """Why the account's JWT is not valid at `now`; None if it is."""
        return time_problem(self.expires, self.not_before, now)

    def may_issue(self, issuer: str) -> bool:
        return issuer == self.public_key or issuer in self.signing_keys

    def revoked(self, user: str, issued_at: int) -> bool:
        """nats-io/jwt's IsClaimRevoked: revoked when issued at or before the revocation's time."""
        for key in ("*", user):
            at = self.revocations.get(key)
            if at is not None and issued_at <= at:
                return True
        return False


_ACCOUNT_FIELDS = frozenset(
    {"limits", "signing_keys", "revocations", "default_permissions", "imports", "exports"}
)
# `leaf` limits leafnode connections, of which jetraft takes none: any value holds
_ACCOUNT_LIMIT_FIELDS = frozenset(
    {*_COUNT_LIMITS, "imports", "exports", "wildcards", "disallow_bearer", "leaf", "max_bytes_required",
     *JETSTREAM_LIMITS}
)  # fmt: skip


def read_account(token: str, trusted_keys: frozenset[str], name: str | None = None) -> JwtAccount:
    """The account of `token`, issued by one of `trusted_keys` (and, when given, about account `name`)."""
    claims = decode(token, ACCOUNT)
    owner = f"account {claims.subject}"
    if name is not None and claims.subject != name:
        raise JwtError(f"account {name}: its JWT is about {claims.subject}")
    if claims.issuer not in trusted_keys:
        raise JwtError(f"{owner}: issued by {claims.issuer}, which no trusted operator names")
    nats = claims.nats
    _check_fields(owner, nats, _ACCOUNT_FIELDS)
    limits = nats.get("limits") or {}
    if not isinstance(limits, dict):
        raise JwtError(f"{owner}: JWT field nats.limits must be an object")
    _check_fields(owner, limits, _ACCOUNT_LIMIT_FIELDS, "nats.limits.")
    for key in _COUNT_LIMITS:
        # a limit left out is 0 (Go's zero value), which nats-server enforces: no connection at all, say
        value = _integer(owner, f"nats.limits.{key}", limits.get(key, 0))
        if value != NO_LIMIT:
            raise _not_yet(owner, f"nats.limits.{key} ({value})")
    exports = tuple(_export(owner, index, item) for index, item in enumerate(_list(owner, "exports", nats)))
    imports = tuple(_import(owner, index, item) for index, item in enumerate(_list(owner, "imports", nats)))
    for kind, items in (("imports", imports), ("exports", exports)):
        allowed = _integer(owner, f"nats.limits.{kind}", limits.get(kind, 0))
        if allowed > NO_LIMIT and len(items) > allowed:
            raise JwtError(f"{owner}: {len(items)} {kind}, more than its limit of {allowed}")
    if limits.get("wildcards", False) is not True:
        for export in exports:
            if has_wildcard(export.subject):
                raise JwtError(f"{owner}: export {export.subject!r} has wildcards, which its limits forbid")
    # nats-io/jwt gives a version 1 account no JetStream, whatever its limits say
    jetstream = _jetstream_limits(owner, limits) if claims.version > 1 else None
    revocations = nats.get("revocations") or {}
    if not isinstance(revocations, dict) or not all(
        isinstance(at, int) and not isinstance(at, bool) for at in revocations.values()
    ):
        raise JwtError(f"{owner}: JWT field nats.revocations must map keys to unix times")
    defaults = nats.get("default_permissions")
    return JwtAccount(
        account=Account(claims.subject, exports, imports, jetstream is not None),
        display_name=claims.name,
        signing_keys=frozenset(_keys(owner, "nats.signing_keys", nats.get("signing_keys"))),
        revocations=dict(revocations),
        disallow_bearer=limits.get("disallow_bearer", False) is True,
        default_permissions=permissions(owner, defaults, "nats.default_permissions.") if defaults else None,
        expires=claims.expires,
        not_before=claims.not_before,
        jetstream=jetstream,
    )


def _jetstream_limits(owner: str, limits: dict[str, Any]) -> dict[str, int | bool] | None:
    """JetStream's limits, or None when the account has none (no memory and no disk storage)."""
    found = {key: _integer(owner, f"nats.limits.{key}", limits.get(key, 0)) for key in JETSTREAM_LIMITS}
    if found["mem_storage"] == 0 and found["disk_storage"] == 0:
        return None
    out: dict[str, int | bool] = {}
    for key, name in JETSTREAM_LIMITS.items():
        value = found[key]
        # a count left at 0 is no limit; storage at 0 is none of that kind
        out[name] = NO_LIMIT if value == 0 and key not in ("mem_storage", "disk_storage") else value
    required = limits.get("max_bytes_required", False)
    if not isinstance(required, bool):
        raise JwtError(f"{owner}: JWT field nats.limits.max_bytes_required must be true or false")
    out["max_bytes_required"] = required
    return out


def _list(owner: str, field: str, nats: dict[str, Any]) -> list[Any]:
    value = nats.get(field) or []
    if not isinstance(value, list):
        raise JwtError(f"{owner}: JWT field nats.{field} must be a list")
    return value


def _subject(owner: str, field: str, value: Any) -> str:
    if not isinstance(value, str) or not is_valid_filter(value):
        raise JwtError(f"{owner}: JWT field {field} must be a subject, got {value!r}")
    return value


def _service(owner: str, field: str, entry: dict[str, Any]) -> bool:
    kind = entry.get("type", "stream")
    if kind not in ("stream", "service"):
        raise JwtError(f"{owner}: JWT field {field}.type must be stream or service, got {kind!r}")
    return kind == "service"


_EXPORT_FIELDS = frozenset({"name", "subject", "type", "response_type"})


def _export(owner: str, index: int, entry: Any) -> Export:
    field = f"nats.exports[{index}]"
    if not isinstance(entry, dict):
        raise JwtError(f"{owner}: JWT field {field} must be an object")
    # token_req (activation tokens), response thresholds, latency tracking, ...: not yet
    _check_fields(owner, entry, _EXPORT_FIELDS, f"{field}.")
    if entry.get("response_type", "Singleton") not in ("Singleton", ""):
        raise _not_yet(owner, f"{field}.response_type ({entry['response_type']})")
    return Export(_subject(owner, f"{field}.subject", entry.get("subject")), _service(owner, field, entry))


_IMPORT_FIELDS = frozenset({"name", "subject", "account", "type", "local_subject"})


def _import(owner: str, index: int, entry: Any) -> Import:
    field = f"nats.imports[{index}]"
    if not isinstance(entry, dict):
        raise JwtError(f"{owner}: JWT field {field} must be an object")
    # `to` (version 1's local subject, a prefix for streams), tokens, share, tracing: not yet
    _check_fields(owner, entry, _IMPORT_FIELDS, f"{field}.")
    exporter = entry.get("account")
    if not isinstance(exporter, str) or not exporter:
        raise JwtError(f"{owner}: JWT field {field}.account must name the exporting account")
    subject = _subject(owner, f"{field}.subject", entry.get("subject"))
    local = entry.get("local_subject") or subject
    return Import(exporter, subject, _subject(owner, f"{field}.local_subject", local), _service(owner, field, entry))


# --- users -------------------------------------------------------------------------------------


def _rule(owner: str, field: str, value: Any) -> SubjectRule | None:
    if value in (None, {}):
        return None
    if not isinstance(value, dict):
        raise JwtError(f"{owner}: JWT field {field} must be an object of allow and deny lists")
    _check_fields(owner, value, frozenset({"allow", "deny"}), f"{field}.")
    lists: dict[str, tuple[str, ...]] = {}
    for key in ("allow", "deny"):
        items = value.get(key) or []
        if not isinstance(items, list):
            raise JwtError(f"{owner}: JWT field {field}.{key} must be a list of subjects")
        for item in items:
            if isinstance(item, str) and " " in item.strip():
                raise _not_yet(owner, f"{field}.{key} ({item!r}: queue permissions)")
        lists[key] = tuple(_subject(owner, f"{field}.{key}", item) for item in items)
    if not lists["allow"] and not lists["deny"]:
        return None
    # an empty allow list, as nats-server reads it, allows everything the deny list does not name
    return SubjectRule(allow=lists["allow"] or None, deny=lists["deny"])


def permissions(owner: str, nats: dict[str, Any], prefix: str = "nats.") -> Permissions | None:
    """A user's permissions from its JWT's `pub`, `sub` and `resp` (nats-server's buildPermissionsFromJwt);
    None when they set nothing."""
    publish = _rule(owner, prefix + "pub", nats.get("pub"))
    subscribe = _rule(owner, prefix + "sub", nats.get("sub"))
    resp = nats.get("resp")
    responses = None
    if resp is not None:
        if not isinstance(resp, dict):
            raise JwtError(f"{owner}: JWT field {prefix}resp must be an object {{max, ttl}}")
        max_msgs = _integer(owner, f"{prefix}resp.max", resp.get("max", 0))
        ttl_ns = _integer(owner, f"{prefix}resp.ttl", resp.get("ttl", 0))
        responses = ResponsePermission(
            max_msgs=max_msgs or DEFAULT_RESPONSE_MAX_MSGS,
            # 0 is the default; below 0 no limit (nats-server's validateResponsePermissions)
            ttl=DEFAULT_RESPONSE_TTL_S if ttl_ns == 0 else max(ttl_ns / 1e9, 0.0),
        )
        if publish is None or publish.allow is None:
            # as nats-server: allowing responses turns off the blanket publish allow
            publish = SubjectRule(allow=(), deny=publish.deny if publish else ())
    if publish is None and subscribe is None and responses is None:
        return None
    return Permissions(publish=publish or SubjectRule(), subscribe=subscribe or SubjectRule(), responses=responses)


@dataclass(frozen=True, slots=True)
class JwtUser:
    claims: Claims
    account_key: str  # the account the user belongs to (its issuer, or the issuer's account)
    permissions: Permissions | None
    bearer: bool  # no nonce signature needed
    connection_types: frozenset[str] | None  # None: any
    sources: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] | None  # None: anywhere


_USER_FIELDS = frozenset(
    {"pub", "sub", "resp", "bearer_token", "allowed_connection_types", "src", "issuer_account",
     "subs", "data", "payload"}
)  # fmt: skip


def read_user(token: str) -> JwtUser:
    """The user of a CONNECT's `jwt`: decoded and its signature checked (not yet its account's say)."""
    claims = decode(token, USER)
    owner = f"user {claims.subject}"
    nats = claims.nats
    # times, times_location and locale (connection time windows): not yet
    _check_fields(owner, nats, _USER_FIELDS)
    for key in ("subs", "data", "payload"):
        # left out, a version 1 user has no limit and a version 2 user a limit of 0 (nats-io/jwt's loadUser)
        value = _integer(owner, f"nats.{key}", nats.get(key, NO_LIMIT if claims.version == 1 else 0))
        if value != NO_LIMIT:
            raise _not_yet(owner, f"nats.{key} ({value})")
    account = nats.get("issuer_account") or claims.issuer
    if not isinstance(account, str):
        raise JwtError(f"{owner}: JWT field nats.issuer_account must be an account key")
    types = nats.get("allowed_connection_types") or []
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise JwtError(f"{owner}: JWT field nats.allowed_connection_types must be a list of names")
    sources = nats.get("src") or []
    if isinstance(sources, str):  # version 1 wrote one comma-separated string
        sources = [part for part in sources.split(",") if part.strip()]
    try:
        networks = tuple(ipaddress.ip_network(str(cidr).strip(), strict=False) for cidr in sources)
    except ValueError as exc:
        raise JwtError(f"{owner}: JWT field nats.src: {exc}") from exc
    return JwtUser(
        claims=claims,
        account_key=account,
        permissions=permissions(owner, nats),
        bearer=nats.get("bearer_token", False) is True,
        # nats-server ignores the names it does not know
        connection_types=frozenset(t.upper() for t in types if t.upper() in CONNECTION_TYPES) if types else None,
        sources=networks or None,
    )
