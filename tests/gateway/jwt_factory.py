"""Operator, account and user keys and JWTs made up for tests, signed as nsc and nats-io/jwt sign them."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from typing import Any

import nacl.signing
import nkeys


@dataclass(frozen=True)
class Key:
    seed: bytes

    @classmethod
    def new(cls, prefix: int) -> Key:
        return cls(bytes(nkeys.encode_seed(bytes(nacl.signing.SigningKey.generate()), prefix)))

    @property
    def pair(self) -> nkeys.KeyPair:
        return nkeys.from_seed(bytearray(self.seed))

    @property
    def public(self) -> str:
        return self.pair.public_key.decode()

    def sign(self, data: bytes) -> bytes:
        return self.pair.sign(data)


def operator_key() -> Key:
    return Key.new(nkeys.PREFIX_BYTE_OPERATOR)


def account_key() -> Key:
    return Key.new(nkeys.PREFIX_BYTE_ACCOUNT)


def user_key() -> Key:
    return Key.new(nkeys.PREFIX_BYTE_USER)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def encode(kind: str, issuer: Key, subject: str, nats: dict[str, Any] | None = None, version: int = 2,
           name: str = "", **claims: Any) -> str:  # fmt: skip
    """A `kind` JWT about `subject` signed by `issuer`: version 2 (nats-io/jwt v2) or 1 (its v1 format)."""
    body: dict[str, Any] = {"jti": "TEST", "iat": int(time.time()) - 5, "iss": issuer.public, "name": name or kind,
                            "sub": subject, **claims}  # fmt: skip
    if version == 1:
        header = {"typ": "jwt", "alg": "ed25519"}
        body["type"] = kind
        body["nats"] = dict(nats or {})
    else:
        header = {"typ": "JWT", "alg": "ed25519-nkey"}
        body["nats"] = {**(nats or {}), "type": kind, "version": 2}
    head = _b64(json.dumps(header).encode())
    payload = _b64(json.dumps(body).encode())
    signed = payload if version == 1 else f"{head}.{payload}"
    return f"{head}.{payload}.{_b64(issuer.sign(signed.encode()))}"


def operator_jwt(operator: Key, **nats: Any) -> str:
    return encode("operator", operator, operator.public, nats)


# what nsc writes for an account or a user it is given no limits for: none (-1); a limit left out of a
# version 2 JWT is 0, which nats-server enforces
ACCOUNT_LIMITS = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True,
                  "conn": -1, "leaf": -1}  # fmt: skip
USER_LIMITS = {"subs": -1, "data": -1, "payload": -1}


def account_jwt(issuer: Key, account: Key, limits: dict[str, Any] | None = None, **nats: Any) -> str:
    return encode("account", issuer, account.public, {"limits": {**ACCOUNT_LIMITS, **(limits or {})}, **nats})


def user_jwt(issuer: Key, user: Key, exp: int = 0, **nats: Any) -> str:
    """A user JWT; `exp` (unix seconds) is when it expires, 0 never."""
    return encode("user", issuer, user.public, {**USER_LIMITS, **nats}, **({"exp": exp} if exp else {}))


def creds(jwt: str, user: Key) -> str:
    """A creds file, as `nsc generate creds` writes it (what nats-py's user_credentials reads)."""
    return (
        f"-----BEGIN NATS USER JWT-----\n{jwt}\n------END NATS USER JWT------\n\n"
        f"-----BEGIN USER NKEY SEED-----\n{user.seed.decode()}\n------END USER NKEY SEED------\n"
    )
