"""An account's view of the router: its services see their account's subjects as its clients do, two
accounts' services of the same subjects never hear each other, and the nodes' own subjects stay internal."""

from __future__ import annotations

from cluster.runtime.account_router import AccountRouter
from cluster.runtime.context import INTERNAL_SUBJECT_PREFIXES
from gateway.router import Message, Router


def _collect(into: list[Message]):  # type: ignore[no-untyped-def]
    return into.append


def test_subjects_go_into_the_accounts_space_and_come_back_out() -> None:
    view = AccountRouter(Router(), "B", INTERNAL_SUBJECT_PREFIXES)
    assert view.to_router("$JS.API.STREAM.INFO.ORDERS") == "_ACC_.B.$JS.API.STREAM.INFO.ORDERS"
    assert view.to_router("$JSR.S.ORDERS.MSG_GET") == "$JSR._ACC_.B.S.ORDERS.MSG_GET"
    assert view.to_router("_JRI.n1.x.1") == "_JRI._ACC_.B.n1.x.1"
    assert view.to_router("_ACC_.I._INBOX.x") == "_ACC_.I._INBOX.x"  # another account's reply, as it is
    for subject in ("$JS.API.>", "$JSR.S.ORDERS.MSG_GET", "_JRI.n1.x.*", "orders.1"):
        assert view.from_router(view.to_router(subject)) == subject
    assert view.from_router("_ACC_.I._INBOX.x") == "_ACC_.I._INBOX.x"


def test_two_accounts_services_on_the_same_subject_each_get_their_own_clients_messages() -> None:
    router = Router(internal_prefixes=INTERNAL_SUBJECT_PREFIXES)
    home: list[Message] = []
    seen: dict[str, list[Message]] = {"A": [], "B": []}
    router.subscribe("orders.>", _collect(home))
    for account, messages in seen.items():
        AccountRouter(router, account, INTERNAL_SUBJECT_PREFIXES).subscribe("orders.>", _collect(messages))
    # what account B's client publishes (its connection maps it into B's space)
    router.publish("_ACC_.B.orders.1", b"b", "_ACC_.B._INBOX.r")
    assert [(m.subject, m.reply, m.payload) for m in seen["B"]] == [("orders.1", "_INBOX.r", b"b")]
    assert seen["A"] == [] and home == []
    router.publish("orders.2", b"home")
    assert [m.payload for m in home] == [b"home"]
    assert seen["A"] == [] and len(seen["B"]) == 1


def test_a_service_answer_reaches_its_own_accounts_client_only() -> None:
    router = Router(internal_prefixes=INTERNAL_SUBJECT_PREFIXES)
    got: list[Message] = []
    router.subscribe("_ACC_.B._INBOX.r", _collect(got))
    view = AccountRouter(router, "B", INTERNAL_SUBJECT_PREFIXES)
    assert view.has_interest("_INBOX.r")
    assert not AccountRouter(router, "A", INTERNAL_SUBJECT_PREFIXES).has_interest("_INBOX.r")
    view.publish("_INBOX.r", b"ack", deliver_as="orders.1")
    assert [(m.subject, m.payload) for m in got] == [("orders.1", b"ack")]


def test_the_nodes_own_subjects_of_an_account_stay_out_of_clients_reach() -> None:
    router = Router(internal_prefixes=INTERNAL_SUBJECT_PREFIXES)
    got: list[Message] = []
    AccountRouter(router, "B", INTERNAL_SUBJECT_PREFIXES).subscribe("$JSR.S.ORDERS.MSG_GET", _collect(got))

    class Client:
        echo = True
        no_responders = False

        def deliver(self, *args: object) -> None: ...

        def subscription_closed(self, sub: object) -> None: ...

    # a client of B publishes `$JSR.S.ORDERS.MSG_GET` into B's space, and no client may publish internal ones
    router.publish("_ACC_.B.$JSR.S.ORDERS.MSG_GET", b"forged", origin=Client())
    router.publish("$JSR._ACC_.B.S.ORDERS.MSG_GET", b"forged", origin=Client())
    assert got == []
    router.publish("$JSR._ACC_.B.S.ORDERS.MSG_GET", b"leader's")
    assert [(m.subject, m.payload) for m in got] == [("$JSR.S.ORDERS.MSG_GET", b"leader's")]


def test_a_home_accounts_reply_through_an_import_comes_back_to_the_home_space() -> None:
    router = Router(internal_prefixes=INTERNAL_SUBJECT_PREFIXES)
    view = AccountRouter(router, "B", INTERNAL_SUBJECT_PREFIXES, home="A")
    requests: list[Message] = []
    view.subscribe("$JS.API.INFO", _collect(requests))
    answers: list[Message] = []
    router.subscribe("_INBOX.home", _collect(answers))
    # a home client's request, imported into B's API (the home account's subjects have no prefix)
    router.publish("_ACC_.B.$JS.API.INFO", b"", "_INBOX.home")
    assert [(m.subject, m.reply) for m in requests] == [("$JS.API.INFO", "_ACC_.A._INBOX.home")]
    view.publish(requests[0].reply or "", b"info")
    assert [(m.subject, m.payload) for m in answers] == [("_INBOX.home", b"info")]
    # B's own, another account's and internal replies are not the home account's
    assert view.reply_from_router("_ACC_.B._INBOX.b") == "_INBOX.b"
    assert view.reply_from_router("_ACC_.I._INBOX.i") == "_ACC_.I._INBOX.i"
    assert view.reply_from_router("_JRI._ACC_.B.n1.x.1") == "_JRI.n1.x.1"


def test_a_request_lost_in_transit_reaches_its_accounts_handler_in_the_accounts_terms() -> None:
    router = Router(internal_prefixes=INTERNAL_SUBJECT_PREFIXES)
    lost: dict[str, list[tuple[Message, str | None]]] = {"A": [], "B": []}
    for account in ("A", "B"):
        view = AccountRouter(router, account, INTERNAL_SUBJECT_PREFIXES)
        view.on_lost_in_transit("$JSR.S.", lambda msg, via, into=lost[account]: into.append((msg, via)))
    router.lost_in_transit(
        [("$JSR._ACC_.B.S.ORDERS.INFO", "_ACC_.B._INBOX.x", None, b"{}", "n2")]
    )
    assert lost["A"] == []
    [(msg, via)] = lost["B"]
    assert (msg.subject, msg.reply, msg.payload, via) == ("$JSR.S.ORDERS.INFO", "_INBOX.x", b"{}", "n2")
