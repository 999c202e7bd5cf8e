"""Client authentication: who a CONNECT says it is, checked against one user, one token or a users list.

A successful check yields the client's `Identity`: its user name (empty for a token) and its
permissions (None: everything). Accounts, when they come, belong here too: an identity will name one.

A password written as a bcrypt hash (`$2a$...`, as nats-server's `nats server passwd` makes) is checked
with the bcrypt package. That takes tens of milliseconds by design, far too long for the event loop that
carries the node's Raft traffic, so such a check comes back as a `SlowCheck` for the connection to run on
a worker thread.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from ipaddress import IPv4Network, IPv6Network
from typing import Protocol

from gateway.accounts import GLOBAL_ACCOUNT
from gateway.connect_options import ConnectOptions
from gateway.nkey import signature_valid, user_public_key_bytes
from gateway.permissions import Permissions


@dataclass(frozen=True, slots=True)
class Identity:
    user: str = ""
    permissions: Permissions | None = None
    account: str = GLOBAL_ACCOUNT
    # when the credentials stop being valid (unix seconds; 0: never), and the error that ends the
    # connection then (operator mode's JWTs: gateway/jwt/authenticator.py)
    expires_at: float = 0.0
    expiry_error: str = ""
    # the connection types (nats-server's names: STANDARD, WEBSOCKET, ...) and networks it may connect
    # from; None: any
    connection_types: frozenset[str] | None = None
    sources: tuple[IPv4Network | IPv6Network, ...] | None = None


@dataclass(frozen=True, slots=True)
class SlowCheck:
    """A check to run off the event loop; it returns what `check` would have."""

    run: Callable[[], Identity | None]


class Authenticator(Protocol):
    # Whether each client's INFO carries a nonce for it to sign (nkey users).
    nonce_required: bool

    def check(self, options: ConnectOptions, nonce: str) -> Identity | SlowCheck | None:
        """The client's identity, or None to refuse it (`Authorization Violation`)."""
        ...


# nats-server's test for a hashed password or token; anything else is compared as written.
_BCRYPT_HASH = re.compile(r"\$2[abxy]\$\d{2}\$.*", re.DOTALL)


def is_bcrypt_hash(password: str) -> bool:
    return _BCRYPT_HASH.match(password) is not None


def _bcrypt_matches(given: str | None, hashed: str) -> bool:
    import bcrypt  # only nodes configured with hashed passwords need it loaded

    if given is None:
        return False
    try:
        return bcrypt.checkpw(given.encode(), hashed.encode())
    except ValueError:  # a malformed hash in the config refuses everyone, as nats-server does
        return False


def _same(given: str | None, expected: str) -> bool:
    # Constant-time so the reply time does not leak how much of a secret matched.
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


@dataclass(frozen=True, slots=True)
class UserPassword:
    user: str
    password: str
    nonce_required = False

    def check(self, options: ConnectOptions, nonce: str = "") -> Identity | SlowCheck | None:
        if is_bcrypt_hash(self.password):
            if not _same(options.user, self.user):
                return None
            given = options.password
            return SlowCheck(lambda: Identity(self.user) if _bcrypt_matches(given, self.password) else None)
        if _same(options.user, self.user) & _same(options.password, self.password):
            return Identity(self.user)
        return None


@dataclass(frozen=True, slots=True)
class Token:
    token: str
    nonce_required = False

    def check(self, options: ConnectOptions, nonce: str = "") -> Identity | SlowCheck | None:
        if is_bcrypt_hash(self.token):
            given = options.auth_token
            return SlowCheck(lambda: Identity() if _bcrypt_matches(given, self.token) else None)
        return Identity() if _same(options.auth_token, self.token) else None


@dataclass(frozen=True, slots=True, repr=False)
class User:
    name: str
    password: str
    permissions: Permissions | None = None
    account: str = GLOBAL_ACCOUNT

    def __repr__(self) -> str:
        return f"User(name={self.name!r}, permissions={self.permissions!r}, account={self.account!r})"


@dataclass(frozen=True, slots=True)
class NkeyUser:
    """A user known by its nkey public key (U...): it signs the nonce with its seed; no password."""

    public_key: str
    permissions: Permissions | None = None
    account: str = GLOBAL_ACCOUNT

    def __post_init__(self) -> None:
        user_public_key_bytes(self.public_key)  # InvalidNkey (a ValueError) for anything else


class Users:
    """nats-server's `authorization { users = [...] }`: each user its own password or nkey, and permissions.

    A client that gives no credentials at all is `no_auth_user`, when one is named (nats-server's
    no_auth_user); a user without a password is only ever that (by name, nats-server refuses it too).
    """

    def __init__(self, users: Iterable[User | NkeyUser], no_auth_user: str | None = None) -> None:
        self._users: dict[str, User] = {}
        self._nkeys: dict[str, tuple[bytes, NkeyUser]] = {}
        for user in users:
            if isinstance(user, NkeyUser):
                if user.public_key in self._nkeys:
                    raise ValueError(f"nkey {user.public_key!r} is listed twice")
                self._nkeys[user.public_key] = (user_public_key_bytes(user.public_key), user)
                continue
            if user.name in self._users:
                raise ValueError(f"user {user.name!r} is listed twice")
            self._users[user.name] = user
        self.nonce_required = bool(self._nkeys)
        if no_auth_user is not None and no_auth_user not in self._users and no_auth_user not in self._nkeys:
            raise ValueError(
                f'no_auth_user: "{no_auth_user}" not present as user or nkey in authorization block or '
                "account configuration"
            )
        self._no_auth_user = no_auth_user

    def _without_credentials(self) -> Identity | None:
        name = self._no_auth_user
        if name in self._nkeys:
            nkey_user = self._nkeys[name][1]
            return Identity(name, nkey_user.permissions, nkey_user.account)
        user = self._users[name or ""]
        return Identity(user.name, user.permissions, user.account)

    def check(self, options: ConnectOptions, nonce: str = "") -> Identity | SlowCheck | None:
        if self._no_auth_user is not None and not (
            options.user or options.password or options.auth_token or options.nkey
        ):
            return self._without_credentials()
        if options.nkey:
            # As nats-server: a client that names an nkey is that nkey's user or no one.
            known = self._nkeys.get(options.nkey)
            if known is None or not nonce or not signature_valid(known[0], nonce, options.sig):
                return None
            return Identity(options.nkey, known[1].permissions, known[1].account)
        user = self._users.get(options.user or "")
        if user is None or not user.password:
            return None
        identity = Identity(user.name, user.permissions, user.account)
        if is_bcrypt_hash(user.password):
            given = options.password
            return SlowCheck(lambda: identity if _bcrypt_matches(given, user.password) else None)
        return identity if _same(options.password, user.password) else None


def make_authenticator(
    user: str | None = None,
    password: str | None = None,
    token: str | None = None,
    users: Iterable[User | NkeyUser] = (),
    no_auth_user: str | None = None,
) -> Authenticator | None:
    """None when no credentials are configured (every client is let in)."""
    users = list(users)
    if users:
        if user is not None or password is not None or token is not None:
            raise ValueError("use a users list or a single user or a token, not several")
        return Users(users, no_auth_user)
    if no_auth_user is not None:
        raise ValueError(f'no_auth_user: "{no_auth_user}" present, but users/nkeys are not defined')
    if token is not None:
        if user is not None or password is not None:
            raise ValueError("use either a token or a user and password, not both")
        return Token(token)
    if (user is None) != (password is None):
        raise ValueError("user and password go together")
    if user is not None and password is not None:
        return UserPassword(user, password)
    return None
