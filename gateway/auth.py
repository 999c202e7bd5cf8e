"""Client authentication: who a CONNECT says it is, checked against one user, one token or a users list.

A successful check yields the client's `Identity`: its user name (empty for a token) and its
permissions (None: everything). Accounts, when they come, belong here too: an identity will name one.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from gateway.connect_options import ConnectOptions
from gateway.permissions import Permissions


@dataclass(frozen=True, slots=True)
class Identity:
    user: str = ""
    permissions: Permissions | None = None


class Authenticator(Protocol):
    def check(self, options: ConnectOptions) -> Identity | None:
        """The client's identity, or None to refuse it (`Authorization Violation`)."""
        ...


def _same(given: str | None, expected: str) -> bool:
    # Constant-time so the reply time does not leak how much of a secret matched.
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


@dataclass(frozen=True, slots=True)
class UserPassword:
    user: str
    password: str

    def check(self, options: ConnectOptions) -> Identity | None:
        if _same(options.user, self.user) & _same(options.password, self.password):
            return Identity(self.user)
        return None


@dataclass(frozen=True, slots=True)
class Token:
    token: str

    def check(self, options: ConnectOptions) -> Identity | None:
        return Identity() if _same(options.auth_token, self.token) else None


@dataclass(frozen=True, slots=True, repr=False)
class User:
    name: str
    password: str
    permissions: Permissions | None = None

    def __repr__(self) -> str:
        return f"User(name={self.name!r}, permissions={self.permissions!r})"


class Users:
    """nats-server's `authorization { users = [...] }`: each user its own password and permissions."""

    def __init__(self, users: Iterable[User]) -> None:
        self._users: dict[str, User] = {}
        for user in users:
            if user.name in self._users:
                raise ValueError(f"user {user.name!r} is listed twice")
            self._users[user.name] = user

    def check(self, options: ConnectOptions) -> Identity | None:
        user = self._users.get(options.user or "")
        if user is None or not _same(options.password, user.password):
            return None
        return Identity(user.name, user.permissions)


def make_authenticator(
    user: str | None = None,
    password: str | None = None,
    token: str | None = None,
    users: Iterable[User] = (),
) -> Authenticator | None:
    """None when no credentials are configured (every client is let in)."""
    users = list(users)
    if users:
        if user is not None or password is not None or token is not None:
            raise ValueError("use a users list or a single user or a token, not several")
        return Users(users)
    if token is not None:
        if user is not None or password is not None:
            raise ValueError("use either a token or a user and password, not both")
        return Token(token)
    if (user is None) != (password is None):
        raise ValueError("user and password go together")
    if user is not None and password is not None:
        return UserPassword(user, password)
    return None
