"""Operator mode: clients prove who they are with a user JWT, issued by an account the operator trusts.

A client's CONNECT carries its user JWT (`jwt`) and its signature of the nonce its INFO carried (`sig`,
made with the user's seed). The user is let in, into its account, when (nats-server's
processClientOrLeafAuthentication, in its order):

1. the JWT decodes and its issuer's signature holds, and it is valid now (`exp`, `nbf`);
2. its account (the issuer, or `issuer_account` when a signing key issued it) is one the resolver knows,
   that account names the issuer as its own key or a signing key, and the account is valid now;
3. a bearer token is allowed by the account, or else the nonce signature is the user's;
4. the account has not revoked the user.

Where and how it may connect (`src`, `allowed_connection_types`) and when the JWTs expire travel with
its `Identity`, for the connection to apply. Every refusal is nats-server's `Authorization Violation`
to the client; the reason goes to the log.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import nkeys
import structlog

from gateway.auth import Identity
from gateway.connect_options import ConnectOptions
from gateway.jwt.claims import JwtAccount, read_user
from gateway.jwt.decode import JwtError
from gateway.nkey import public_key_bytes, signature_valid

log = structlog.get_logger(__name__)

# nats-server's errors to a client whose user or account JWT expires while it is connected
USER_EXPIRED = "User Authentication Expired"
ACCOUNT_EXPIRED = "Account Authentication Expired"


class OperatorAuthenticator:
    """Checks user JWTs against the accounts of a memory resolver (nats-server's `resolver: MEMORY`)."""

    # every client's INFO carries a nonce in operator mode
    nonce_required = True

    def __init__(self, accounts: Mapping[str, JwtAccount], clock: Callable[[], float] = time.time) -> None:
        self.accounts = dict(accounts)
        self._clock = clock

    def check(self, options: ConnectOptions, nonce: str) -> Identity | None:
        reason, identity = self._check(options, nonce)
        if identity is None:
            log.info("client_authentication_refused", reason=reason)
        return identity

    def _check(self, options: ConnectOptions, nonce: str) -> tuple[str, Identity | None]:
        if not options.jwt:
            return "operator mode requires a user JWT", None
        try:
            user = read_user(options.jwt)
        except JwtError as exc:
            return f"user JWT not valid: {exc}", None
        claims = user.claims
        now = self._clock()
        problem = claims.time_problem(now)
        if problem is not None:
            return f"user JWT no longer valid: {problem}", None
        account = self.accounts.get(user.account_key)
        if account is None:
            return f"account {user.account_key} of user {claims.subject} is not known", None
        if not account.may_issue(claims.issuer):
            return f"user JWT issuer {claims.issuer} is not known to account {account.public_key}", None
        problem = account.time_problem(now)
        if problem is not None:
            return f"account {account.public_key} JWT no longer valid: {problem}", None
        if user.bearer:
            if account.disallow_bearer:
                return f"account {account.public_key} does not allow bearer tokens", None
        elif not nonce or not signature_valid(
            public_key_bytes(claims.subject, nkeys.PREFIX_BYTE_USER), nonce, options.sig
        ):
            return f"signature of user {claims.subject} does not verify", None
        if account.revoked(claims.subject, claims.issued_at):
            return f"user {claims.subject} was revoked by account {account.public_key}", None
        # the sooner of the two expiries ends the connection, with its own error
        expiry, expiry_error = 0.0, ""
        for at, error in ((claims.expires, USER_EXPIRED), (account.expires, ACCOUNT_EXPIRED)):
            if at and (not expiry or at < expiry):
                expiry, expiry_error = float(at), error
        return "", Identity(
            user=claims.subject,
            permissions=user.permissions if user.permissions is not None else account.default_permissions,
            account=account.public_key,
            expires_at=expiry,
            expiry_error=expiry_error,
            connection_types=user.connection_types,
            sources=user.sources,
        )
