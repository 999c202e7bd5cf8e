"""Operator mode in a nats-server configuration file: what a node takes from `operator`, `resolver` and
`resolver_preload`, and what it refuses, by name and line."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from cluster.node.config import ConfigError, NodeConfig, add_node_arguments, config_from_args
from cluster.runtime.account_limits import JetStreamAccountLimits
from gateway.jwt.authenticator import OperatorAuthenticator
from tests.gateway.jwt_factory import account_jwt, account_key, creds, operator_jwt, operator_key, user_key

OPERATOR, SIGNER = operator_key(), operator_key()
APP, SYS = account_key(), account_key()
JETSTREAM = {"disk_storage": 1 << 20, "mem_storage": -1, "streams": 10, "consumer": -1}


def _load(tmp_path: Path, text: str) -> NodeConfig:
    path = tmp_path / "node.conf"
    path.write_text("server_name: n1\n" + text)
    parser = argparse.ArgumentParser()
    add_node_arguments(parser)
    return config_from_args(parser.parse_args(["--config", str(path)]))


def _conf(operator: str | None = None, preload: dict[str, str] | None = None, extra: str = "") -> str:
    operator = operator or operator_jwt(OPERATOR, signing_keys=[SIGNER.public], system_account=SYS.public)
    if preload is None:
        preload = {
            APP.public: account_jwt(SIGNER, APP, limits=JETSTREAM),
            SYS.public: account_jwt(OPERATOR, SYS),
        }
    entries = "\n".join(f'  {key}: "{jwt}"' for key, jwt in preload.items())
    return f"operator: {operator}\nresolver: MEMORY\nresolver_preload: {{\n{entries}\n}}\n{extra}"


def test_the_preloaded_accounts_become_the_nodes_accounts(tmp_path: Path) -> None:
    config = _load(tmp_path, _conf())
    assert config.jwt_accounts is not None and set(config.jwt_accounts) == {APP.public, SYS.public}
    assert config.accounts is not None and set(config.accounts.accounts) >= {APP.public, SYS.public}
    assert config.accounts.jetstream_accounts == (APP.public,) and config.accounts.home == APP.public
    assert config.system_account == config.system_account_name == SYS.public
    assert config.jetstream_account_limits == {
        APP.public: JetStreamAccountLimits(max_memory=-1, max_storage=1 << 20, max_streams=10)
    }
    assert isinstance(OperatorAuthenticator(config.jwt_accounts), OperatorAuthenticator)


def test_the_operator_may_be_a_file_decorated_or_not(tmp_path: Path) -> None:
    token = operator_jwt(OPERATOR, system_account=SYS.public)
    plain, decorated = tmp_path / "op.jwt", tmp_path / "op.creds"
    plain.write_text(token + "\n")
    decorated.write_text(creds(token, user_key()).replace("NATS USER JWT", "TEST OPERATOR JWT"))
    preload = {APP.public: account_jwt(OPERATOR, APP), SYS.public: account_jwt(OPERATOR, SYS)}
    for path in (plain, decorated):
        config = _load(tmp_path, _conf(operator=f"'{path}'", preload=preload))
        assert config.system_account == SYS.public


def test_a_system_account_in_the_file_must_be_the_operators(tmp_path: Path) -> None:
    assert _load(tmp_path, _conf(extra=f"system_account: {SYS.public}\n")).system_account == SYS.public
    with pytest.raises(ConfigError, match="system_account in config and operator JWT must be identical"):
        _load(tmp_path, _conf(extra=f"system_account: {APP.public}\n"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (lambda: _conf().replace("resolver: MEMORY", "resolver: URL(http://localhost:9090/jwt/v1/accounts/)"),
         r"line 3: resolver: only the memory resolver \(MEMORY\) is supported by jetraft yet"),
        (lambda: _conf().replace("resolver: MEMORY\n", ""), "operators require an account resolver to be configured"),
        (lambda: "resolver: MEMORY\n", "line 2: resolver: needs an operator"),
        (lambda: _conf(extra="accounts { A: {} }\n"), "operators do not allow Accounts to be configured directly"),
        (lambda: _conf(extra="authorization { users: [ {user: a, password: b} ] }\n"),
         "operators do not allow users to be configured directly"),
        (lambda: _conf(extra="authorization { token: s3cret }\n"), "token has no place in it"),
        (lambda: _conf(preload={APP.public: account_jwt(operator_key(), APP), SYS.public: account_jwt(OPERATOR, SYS)}),
         f"preload account error for '{APP.public}': .* which no trusted operator names"),
        (lambda: _conf(preload={SYS.public: account_jwt(OPERATOR, APP)}), "its JWT is about"),
        (lambda: _conf(preload={APP.public: account_jwt(OPERATOR, APP)}),
         f"the system account {SYS.public} has no JWT here"),
        # nats-server will not start JetStream in operator mode without a system account, in these words
        (lambda: _conf(operator=operator_jwt(OPERATOR), preload={APP.public: account_jwt(OPERATOR, APP, limits=JETSTREAM)}),
         "Can't start JetStream: setting up internal jetstream subscriptions failed: system account not setup"),
        (lambda: _conf(operator=operator_jwt(OPERATOR, assert_server_version="3.0.0")),
         "nats.assert_server_version is not supported by jetraft yet"),
        (lambda: _conf(operator="'/nonexistent/op.jwt'"), "operator: cannot read '/nonexistent/op.jwt'"),
        (lambda: "system_account: NOPE\n", "system_account 'NOPE' is not one of the configured accounts"),
    ],
)  # fmt: skip
def test_what_operator_mode_cannot_take_is_refused(tmp_path: Path, text: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, text())  # type: ignore[operator]


def test_a_system_account_names_one_of_the_configured_accounts(tmp_path: Path) -> None:
    config = _load(tmp_path, "accounts { A: { jetstream: enabled }, S: {} }\nsystem_account: S\n")
    assert config.system_account == "S" and config.jwt_accounts is None
