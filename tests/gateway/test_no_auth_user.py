"""nats-server's no_auth_user in the users list: who a client without credentials is."""

from __future__ import annotations

import pytest

from gateway.auth import Identity, NkeyUser, User, Users, make_authenticator
from gateway.connect_options import ConnectOptions

NKEY = "UDFYNNZ52FVVMM6L2HY5SNYCSLWPSVQTWIC667LKBCWXXBR6AMKR3L6G"
USERS = [User("foo", "", None, "A"), User("bar", "b"), NkeyUser(NKEY, None, "N")]


def test_a_client_without_credentials_is_the_no_auth_user() -> None:
    users = Users(USERS, no_auth_user="foo")
    assert users.check(ConnectOptions()) == Identity("foo", None, "A")
    assert users.check(ConnectOptions(user="bar", password="b")) == Identity("bar", None, "$G")
    # by name, a user without a password is no one (as nats-server answers)
    assert users.check(ConnectOptions(user="foo")) is None
    assert users.check(ConnectOptions(user="foo", password="")) is None
    assert users.check(ConnectOptions(user="bar", password="x")) is None


def test_without_a_no_auth_user_a_client_without_credentials_is_no_one() -> None:
    assert Users(USERS).check(ConnectOptions()) is None


def test_the_no_auth_user_may_be_an_nkey_user() -> None:
    assert Users(USERS, no_auth_user=NKEY).check(ConnectOptions()) == Identity(NKEY, None, "N")


def test_the_no_auth_user_must_be_one_of_the_users() -> None:
    with pytest.raises(ValueError, match='no_auth_user: "baz" not present'):
        Users(USERS, no_auth_user="baz")
    with pytest.raises(ValueError, match="users/nkeys are not defined"):
        make_authenticator(no_auth_user="baz")
