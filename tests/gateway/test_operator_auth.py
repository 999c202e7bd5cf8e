"""Operator mode's JWTs: decoded and checked (gateway/jwt/decode.py), read as nats-server reads them
(gateway/jwt/claims.py), and a CONNECT's user JWT let in or refused (gateway/jwt/authenticator.py)."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import nats
import pytest
from nats.errors import Error as NatsError

from gateway.accounts import Accounts
from gateway.connect_options import ConnectOptions
from gateway.jwt.authenticator import ACCOUNT_EXPIRED, USER_EXPIRED, OperatorAuthenticator
from gateway.jwt.claims import JwtAccount, read_account, read_operator, read_user
from gateway.jwt.decode import JwtError, decode, undecorate
from gateway.permissions import ResponsePermission, SubjectRule
from gateway.router import Router
from gateway.server import GatewayServer
from local.ports import HOST
from tests.gateway.jwt_factory import (
    Key,
    account_jwt,
    account_key,
    creds,
    encode,
    operator_jwt,
    operator_key,
    user_jwt,
    user_key,
)

OPERATOR, SIGNER = operator_key(), operator_key()
ACCOUNT, ACCOUNT_SIGNER = account_key(), account_key()
USER = user_key()
TRUSTED = frozenset({OPERATOR.public, SIGNER.public})


def _account(**nats: object) -> JwtAccount:
    return read_account(account_jwt(OPERATOR, ACCOUNT, **nats), TRUSTED)  # type: ignore[arg-type]


def _connect_options(jwt: str, key: Key | None, nonce: str) -> ConnectOptions:
    sig = base64.b64encode(key.sign(nonce.encode())).decode() if key is not None else None
    return ConnectOptions(jwt=jwt, sig=sig)


# --- decoding ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
def test_a_jwt_decodes_when_its_issuer_signed_it(version: int) -> None:
    token = encode("user", ACCOUNT, USER.public, {"pub": {"allow": ["a"]}}, version=version, name="u")
    claims = decode(token, "user")
    assert (claims.version, claims.subject, claims.issuer, claims.name) == (version, USER.public, ACCOUNT.public, "u")
    assert claims.nats["pub"] == {"allow": ["a"]}


def test_a_tampered_or_misissued_jwt_is_refused() -> None:
    head, payload, sig = user_jwt(ACCOUNT, USER).split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["nats"]["pub"] = {"allow": [">"]}
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    with pytest.raises(JwtError, match="signature verification"):
        decode(f"{head}.{forged}.{sig}", "user")
    # an operator key may not issue a user, nor a user be read as an account
    with pytest.raises(JwtError, match="may not issue user claims"):
        decode(user_jwt(OPERATOR, USER), "user")
    with pytest.raises(JwtError, match="expected account claims"):
        decode(user_jwt(ACCOUNT, USER), "account")
    with pytest.raises(JwtError, match="expected 3 chunks"):
        decode("not.a-jwt", "user")


def test_time_problems_are_named_as_nats_io_jwt_names_them() -> None:
    now = time.time()
    expired = decode(encode("user", ACCOUNT, USER.public, exp=int(now) - 1), "user")
    early = decode(encode("user", ACCOUNT, USER.public, nbf=int(now) + 60), "user")
    assert expired.time_problem(now) == "claim is expired"
    assert early.time_problem(now) == "claim is not yet valid"
    assert decode(user_jwt(ACCOUNT, USER), "user").time_problem(now) is None


def test_a_decorated_file_gives_its_first_jwt() -> None:
    token = user_jwt(ACCOUNT, USER)
    assert undecorate(creds(token, USER)) == token
    assert undecorate(f"  {token}\n") == token


# --- reading accounts and users ----------------------------------------------------------------


def test_an_operator_trusts_its_key_and_signing_keys() -> None:
    operator = read_operator(operator_jwt(OPERATOR, signing_keys=[SIGNER.public], system_account=ACCOUNT.public))
    assert operator.trusted_keys == TRUSTED and operator.system_account == ACCOUNT.public
    strict = read_operator(operator_jwt(OPERATOR, signing_keys=[SIGNER.public], strict_signing_key_usage=True))
    assert strict.trusted_keys == {SIGNER.public}
    with pytest.raises(JwtError, match="assert_server_version is not supported"):
        read_operator(operator_jwt(OPERATOR, assert_server_version="2.16.0"))


def test_an_account_must_come_from_a_trusted_key_and_be_the_one_listed() -> None:
    stranger = operator_key()
    with pytest.raises(JwtError, match="which no trusted operator names"):
        read_account(account_jwt(stranger, ACCOUNT), TRUSTED)
    with pytest.raises(JwtError, match="its JWT is about"):
        read_account(account_jwt(OPERATOR, ACCOUNT), TRUSTED, name=account_key().public)
    assert read_account(account_jwt(SIGNER, ACCOUNT), TRUSTED, name=ACCOUNT.public).public_key == ACCOUNT.public


def test_jetstream_is_the_accounts_that_are_given_storage() -> None:
    assert _account().jetstream is None and not _account().account.jetstream
    v1 = encode("account", OPERATOR, ACCOUNT.public, {"limits": {"conn": -1, "subs": -1, "data": -1, "payload": -1,
                                                                 "disk_storage": 1000}}, version=1)  # fmt: skip
    assert read_account(v1, TRUSTED).jetstream is None  # nats-io/jwt migrates a version 1 account without it
    account = _account(limits={"disk_storage": 10_000, "mem_storage": 0, "streams": 3, "max_bytes_required": True})
    assert account.account.jetstream
    assert account.jetstream == {
        "max_memory": 0,
        "max_storage": 10_000,
        "max_streams": 3,
        "max_consumers": -1,
        "max_ack_pending": -1,
        "memory_max_stream_bytes": -1,
        "storage_max_stream_bytes": -1,
        "max_bytes_required": True,
    }


def test_limits_jetraft_does_not_enforce_are_refused_not_dropped() -> None:
    # a version 2 JWT that leaves a limit out gives it 0, which nats-server enforces (no connection at all)
    for limit in ("conn", "subs", "payload", "data"):
        with pytest.raises(JwtError, match=rf"nats.limits.{limit} \(10\) is not supported by jetraft yet"):
            _account(limits={limit: 10})
    with pytest.raises(JwtError, match=r"nats.limits.subs \(0\)"):
        read_account(encode("account", OPERATOR, ACCOUNT.public, {"limits": {}}), TRUSTED)
    for field, value in (("mappings", {"a": [{"subject": "b"}]}), ("tiered_limits", {"R1": {}})):
        with pytest.raises(JwtError, match="is not supported by jetraft yet"):
            _account(**{field: value}) if field == "mappings" else _account(limits={field: value})
    with pytest.raises(JwtError, match="scoped signing keys"):
        _account(signing_keys=[{"kind": "user_scope", "key": ACCOUNT_SIGNER.public}])
    with pytest.raises(JwtError, match="token_req is not supported"):
        _account(exports=[{"subject": "svc.>", "type": "service", "token_req": True}])


def test_exports_and_imports_become_the_accounts_own() -> None:
    exporter = _account(exports=[{"subject": "svc.>", "type": "service"}, {"subject": "feed.*"}])
    other = account_key()
    importer = read_account(
        account_jwt(OPERATOR, other, imports=[{"account": ACCOUNT.public, "subject": "svc.a", "type": "service",
                                                "local_subject": "mine.a"}]),
        TRUSTED,
    )  # fmt: skip
    assert [(e.subject, e.service) for e in exporter.account.exports] == [("svc.>", True), ("feed.*", False)]
    assert [(i.account, i.subject, i.local, i.service) for i in importer.account.imports] == [
        (ACCOUNT.public, "svc.a", "mine.a", True)
    ]
    Accounts({a.public_key: a.account for a in (exporter, importer)})  # the import fits the export
    with pytest.raises(JwtError, match="2 imports, more than its limit of 1"):
        read_account(account_jwt(OPERATOR, other, limits={"imports": 1}, imports=[
            {"account": ACCOUNT.public, "subject": "x"}, {"account": ACCOUNT.public, "subject": "y"}]), TRUSTED)  # fmt: skip
    with pytest.raises(JwtError, match="has wildcards, which its limits forbid"):
        _account(limits={"wildcards": False}, exports=[{"subject": "feed.*"}])


def test_a_users_permissions_are_read_as_nats_server_builds_them() -> None:
    user = read_user(user_jwt(ACCOUNT, USER, pub={"allow": ["a.>"], "deny": ["a.b"]}, sub={"deny": ["x"]}))
    assert user.permissions is not None
    assert user.permissions.publish == SubjectRule(allow=("a.>",), deny=("a.b",))
    assert user.permissions.subscribe == SubjectRule(allow=None, deny=("x",))
    # responses allowed: the blanket publish allow goes, the defaults fill what is left at 0
    responder = read_user(user_jwt(ACCOUNT, USER, resp={"max": 0, "ttl": 0}))
    assert responder.permissions is not None
    assert responder.permissions.publish == SubjectRule(allow=(), deny=())
    assert responder.permissions.responses == ResponsePermission(max_msgs=1, ttl=120.0)
    assert read_user(user_jwt(ACCOUNT, USER, pub={}, sub={})).permissions is None
    with pytest.raises(JwtError, match="times is not supported"):
        read_user(user_jwt(ACCOUNT, USER, times=[{"start": "08:00:00", "end": "17:00:00"}]))
    with pytest.raises(JwtError, match=r"nats.subs \(0\)"):
        read_user(encode("user", ACCOUNT, USER.public, {}))  # version 2: limits left out are 0


# --- the authenticator -------------------------------------------------------------------------


def test_a_user_is_let_in_to_its_account_with_the_nonce_signed() -> None:
    account = _account(signing_keys=[ACCOUNT_SIGNER.public])
    auth = OperatorAuthenticator({account.public_key: account})
    identity = auth.check(_connect_options(user_jwt(ACCOUNT, USER), USER, "n0nce"), "n0nce")
    assert identity is not None and (identity.user, identity.account) == (USER.public, ACCOUNT.public)
    # by the account's signing key on its behalf
    on_behalf = user_jwt(ACCOUNT_SIGNER, USER, issuer_account=ACCOUNT.public)
    assert auth.check(_connect_options(on_behalf, USER, "n0nce"), "n0nce") is not None
    # another nonce, another key's signature, no signature, no JWT
    assert auth.check(_connect_options(user_jwt(ACCOUNT, USER), USER, "other"), "n0nce") is None
    assert auth.check(_connect_options(user_jwt(ACCOUNT, USER), user_key(), "n0nce"), "n0nce") is None
    assert auth.check(_connect_options(user_jwt(ACCOUNT, USER), None, "n0nce"), "n0nce") is None
    assert auth.check(ConnectOptions(user="u", password="p"), "n0nce") is None


def test_users_the_account_does_not_vouch_for_are_refused() -> None:
    revoked = user_key()
    account = _account(revocations={revoked.public: int(time.time())})
    auth = OperatorAuthenticator({account.public_key: account})
    nonce = "n"
    assert auth.check(_connect_options(user_jwt(ACCOUNT, revoked), revoked, nonce), nonce) is None
    stranger = account_key()
    assert auth.check(_connect_options(user_jwt(stranger, USER), USER, nonce), nonce) is None
    unnamed_signer = user_jwt(stranger, USER, issuer_account=ACCOUNT.public)
    assert auth.check(_connect_options(unnamed_signer, USER, nonce), nonce) is None
    # a revocation of every user ("*") takes the ones issued before it
    everyone = _account(revocations={"*": int(time.time())})
    assert OperatorAuthenticator({ACCOUNT.public: everyone}).check(
        _connect_options(user_jwt(ACCOUNT, USER), USER, nonce), nonce
    ) is None


def test_bearer_tokens_need_no_signature_unless_the_account_forbids_them() -> None:
    bearer = user_jwt(ACCOUNT, USER, bearer_token=True)
    allowing = OperatorAuthenticator({ACCOUNT.public: _account()})
    assert allowing.check(ConnectOptions(jwt=bearer), "n") is not None
    forbidding = OperatorAuthenticator({ACCOUNT.public: _account(limits={"disallow_bearer": True})})
    assert forbidding.check(ConnectOptions(jwt=bearer), "n") is None


def test_the_sooner_expiry_travels_with_the_identity() -> None:
    now = 1_000_000.0
    account = read_account(
        encode("account", OPERATOR, ACCOUNT.public, {"limits": {"conn": -1, "subs": -1, "data": -1, "payload": -1}},
               exp=int(now) + 100),
        TRUSTED,
    )  # fmt: skip
    auth = OperatorAuthenticator({ACCOUNT.public: account}, clock=lambda: now)
    soon = encode("user", ACCOUNT, USER.public, {"subs": -1, "data": -1, "payload": -1}, exp=int(now) + 10)
    late = encode("user", ACCOUNT, USER.public, {"subs": -1, "data": -1, "payload": -1}, exp=int(now) + 1000)
    identity = auth.check(_connect_options(soon, USER, "n"), "n")
    assert identity is not None and (identity.expires_at, identity.expiry_error) == (now + 10, USER_EXPIRED)
    identity = auth.check(_connect_options(late, USER, "n"), "n")
    assert identity is not None and (identity.expires_at, identity.expiry_error) == (now + 100, ACCOUNT_EXPIRED)
    expired = OperatorAuthenticator({ACCOUNT.public: account}, clock=lambda: now + 200)
    assert expired.check(_connect_options(user_jwt(ACCOUNT, USER), USER, "n"), "n") is None


def test_the_accounts_default_permissions_apply_to_users_without_their_own() -> None:
    account = _account(default_permissions={"pub": {"deny": ["secret.>"]}})
    auth = OperatorAuthenticator({ACCOUNT.public: account})
    plain = auth.check(_connect_options(user_jwt(ACCOUNT, USER), USER, "n"), "n")
    assert plain is not None and plain.permissions is not None
    assert plain.permissions.publish == SubjectRule(deny=("secret.>",))
    own = auth.check(_connect_options(user_jwt(ACCOUNT, USER, sub={"allow": ["x"]}), USER, "n"), "n")
    assert own is not None and own.permissions is not None and own.permissions.publish == SubjectRule()


# --- nats-py with a creds file, against a client port in operator mode ---------------------------


async def test_nats_py_connects_with_a_creds_file_and_stays_in_its_account(tmp_path: Path) -> None:
    other_account, other_user = account_key(), user_key()
    accounts = {a.public_key: a for a in (_account(), read_account(account_jwt(OPERATOR, other_account), TRUSTED))}
    router = Router()
    server = GatewayServer(
        router,
        name="op",
        auth=OperatorAuthenticator(accounts),
        accounts=Accounts({name: account.account for name, account in accounts.items()}),
    )
    await server.start()
    url = f"nats://{HOST}:{server.port}"
    mine, theirs = tmp_path / "mine.creds", tmp_path / "theirs.creds"
    mine.write_text(creds(user_jwt(ACCOUNT, USER), USER))
    theirs.write_text(creds(user_jwt(other_account, other_user), other_user))
    try:
        first = await nats.connect(url, user_credentials=str(mine), allow_reconnect=False)
        second = await nats.connect(url, user_credentials=str(mine), allow_reconnect=False)
        stranger = await nats.connect(url, user_credentials=str(theirs), allow_reconnect=False)
        try:
            sub = await first.subscribe("orders.>")
            await first.flush()
            await stranger.publish("orders.1", b"not for you")
            await stranger.flush()
            await second.publish("orders.2", b"yours")
            msg = await sub.next_msg(timeout=5)
            assert (msg.subject, msg.data) == ("orders.2", b"yours")
        finally:
            for client in (first, second, stranger):
                await client.close()
        with pytest.raises(NatsError, match="Authorization Violation"):
            await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0)
    finally:
        await server.stop()
