"""ADR-19 API prefixes: requests sent under another prefix reach the JetStream API and the KV subjects.

A client that sets a JetStream domain (`nc.jetstream(domain="hub")`) sends its
API requests to `$JS.hub.API.<...>` and its KV operations to
`$JS.hub.API.$KV.<bucket>.<key>`; a client that uses an imported prefix (say
`JS.acc1`) sends to `JS.acc1.<...>` and `JS.acc1.$KV...`. nats-server strips the
prefix where the import or the leaf connection is crossed. A jetraft node
configured with a domain (`jetstream { domain }`, or `--domain`) does the same: one node (queue
group `_jsprefix`, so a request is mapped exactly once) takes each such
message and republishes it, reply subject and headers untouched, with the
prefix replaced: `$KV.`/`$OBJ.` tails keep their own first token, every other
tail goes under `$JS.API.`.
"""

from __future__ import annotations

from collections.abc import Iterable

from cluster.runtime.context import NodeContext
from gateway.router import Message, Subscription

PREFIX_QUEUE = "_jsprefix"
_VIEW_TOKENS = ("$KV.", "$OBJ.")


def domain_prefix(domain: str) -> str:
    return f"$JS.{domain}.API"


def map_subject(prefix: str, subject: str) -> str | None:
    """The local subject for `subject` sent under `prefix`, or None when it is not under it."""
    if not subject.startswith(prefix + "."):
        return None
    tail = subject[len(prefix) + 1 :]
    if not tail:
        return None
    if tail.startswith(_VIEW_TOKENS):
        return tail
    return "$JS.API." + tail


class PrefixMapper:
    def __init__(self, ctx: NodeContext, prefixes: Iterable[str]) -> None:
        self._ctx = ctx
        self._prefixes = tuple(dict.fromkeys(p.rstrip(".") for p in prefixes if p))
        self._subs: list[Subscription] = []

    def open(self) -> None:
        router = self._ctx.router
        for prefix in self._prefixes:
            self._subs.append(
                router.subscribe(prefix + ".>", lambda msg, p=prefix: self._forward(p, msg), PREFIX_QUEUE)
            )

    def close(self) -> None:
        for sub in self._subs:
            self._ctx.router.unsubscribe(sub)
        self._subs = []

    def _forward(self, prefix: str, msg: Message) -> None:
        local = map_subject(prefix, msg.subject)
        if local is not None:
            # the requester may be on a third node (this one took the request from a peer): its reply
            # interest may reach the responder after the request does, so name where it lives
            self._ctx.router.pass_on(local, msg.payload, msg.reply, msg.headers, no_responders=bool(msg.reply))
