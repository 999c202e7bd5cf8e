"""One account's view of the router, for the JetStream services of an account that is not home.

Every account with JetStream has its own services (API entry, meta group, streams, consumers), the same
code as the home account's. They subscribe and publish subjects as an account's client would see them
(`$JS.API.>`, a stream's `orders.>`, a client's `_INBOX.x`); this view puts them in the account's space
in the router (`_ACC_.<account>.`, gateway/accounts.py) on the way in and takes them out again on the way
to the services, so a service never sees the prefix and two accounts' services never hear each other.

The nodes' own subjects (`$JSR.`, internal inboxes) stay in the router's internal space, which no client
reaches: `$JSR.S.ORDERS.MSG_GET` of account B is `$JSR._ACC_.B.S.ORDERS.MSG_GET`, out of the home account's
subjects and out of every client's.

A subject of another account's space (a reply subject of a client of an account importing this one's
API, already `_ACC_.<other>.`) goes through as it is, so the answer reaches that client.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from gateway.accounts import ACCOUNT_PREFIX
from gateway.router import (
    InterestWatch,
    LostHandler,
    Message,
    MessageCallback,
    Router,
    SublistStats,
    Subscription,
    UnservedHandler,
)


class AccountRouter:
    """`Router`'s service-facing methods, inside account `account`'s space."""

    def __init__(
        self, router: Router, account: str, internal_prefixes: Collection[str], home: str | None = None
    ) -> None:
        self.router = router
        self.account = account
        self._prefix = f"{ACCOUNT_PREFIX}{account}."
        # The home account's subjects have no prefix in the router; a reply subject of that space (a home
        # client's request through an import of this account's API) is shown to the services under
        # `_ACC_.<home>.`, which the router never holds otherwise, so their answer finds its way back.
        self._home_prefix = f"{ACCOUNT_PREFIX}{home}." if home is not None else None
        # (internal prefix, its form in this account): `$JSR.` -> `$JSR._ACC_.B.`
        self._internal = tuple((prefix, f"{prefix}{self._prefix}") for prefix in internal_prefixes)

    # -- subjects in and out -------------------------------------------------------------------

    def to_router(self, subject: str) -> str:
        for plain, inside in self._internal:
            if subject.startswith(plain):
                return inside + subject[len(plain) :]
        if subject.startswith(ACCOUNT_PREFIX):
            home = self._home_prefix
            if home is not None and subject.startswith(home):
                return subject[len(home) :]
            return subject  # another account's (a reply across an import): as it is
        return self._prefix + subject

    def from_router(self, subject: str) -> str:
        for plain, inside in self._internal:
            if subject.startswith(inside):
                return plain + subject[len(inside) :]
        prefix = self._prefix
        if subject.startswith(prefix):
            return subject[len(prefix) :]
        # another account's, or a delivery shown as the stored message's subject (already this account's)
        return subject

    def reply_from_router(self, reply: str) -> str:
        """A reply subject as the services see it: a subject of the home account's space is neither
        this account's nor another's (`_ACC_.`), and is shown under the home account's prefix. (A
        message's subject is not mapped so: one that is none of these is a delivery shown as the stored
        message's subject, this account's own.)"""
        home = self._home_prefix
        if home is None or reply.startswith(ACCOUNT_PREFIX) or any(reply.startswith(i) for _, i in self._internal):
            return self.from_router(reply)
        return home + reply

    def _reply_to_router(self, reply: str | None) -> str | None:
        return self.to_router(reply) if reply else reply

    def _inward(self, callback: MessageCallback) -> MessageCallback:
        from_router, reply_from_router = self.from_router, self.reply_from_router

        def deliver(msg: Message) -> None:
            reply = msg.reply
            shown_reply = reply_from_router(reply) if reply else reply
            callback(Message(from_router(msg.subject), shown_reply, msg.headers, msg.payload))

        return deliver

    # -- the router's methods the services use ------------------------------------------------------

    def subscribe(
        self, subject: str, callback: MessageCallback, queue: str | None = None, *, max_msgs: int = 0
    ) -> Subscription:
        return self.router.subscribe(
            self.to_router(subject), self._inward(callback), queue, max_msgs=max_msgs
        )

    def unsubscribe(self, sub: Subscription) -> None:
        self.router.unsubscribe(sub)

    def publish(
        self,
        subject: str,
        payload: bytes = b"",
        reply: str | None = None,
        headers: bytes | None = None,
        *,
        no_responders: bool = False,
        deliver_as: str | None = None,
        reply_via: str | None = None,
        rerouted: bool = False,
    ) -> int:
        # `deliver_as` is what a client is shown (a stored message's subject): this account's client maps
        # a delivery it cannot place in its space to itself (AccountSpace.delivered_subject)
        return self.router.publish(
            self.to_router(subject),
            payload,
            self._reply_to_router(reply),
            headers,
            no_responders=no_responders,
            deliver_as=deliver_as,
            reply_via=reply_via,
            rerouted=rerouted,
        )

    def pass_on(
        self,
        subject: str,
        payload: bytes,
        reply: str | None,
        headers: bytes | None,
        *,
        no_responders: bool = False,
    ) -> int:
        return self.router.pass_on(
            self.to_router(subject),
            payload,
            self._reply_to_router(reply),
            headers,
            no_responders=no_responders,
        )

    def has_interest(self, subject: str) -> bool:
        return self.router.has_interest(self.to_router(subject))

    def watch_interest(self, subject: str, callback: Callable[[], None]) -> InterestWatch:
        return self.router.watch_interest(self.to_router(subject), callback)

    def unwatch_interest(self, watch: InterestWatch) -> None:
        self.router.unwatch_interest(watch)

    def on_unserved(self, prefix: str, handler: UnservedHandler) -> None:
        self.router.on_unserved(self.to_router(prefix), self._in_account(handler))

    def on_lost_in_transit(self, prefix: str, handler: LostHandler) -> None:
        self.router.on_lost_in_transit(self.to_router(prefix), self._in_account(handler))

    def _in_account(self, handler: UnservedHandler) -> UnservedHandler:
        """`handler`, given a router message as this account's services see it."""

        def handle(msg: Message, reply_via: str | None) -> None:
            reply = msg.reply
            inner = Message(
                self.from_router(msg.subject),
                self.reply_from_router(reply) if reply else reply,
                msg.headers,
                msg.payload,
            )
            handler(inner, reply_via)

        return handle

    def peer_labels(self, peer: str) -> tuple[str, ...] | None:
        return self.router.peer_labels(peer)

    def links_congested(self) -> bool:
        return self.router.links_congested()

    def when_links_drained(self, callback: Callable[[], None]) -> None:
        self.router.when_links_drained(callback)

    def sublist_stats(self) -> SublistStats:
        return self.router.sublist_stats()


# what a node's JetStream services publish and subscribe through: the router itself (the home account)
# or one account's view of it
ServiceRouter = Router | AccountRouter
