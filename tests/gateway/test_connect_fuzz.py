"""CONNECT options of any shape: a ProtocolError (nats-server's -ERR) or an answer, never a crash."""

from __future__ import annotations

import base64

import bcrypt
import nacl.signing
import nkeys
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.auth import Identity, NkeyUser, SlowCheck, Token, User, UserPassword, Users
from gateway.connect_options import ConnectOptions
from gateway.events import ProtocolError
from gateway.nkey import new_nonce
from gateway.permissions import Permissions

_SEED = nkeys.encode_seed(bytes(nacl.signing.SigningKey.generate()), nkeys.PREFIX_BYTE_USER)
_KEY = nkeys.from_seed(bytearray(_SEED))
_PUBLIC = _KEY.public_key.decode()
_HASH = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=4)).decode()

_FIELDS = [
    "verbose", "pedantic", "echo", "headers", "no_responders", "tls_required", "protocol", "name", "lang",
    "version", "user", "pass", "auth_token", "jwt", "nkey", "sig", "unknown_field",
]  # fmt: skip
_json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.sampled_from(["alice", "pw", _PUBLIC, "$2a$04$x", _HASH]),
)
_json_values = st.recursive(
    _json_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
)
_options = st.dictionaries(st.sampled_from(_FIELDS), _json_values, max_size=10)

_AUTHENTICATORS = [
    UserPassword("alice", "pw"),
    UserPassword("alice", _HASH),
    Token("pw"),
    Token(_HASH),
    Users([User("alice", "pw", Permissions()), User("bob", _HASH), NkeyUser(_PUBLIC)]),
]


@settings(max_examples=300, deadline=None)
@given(_options)
def test_any_connect_options_parse_or_are_refused_with_a_protocol_error(options: dict[str, object]) -> None:
    try:
        parsed = ConnectOptions.from_dict(options)
    except ProtocolError:
        return
    nonce = new_nonce()
    for authenticator in _AUTHENTICATORS:
        result = authenticator.check(parsed, nonce)
        if isinstance(result, SlowCheck):
            result = result.run()
        assert result is None or isinstance(result, Identity)


def test_a_signed_nonce_identifies_the_nkey_user_and_nothing_else_does() -> None:
    users = Users([NkeyUser(_PUBLIC)])
    nonce = new_nonce()
    for encode in (base64.b64encode, lambda raw: base64.urlsafe_b64encode(raw).rstrip(b"=")):
        sig = encode(_KEY.sign(nonce.encode())).decode()
        assert users.check(ConnectOptions(nkey=_PUBLIC, sig=sig), nonce) == Identity(_PUBLIC)
        assert users.check(ConnectOptions(nkey=_PUBLIC, sig=sig), new_nonce()) is None
    assert users.check(ConnectOptions(nkey=_PUBLIC, sig="not base64!"), nonce) is None
    assert users.check(ConnectOptions(nkey=_PUBLIC), nonce) is None
