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
    """Not a user public key (U...)."""


def user_public_key_bytes(public_key: str) -> bytes:
    """The 32-byte Ed25519 key inside an nkey user public key, its prefix and checksum checked."""
    try:
        raw = base64.b32decode(public_key + "=" * (-len(public_key) % 8))
    except (binascii.Error, ValueError) as exc:
        raise InvalidNkey(f"{public_key!r} is not base32") from exc
    if len(raw) != 35 or raw[0] != nkeys.PREFIX_BYTE_USER:
        raise InvalidNkey(f"{public_key!r} is not an nkey user public key")
    if nkeys.crc16(bytearray(raw[:-2])) != int.from_bytes(raw[-2:], "little"):
        raise InvalidNkey(f"{public_key!r} has a bad checksum")
    return raw[1:-2]


def _decode_signature(sig: str) -> bytes | None:
    # As nats-server: base64 URL without padding first, then standard base64 (what nats-py sends).
    for decode in (
        lambda s: base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)) if "=" not in s else None,
        lambda s: base64.b64decode(s, validate=True),
    ):
        try:
            decoded = decode(sig)
        except (binascii.Error, ValueError):
            continue
        if decoded is not None:
            return decoded
    return None


def signature_valid(public_key: bytes, nonce: str, sig: str | None) -> bool:
    if not sig:
        return False
    signature = _decode_signature(sig)
    if signature is None:
        return False
    try:
        nacl.signing.VerifyKey(public_key).verify(nonce.encode(), signature)
    except (nacl.exceptions.BadSignatureError, ValueError):
        return False
    return True
