"""nats-server's operator mode in a configuration file: `operator`, `resolver: MEMORY` and `resolver_preload`.

The operator JWT (inline, or a file holding it, decorated or not) names the keys trusted to issue
accounts; `resolver_preload` holds every account's JWT, keyed by its public key. Each account is checked
as nats-server checks it (issued by a trusted key, about the key it is listed under) and becomes an
account of the node (gateway/accounts.py), named by its key, with JetStream when its JWT gives it
storage. Clients then connect with user JWTs (gateway/jwt/authenticator.py).

Only the memory resolver is supported: the URL and NATS-based resolvers fetch accounts at run time,
which jetraft does not do yet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nkeys

from cluster.node.natsconf.parser import ConfMap, Place
from cluster.runtime.account_limits import UNLIMITED, JetStreamAccountLimits
from gateway.accounts import AccountConfigError, Accounts
from gateway.jwt.claims import JwtAccount, TrustedOperator, read_account, read_operator
from gateway.jwt.decode import JwtError, undecorate
from gateway.nkey import InvalidNkey, public_key_bytes

# nats-server's accepted spellings of the memory resolver
_MEMORY_RESOLVER = re.compile(r"(?i)(MEM|MEMORY)\s*")
_JWT_PREFIX = "eyJ"


class OperatorConfigError(ValueError):
    """Operator mode that cannot be set up as written; the message says where and why."""


@dataclass(frozen=True, slots=True)
class OperatorMode:
    operators: tuple[TrustedOperator, ...]
    jwt_accounts: dict[str, JwtAccount]  # by public key
    accounts: Accounts
    jetstream_limits: JetStreamAccountLimits  # the home account's
    account_limits: dict[str, JetStreamAccountLimits]  # every JetStream account's
    system_account: str | None


def _operator_token(entry: str, place: Place) -> str:
    """The operator JWT of an entry: a file holding it (nats-server's readOperatorJWT), or the JWT itself."""
    try:
        return undecorate(Path(entry).read_text())
    except OSError as exc:
        if entry.startswith(_JWT_PREFIX):
            return entry
        raise OperatorConfigError(f"{place}: operator: cannot read {entry!r}: {exc.strerror}") from exc


def read_operators(value: Any, place: Place) -> tuple[TrustedOperator, ...]:
    entries = value if isinstance(value, list) else [value]
    if not entries or not all(isinstance(entry, str) and entry for entry in entries):
        raise OperatorConfigError(f"{place}: operator: expected a JWT or a JWT file, or a list of them")
    operators = []
    for entry in entries:
        try:
            operators.append(read_operator(_operator_token(entry, place)))
        except JwtError as exc:
            raise OperatorConfigError(f"{place}: operator: {exc}") from exc
    return tuple(operators)


def check_resolver(value: Any, place: Place) -> None:
    if isinstance(value, str) and _MEMORY_RESOLVER.fullmatch(value):
        return
    raise OperatorConfigError(
        f"{place}: resolver: only the memory resolver (MEMORY) is supported by jetraft yet, got {value!r}"
    )


def read_preload(value: Any, place: Place) -> dict[str, tuple[str, Place]]:
    if not isinstance(value, ConfMap):
        raise OperatorConfigError(f"{place}: resolver_preload: expected a map of account keys to JWTs")
    preload: dict[str, tuple[str, Place]] = {}
    for key, token in value.values.items():
        if key in value.used_as_variable:
            continue
        key_place = value.places[key]
        if not isinstance(token, str):
            raise OperatorConfigError(f"{key_place}: resolver_preload.{key}: expected an account JWT")
        preload[key] = (token, key_place)
    return preload


def system_account(operators: tuple[TrustedOperator, ...], configured: str | None, place: Place) -> str | None:
    """The system account: the configuration's, which must be the operators' if they name one, else the
    first operator's (nats-server's validateTrustedOperators)."""
    if configured is not None:
        named = [operator.system_account for operator in operators if operator.system_account]
        if named and configured not in named:
            raise OperatorConfigError(f"{place}: system_account in config and operator JWT must be identical")
        return configured
    return operators[0].system_account or None


def operator_mode(
    operators: tuple[TrustedOperator, ...],
    preload: dict[str, tuple[str, Place]],
    place: Place,
    configured_system_account: str | None = None,
) -> OperatorMode:
    """The accounts of a memory resolver preloaded with `preload`, checked against `operators`."""
    system = system_account(operators, configured_system_account, place)
    trusted = frozenset(key for operator in operators for key in operator.trusted_keys)
    jwt_accounts: dict[str, JwtAccount] = {}
    for name, (token, key_place) in preload.items():
        try:
            public_key_bytes(name, nkeys.PREFIX_BYTE_ACCOUNT)
            jwt_accounts[name] = read_account(token, trusted, name)
        except (JwtError, InvalidNkey) as exc:
            # nats-server's words for a preload it cannot take
            raise OperatorConfigError(f"{key_place}: preload account error for {name!r}: {exc}") from exc
    try:
        accounts = Accounts({name: account.account for name, account in jwt_accounts.items()})
    except AccountConfigError as exc:
        raise OperatorConfigError(f"{place}: resolver_preload: {exc}") from exc
    limits = {
        name: JetStreamAccountLimits(**account.jetstream)  # type: ignore[arg-type]
        for name, account in jwt_accounts.items()
        if account.jetstream is not None
    }
    if system is not None and system not in jwt_accounts:
        raise OperatorConfigError(f"{place}: resolver_preload: the system account {system} has no JWT here")
    if limits and system is None:
        # nats-server will not start JetStream without a system account, and tells why in these words
        raise OperatorConfigError(
            f"{place}: Can't start JetStream: setting up internal jetstream subscriptions failed: "
            "system account not setup"
        )
    return OperatorMode(operators, jwt_accounts, accounts, limits.get(accounts.home, UNLIMITED), limits, system)
