"""nats-server's no_auth_user: a client that gives no credentials is that user, in that user's account. The
same file given to nats-server 2.15.1 and to a jetraft node: the same clients get in, or not, and land in
the same account."""

from __future__ import annotations

import json
from pathlib import Path

import nats

from local.ports import HOST
from tests.node.reference_server import on_both_with_jetstream

# nats-py's js-limits.conf, in substance: a user without a password is the no_auth_user
CONF = """
no_auth_user: "foo"
accounts: {
    A { users: [ { user: "foo" } ], jetstream: { max_streams: 1 } }
    B { users: [ { user: "bar", password: "b" } ] }
}
"""
CREDENTIALS = ["", "foo@", "foo:x@", "bar:b@", "bar:x@"]


async def _outcomes(port: int) -> list[object]:
    outcomes: list[object] = []
    for credentials in CREDENTIALS:
        try:
            nc = await nats.connect(f"nats://{credentials}{HOST}:{port}", allow_reconnect=False, connect_timeout=5)
        except nats.errors.Error as exc:
            outcomes.append(str(exc))
            continue
        try:
            # the account tells: A has JetStream (with its limit), B does not
            reply = await nc.request("$JS.API.INFO", b"", timeout=5)
            body = json.loads(reply.data)
            outcomes.append(body["error"]["err_code"] if "error" in body else body["limits"]["max_streams"])
        finally:
            await nc.close()
    return outcomes


async def test_no_auth_user_as_nats_server(tmp_path: Path) -> None:
    expected, got = await on_both_with_jetstream(tmp_path, CONF, _outcomes)
    authorization_violation = "nats: 'Authorization Violation'"
    assert expected == [1, authorization_violation, authorization_violation, 10039, authorization_violation]
    assert got == expected
