"""NKey users: a client proves it holds a user key's seed by signing the nonce its INFO carried.

The nkeys package (NATS' own) decodes and checks keys; the signature is Ed25519, verified with PyNaCl
(which nkeys itself uses). A verification takes tens of microseconds: it runs on the event loop.
"""

from __future__ import annotations

import base64
import binascii
import secrets

import nacl.exceptions
import nacl.signing
import nkeys

# nats-server's nonce: 11 random bytes, base64 (URL alphabet, no padding): 15 characters.
NONCE_RAW_BYTES = 11


def new_nonce() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(NONCE_RAW_BYTES)).rstrip(b"=").decode()


class InvalidNkey(ValueError):
    """Not a public key of the kind asked for (U... for a user, A... an account, O... an operator)."""


# the nkey prefix byte of each kind of public key, and its name in errors
_KINDS = {
    nkeys.PREFIX_BYTE_USER: "user",
    nkeys.PREFIX_BYTE_ACCOUNT: "account",
    nkeys.PREFIX_BYTE_OPERATOR: "operator",
}


def public_key_bytes(public_key: str, prefix: int) -> bytes:
    """The 32-byte Ed25519 key inside an nkey public key of kind `prefix`, its checksum checked."""
    try:
        raw = base64.b32decode(public_key + "=" * (-len(public_key) % 8))
    except (binascii.Error, ValueError) as exc:
        raise InvalidNkey(f"{public_key!r} is not base32") from exc
    if len(raw) != 35 or raw[0] != prefix:
        raise InvalidNkey(f"{public_key!r} is not an nkey {_KINDS.get(prefix, 'public')} public key")
    if nkeys.crc16(bytearray(raw[:-2])) != int.from_bytes(raw[-2:], "little"):
        raise InvalidNkey(f"{public_key!r} has a bad checksum")
    return raw[1:-2]


def user_public_key_bytes(public_key: str) -> bytes:
    return public_key_bytes(public_key, nkeys.PREFIX_BYTE_USER)


def raw_url_b64decode(text: str) -> bytes:
    """Base64 in the URL alphabet without padding (Go's RawURLEncoding, as NATS writes signatures and
    JWTs); binascii.Error or ValueError for anything else, padding included."""
    if "=" in text:
        raise ValueError("padded")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _decode_signature(sig: str) -> bytes | None:
    # As nats-server: base64 URL without padding first, then standard base64 (what nats-py sends).
    for decode in (raw_url_b64decode, lambda s: base64.b64decode(s, validate=True)):
        try:
            return decode(sig)
        except (binascii.Error, ValueError):
            continue
    return None


def signature_valid(public_key: bytes, nonce: str, sig: str | None) -> bool:
    if not sig:
        return False
    signature = _decode_signature(sig)
    return signature is not None and signed_by(public_key, nonce.encode(), signature)


def signed_by(public_key: bytes, data: bytes, signature: bytes) -> bool:
    """Whether `signature` is the Ed25519 signature of `data` by the holder of `public_key`."""
    try:
        nacl.signing.VerifyKey(public_key).verify(data, signature)
    except (nacl.exceptions.BadSignatureError, ValueError):
        return False
    return True
