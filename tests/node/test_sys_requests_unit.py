"""SystemResponder on a real Router, without a node: which requests it answers and with what."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cluster.node.sys_requests import SystemResponder
from gateway.router import Router


class _Bodies:
    """Endpoint bodies that say what was asked of them."""

    def statsz(self) -> dict[str, Any]:
        return {"kind": "statsz"}

    def varz(self) -> dict[str, Any]:
        return {"kind": "varz"}

    def connz(self, query: Mapping[str, str]) -> dict[str, Any]:
        return {"kind": "connz", "query": dict(query)}

    def subsz(self, query: Mapping[str, str]) -> dict[str, Any]:
        return {"kind": "subsz", "query": dict(query)}

    def routez(self) -> dict[str, Any]:
        return {"kind": "routez"}

    def jsz(self, query: Mapping[str, str]) -> dict[str, Any]:
        if query.get("streams") not in (None, "true"):
            raise ValueError("bad streams")
        return {"kind": "jsz", "query": dict(query)}

    def healthz(self, query: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        return 200, {"status": "ok"}

    def gatewayz(self) -> dict[str, Any]:
        return {"kind": "gatewayz"}

    def leafz(self) -> dict[str, Any]:
        return {"kind": "leafz"}

    def accountz(self, query: Mapping[str, str]) -> dict[str, Any]:
        return {"kind": "accountz", "query": dict(query)}


IDENTITY = {"name": "n2", "host": "127.0.0.1", "id": "NID2", "cluster": "jetraft", "ver": "2.15.1", "tags": ["az:1"]}


def responder() -> tuple[Router, SystemResponder, list[dict[str, Any]]]:
    router = Router()
    replies: list[dict[str, Any]] = []
    router.subscribe("reply.>", lambda msg: replies.append(json.loads(msg.payload)))
    system = SystemResponder(router, _Bodies(), lambda: dict(IDENTITY), "NID2", "alice")
    system.open()
    return router, system, replies


def ask(router: Router, subject: str, body: Any = None) -> None:
    router.publish(subject, b"" if body is None else json.dumps(body).encode(), "reply.1")


def test_ping_answers_statsz_with_who_answered() -> None:
    router, _system, replies = responder()
    ask(router, "$SYS.REQ.SERVER.PING")
    assert len(replies) == 1
    server = replies[0]["server"]
    assert server["name"] == "n2" and server["id"] == "NID2" and server["jetstream"] is True
    assert server["flags"] == 1 and server["seq"] == 1 and server["time"].endswith("Z")
    assert replies[0]["statsz"] == {"kind": "statsz"}


def test_ping_filters_select_the_server() -> None:
    router, _system, replies = responder()
    for options in (
        {"server_name": "n1"},
        {"server_name": "n", "exact_match": True},
        {"cluster": "other"},
        {"tags": ["az:2"]},
        {"domain": "hub"},
    ):
        ask(router, "$SYS.REQ.SERVER.PING", options)
    assert replies == []
    for options in ({"server_name": "n"}, {"server_name": "n2", "exact_match": True}, {"tags": ["az:1"]}):
        ask(router, "$SYS.REQ.SERVER.PING", options)
    assert len(replies) == 3


def test_kinds_answer_their_endpoint_with_the_options_as_query() -> None:
    router, _system, replies = responder()
    ask(router, "$SYS.REQ.SERVER.PING.JSZ", {"streams": True, "consumer": True, "leader_only": False})
    ask(router, "$SYS.REQ.SERVER.NID2.CONNZ", {"subscriptions": True, "limit": 5})
    ask(router, "$SYS.REQ.SERVER.OTHER.VARZ")
    ask(router, "$SYS.REQ.SERVER.PING.ACCOUNTZ", {"account": "$G"})
    ask(router, "$SYS.REQ.SERVER.PING.HEALTHZ", {"details": True})
    ask(router, "$SYS.REQ.SERVER.PING.IPQUEUESZ")  # not served here: no answer
    assert [r["data"] for r in replies] == [
        {"kind": "jsz", "query": {"streams": "true", "consumers": "true"}},
        {"kind": "connz", "query": {"subs": "true", "limit": "5"}},
        {"kind": "accountz", "query": {"acc": "$G"}},
        {"status": "ok", "status_code": 200},
    ]


def test_a_bad_option_gets_an_error_not_silence() -> None:
    router, _system, replies = responder()
    ask(router, "$SYS.REQ.SERVER.PING.JSZ", {"streams": "maybe"})
    assert replies[0]["error"] == {"code": 400, "description": "bad streams"}


def test_user_info_names_the_user_and_the_one_account() -> None:
    router, system, replies = responder()
    ask(router, "$SYS.REQ.USER.INFO")
    assert replies[0]["data"] == {"user": "alice", "account": "$G", "account_name": "$G"}
    system.close()
    ask(router, "$SYS.REQ.USER.INFO")
    assert len(replies) == 1


