"""gateway/accounts.py: how account spaces map subjects, and which exports and imports fit together."""

from __future__ import annotations

import pytest

from gateway.accounts import (
    GLOBAL_ACCOUNT,
    Account,
    AccountConfigError,
    Accounts,
    Export,
    Import,
    map_wildcards,
)


def adr_19() -> Accounts:
    return Accounts(
        {
            "A": Account(
                "A",
                exports=(Export("$JS.API.>", True), Export("$KV.>", True), Export("forI.>", False)),
                jetstream=True,
            ),
            "I": Account(
                "I",
                imports=(
                    Import("A", "$JS.API.>", "fromA.>", True),
                    Import("A", "$KV.>", "fromA.$KV.>", True),
                    Import("A", "forI.>", "forI.>", False),
                ),
            ),
        }
    )


def test_wildcards_move_between_patterns() -> None:
    assert map_wildcards("fromA.>", "$JS.API.>", "fromA.STREAM.INFO.X") == "$JS.API.STREAM.INFO.X"
    assert map_wildcards("a.*.c.>", "x.*.>", "a.1.c.d.e") == "x.1.d.e"


def test_the_jetstream_account_is_home_and_the_others_are_prefixed() -> None:
    accounts = adr_19()
    assert accounts.home == "A"
    assert accounts.prefixes == {"A": "", "I": "_ACC_.I.", GLOBAL_ACCOUNT: f"_ACC_.{GLOBAL_ACCOUNT}."}


def test_every_account_with_jetstream_has_one_and_the_global_account_is_home_among_them() -> None:
    two = Accounts({"B": Account("B", jetstream=True), "A": Account("A", jetstream=True), "C": Account("C")})
    assert (two.jetstream_accounts, two.home) == (("A", "B"), "A")
    assert two.prefixes == {"A": "", "B": "_ACC_.B.", "C": "_ACC_.C.", GLOBAL_ACCOUNT: f"_ACC_.{GLOBAL_ACCOUNT}."}
    with_global = Accounts({GLOBAL_ACCOUNT: Account(GLOBAL_ACCOUNT, jetstream=True), "A": Account("A", jetstream=True)})
    assert (with_global.jetstream_accounts, with_global.home) == ((GLOBAL_ACCOUNT, "A"), GLOBAL_ACCOUNT)
    # as nats-server: accounts configured and none enables JetStream, none has it (not even the global)
    none = Accounts({"A": Account("A")})
    assert (none.jetstream_accounts, none.home) == ((), GLOBAL_ACCOUNT)
    # the global account has it when no other account is configured (the system account aside)
    global_only = Accounts({"$SYS": Account("$SYS")})
    assert (global_only.jetstream_accounts, global_only.home) == ((GLOBAL_ACCOUNT,), GLOBAL_ACCOUNT)


def test_service_imports_map_publishes_the_most_specific_first() -> None:
    space = adr_19().space("I")
    assert space is not None
    assert space.publish_subject("fromA.STREAM.NAMES") == "$JS.API.STREAM.NAMES"
    assert space.publish_subject("fromA.$KV.map.k") == "$KV.map.k"
    assert space.publish_subject("orders.1") == "_ACC_.I.orders.1"
    assert space.reply_subject("_INBOX.1") == "_ACC_.I._INBOX.1"


def test_stream_imports_add_subscriptions_and_map_deliveries_back() -> None:
    space = adr_19().space("I")
    assert space is not None
    assert space.subscription_subjects("forI.abc") == (["_ACC_.I.forI.abc", "forI.abc"], False)
    assert space.subscription_subjects(">") == (["_ACC_.I.>", "forI.>"], True)
    assert space.subscription_subjects("orders.*") == (["_ACC_.I.orders.*"], False)
    assert space.delivered_subject("_ACC_.I.orders.1") == ("orders.1", False)
    assert space.delivered_subject("forI.abc") == ("forI.abc", True)


def test_the_home_account_sees_no_other_accounts_subjects() -> None:
    home = adr_19().space("A")
    assert home is not None
    assert home.delivered_subject("_ACC_.I.orders.1") == (None, False)
    assert home.publish_subject("_ACC_.I.orders.1") is None
    assert home.publish_subject("orders.1") == "orders.1"


def test_a_request_to_an_exported_service_may_be_answered_once() -> None:
    home = adr_19().space("A")
    assert home is not None
    reply = home.delivered_reply("_ACC_.I._INBOX.1", "$JS.API.INFO")
    assert reply == "_ACC_.I._INBOX.1"
    assert home.publish_subject(reply) == "_ACC_.I._INBOX.1"
    assert home.publish_subject(reply) is None  # one response per request
    # Not a request for an exported service: shown as its publisher gave it, and an answer stays in the
    # answerer's own space, where the publisher does not listen (as with nats-server)
    assert home.delivered_reply("_ACC_.I._INBOX.2", "orders.1") == "_INBOX.2"
    assert home.publish_subject("_ACC_.I._INBOX.2") is None
    i = adr_19().space("I")
    assert i is not None
    assert i.delivered_reply("_ACC_.B.$JS.ACK.ORDERS.worker.1.1.1.1.0", "orders.1") == "$JS.ACK.ORDERS.worker.1.1.1.1.0"


def test_an_importer_cannot_answer_replies_of_another_space() -> None:
    space = adr_19().space("I")
    assert space is not None
    ack = "$JS.ACK.ORDERS.worker.1.1.1.1.0"
    assert space.delivered_reply(ack, "orders.1") == ack
    assert space.publish_subject(ack) == "_ACC_.I." + ack  # its own space, where nobody listens


@pytest.mark.parametrize(
    ("accounts", "message"),
    [
        ({"I": Account("I", imports=(Import("B", "x", "x", True),))}, "unknown account 'B'"),
        (
            {"A": Account("A"), "I": Account("I", imports=(Import("A", "x", "x", True),))},
            "exports no service that covers 'x'",
        ),
        (
            {
                "A": Account("A", exports=(Export("x.>", False),)),
                "I": Account("I", imports=(Import("A", "x.>", "x.>", True),)),
            },
            "exports no service",
        ),
        (
            {
                "A": Account("A", exports=(Export("x.>", True, ("J",)),)),
                "I": Account("I", imports=(Import("A", "x.>", "x.>", True),)),
            },
            "only to J",
        ),
        (
            {
                "A": Account("A", exports=(Export("x.>", True),)),
                "I": Account("I", imports=(Import("A", "x.>", "y.*", True),)),
            },
            "same wildcards",
        ),
    ],
)
def test_imports_that_do_not_fit_are_refused(accounts: dict[str, Account], message: str) -> None:
    with pytest.raises(AccountConfigError, match=message):
        Accounts(accounts)


async def test_a_no_responders_status_names_the_subject_as_published() -> None:
    import asyncio

    from gateway.auth import User, make_authenticator
    from gateway.router import Router
    from gateway.server import GatewayServer
    from local.ports import HOST
    from tests.node.raw_client import RawClient

    accounts = adr_19()
    users = [User("a", "a", account="A"), User("i", "i", account="I")]
    gateway = GatewayServer(Router(), name="acc", host=HOST, auth=make_authenticator(users=users), accounts=accounts)
    await gateway.start()
    try:
        client = await RawClient.connect(HOST, gateway.port, user="i", headers=True, no_responders=True, **{"pass": "i"})
        try:
            lines = await asyncio.wait_for(client.exchange("SUB r 1\r\nPUB nobody.here r 0\r\n\r\n"), 10)
        finally:
            await client.close()
        assert "Nats-Subject: nobody.here" in lines
    finally:
        await gateway.stop()
