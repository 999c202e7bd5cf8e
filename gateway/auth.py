"""Client authentication: one user and password, or one token, checked against CONNECT."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Protocol

from gateway.connect_options import ConnectOptions


class Authenticator(Protocol):
    def check(self, options: ConnectOptions) -> bool: ...


def _same(given: str | None, expected: str) -> bool:
    # Constant-time so the reply time does not leak how much of a secret matched.
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


@dataclass(frozen=True, slots=True)
class UserPassword:
    user: str
    password: str

    def check(self, options: ConnectOptions) -> bool:
        return _same(options.user, self.user) & _same(options.password, self.password)


@dataclass(frozen=True, slots=True)
class Token:
    token: str

    def check(self, options: ConnectOptions) -> bool:
        return _same(options.auth_token, self.token)


def make_authenticator(
    user: str | None = None, password: str | None = None, token: str | None = None
) -> Authenticator | None:
    """None when no credentials are configured (every client is let in)."""
    if token is not None:
        if user is not None or password is not None:
            raise ValueError("use either a token or a user and password, not both")
        return Token(token)
    if (user is None) != (password is None):
        raise ValueError("user and password go together")
    if user is not None and password is not None:
        return UserPassword(user, password)
    return None
