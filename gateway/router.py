"""Subject routing for one node: local clients, internal services and peer nodes.

Everything that listens registers in one `Sublist`: client subscriptions,
internal subscriptions (callbacks, for the JetStream layer) and the interest
peer nodes advertised. `publish` matches a subject once (cached), turns the
match into a delivery plan (memoised on the cached result), and delivers:
every plain local subscriber, one member per queue group chosen by the
queue policy cluster-wide, and one forward per peer node that has interest.

All of it is plain synchronous code on the event loop: an internal callback
is a function call, a client delivery appends to that client's output
buffer, a forward appends to the peer link's batch.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

import structlog

from gateway.headers import encode_headers
from gateway.output import OutputFlusher
from gateway.protocol import encode_token
from gateway.queue_policy import QueueGroup, QueuePolicy, make_policy
from gateway.sublist import Sublist, SublistResult
from subjects.grammar import (
    has_wildcard,
    is_message_subject,
    is_valid_filter,
    is_valid_subject,
    subject_matches,
)

log = structlog.get_logger(__name__)

NO_RESPONDERS_STATUS: Final = 503

# A reply route (see `pass_on`) only has to bridge the time a peer's interest takes to arrive,
# which a lagging link stretches: kept this long, and at most this many at once.
REPLY_ROUTE_TTL: Final = 30.0
REPLY_ROUTES_MAX: Final = 10_000


class InvalidSubjectError(ValueError):
    """A subject or filter that breaks the NATS subject grammar."""


class ClientSink(Protocol):
    """What the router needs from a client connection to deliver to it."""

    echo: bool
    no_responders: bool

    def deliver(
        self, sid: bytes, subject: bytes, reply: bytes | None, headers: bytes | None, payload: bytes
    ) -> None: ...

    def subscription_closed(self, sub: Subscription) -> None:
        """The router removed `sub` (UNSUB with a maximum reached, or unsubscribe)."""
        ...


class RemoteLinks(Protocol):
    """The route mesh, as the router sees it."""

    def forward(
        self,
        peer: str,
        subject: str,
        reply: str | None,
        headers: bytes | None,
        payload: bytes,
        queues: Sequence[str],
        deliver_as: str | None = None,
        reply_via: str | None = None,
        rerouted: bool = False,
    ) -> None: ...

    def rtt(self, peer: str) -> float | None: ...

    def peer_labels(self, peer: str) -> tuple[str, ...] | None: ...

    def congested(self) -> bool: ...

    def when_drained(self, callback: Callable[[], None]) -> None: ...


class Message:
    """A message as an internal subscription's callback receives it.

    `headers` is the raw header block (`NATS/1.0...\\r\\n\\r\\n`) or None;
    `gateway.headers.decode_headers` reads it.
    """

    __slots__ = ("headers", "payload", "reply", "subject")

    def __init__(self, subject: str, reply: str | None, headers: bytes | None, payload: bytes) -> None:
        self.subject = subject
        self.reply = reply
        self.headers = headers
        self.payload = payload

    def __repr__(self) -> str:
        return f"Message(subject={self.subject!r}, reply={self.reply!r}, headers={self.headers!r}, payload={self.payload!r})"


MessageCallback = Callable[[Message], None]
InterestListener = Callable[[str, str | None, int], None]
# a forwarded request nobody here serves, and the peer where its reply subject has interest
UnservedHandler = Callable[[Message, str | None], None]
# A request forwarded to a peer whose link went down before the peer confirmed it had it (subject,
# reply, headers, payload in the message; the peer where its reply subject has interest, if one was named)
LostHandler = Callable[[Message, str | None], None]
# A client's publish that reached nobody (subject, reply, headers, payload, the client): True if the
# handler took it (to publish again once a receiver appears, see `on_unmatched_publish`).
UnmatchedPublishHandler = Callable[[str, str | None, bytes | None, bytes, "ClientSink"], bool]


class InterestWatch:
    """A service's watch on who could receive one literal subject (`Router.watch_interest`)."""

    __slots__ = ("callback", "closed", "subject")

    def __init__(self, subject: str, callback: Callable[[], None]) -> None:
        self.subject = subject
        self.callback = callback
        self.closed = False

    def __repr__(self) -> str:
        return f"InterestWatch({self.subject!r})"


class Subscription:
    """A local subscriber: a client's (`client` and `sid` set) or an internal one (`callback` set)."""

    __slots__ = ("callback", "client", "closed", "delivered", "max_msgs", "queue", "sid", "subject")

    def __init__(
        self,
        subject: str,
        queue: str | None,
        *,
        client: ClientSink | None = None,
        sid: bytes = b"",
        callback: MessageCallback | None = None,
    ) -> None:
        self.subject = subject
        self.queue = queue
        self.client = client
        self.sid = sid
        self.callback = callback
        self.max_msgs = 0
        self.delivered = 0
        self.closed = False

    def __repr__(self) -> str:
        owner = f"sid={self.sid!r}" if self.client is not None else "internal"
        return f"Subscription({self.subject!r}, queue={self.queue!r}, {owner})"


class RemoteInterest:
    """A peer node's interest in a filter: `weight` subscribers (queue members) there."""

    __slots__ = ("peer", "queue", "subject", "weight")

    def __init__(self, peer: str, subject: str, queue: str | None, weight: int) -> None:
        self.peer = peer
        self.subject = subject
        self.queue = queue
        self.weight = weight

    def __repr__(self) -> str:
        return f"RemoteInterest({self.peer!r}, {self.subject!r}, queue={self.queue!r}, weight={self.weight})"


class _Plan:
    """A matched subject turned into who gets a message on it."""

    __slots__ = ("groups", "groups_by_name", "internal", "local", "peers")

    def __init__(
        self,
        local: tuple[Subscription, ...],
        peers: tuple[str, ...],
        groups: tuple[QueueGroup[Subscription], ...],
        internal: bool = False,
    ) -> None:
        self.local = local
        self.peers = peers
        self.internal = internal  # the subject is in the internal space: no client publishes into it
        self.groups = groups
        self.groups_by_name = {group.name: group for group in groups}


def _build_plan(result: SublistResult[Subscription | RemoteInterest], internal: str | None = None) -> _Plan:
    """`internal`: the subject is in the node's internal space under that prefix (see Router): only
    internal subscriptions, and peers' interest in filters under the same prefix, take it."""
    local: list[Subscription] = []
    peers: dict[str, None] = {}
    for entry in result.plain:
        if type(entry) is RemoteInterest:
            if internal is None or entry.subject.startswith(internal):
                peers[entry.peer] = None
        elif internal is None or entry.client is None:  # type: ignore[union-attr]
            local.append(entry)  # type: ignore[arg-type]
    groups = []
    for name, members in result.queues:
        local_members: list[Subscription] = []
        weights: dict[str, int] = {}
        for entry in members:
            if type(entry) is RemoteInterest:
                if internal is None or entry.subject.startswith(internal):
                    weights[entry.peer] = weights.get(entry.peer, 0) + entry.weight
            elif internal is None or entry.client is None:  # type: ignore[union-attr]
                local_members.append(entry)  # type: ignore[arg-type]
        if local_members or weights:
            groups.append(QueueGroup(name, local_members, sorted(weights.items())))
    return _Plan(tuple(local), tuple(peers), tuple(groups), internal is not None)


_NOBODY = _Plan((), (), ())


def _check_queue(queue: str | None) -> None:
    if queue is not None and (not queue or any(ch in queue for ch in " \t\r\n")):
        raise InvalidSubjectError(f"invalid queue group name {queue!r}")


@dataclass(frozen=True, slots=True)
class SublistStats:
    subscriptions: int
    cache_entries: int
    inserts: int
    removes: int
    matches: int
    cache_hits: int
    # of `subscriptions`, the entries each peer's interest takes (the rest are this node's own)
    peer_interest: Mapping[str, int]


class Router:
    def __init__(
        self,
        queue_policy: str | QueuePolicy = "random",
        *,
        rng: random.Random | None = None,
        local_queues: Collection[str] = (),
        group_policies: Mapping[str, str | QueuePolicy] | None = None,
        same_machine: Callable[[str], bool] | None = None,
        internal_prefixes: Collection[str] = (),
    ) -> None:
        # Subjects under these prefixes are the node's own (its services talking to each other across
        # the cluster, nats-server's system account): no client subscription receives them or counts as
        # interest in them, whatever its wildcards, no client subscription under them is advertised to
        # peers, and no client publishes into them (it would forge a leader's request).
        self.internal_prefixes = tuple(internal_prefixes)
        # which peers run on this machine (a several-worker node's other workers), for `local-first`
        self._same_machine = same_machine
        self._sublist: Sublist[Subscription | RemoteInterest] = Sublist()
        # Queue groups served by a local member whenever there is one, whatever the policy: a node's
        # own services that every node runs alike (nats-server answers the JetStream API on the
        # server the client is connected to), where a hop to a peer would only cost.
        self.local_queues = frozenset(local_queues)
        self._links: RemoteLinks | None = None
        # reply subject -> (peer that has its interest, expiry on the monotonic clock), oldest first
        self._reply_routes: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self.policy: QueuePolicy = self._make_policy(queue_policy, rng)
        # Queue groups (by name) that choose their member by another policy than `policy`.
        self.group_policies: dict[str, QueuePolicy] = {
            name: self._make_policy(policy, rng) for name, policy in (group_policies or {}).items()
        }
        self._interest: dict[tuple[str, str | None], int] = {}
        self._interest_listeners: list[InterestListener] = []
        # literal subject -> the watches on it (see watch_interest)
        self._watches: dict[str, list[InterestWatch]] = {}
        self._remote: dict[str, dict[tuple[str, str | None], RemoteInterest]] = {}
        # subject prefix -> who takes a forwarded request nobody here serves any more (see on_unserved)
        self._unserved: list[tuple[str, UnservedHandler]] = []
        # subject prefix -> who takes a request lost on a link that went down (see on_lost_in_transit)
        self._lost: list[tuple[str, LostHandler]] = []
        # the route mesh keeps the requests it forwards under these until the peer confirms them
        self.lost_prefixes: tuple[str, ...] = ()
        # who takes a client's publish that reached nobody, if anyone (see on_unmatched_publish)
        self._unmatched: UnmatchedPublishHandler | None = None
        # Client connections' buffered output; see gateway.output.
        self.output = OutputFlusher()

    def _make_policy(self, policy: str | QueuePolicy, rng: random.Random | None) -> QueuePolicy:
        return make_policy(policy, rng, self._rtt, self._same_machine) if isinstance(policy, str) else policy

    def policy_for(self, queue: str) -> QueuePolicy:
        """The policy that chooses a member of queue group `queue`."""
        return self.group_policies.get(queue, self.policy)

    # --- local subscriptions -------------------------------------------------------

    def subscribe(
        self,
        subject: str,
        callback: MessageCallback,
        queue: str | None = None,
        *,
        max_msgs: int = 0,
    ) -> Subscription:
        """An internal subscription: `callback(message)` runs synchronously for each message.

        The callback must not block; it may publish, subscribe and unsubscribe,
        and schedule its own async work. Interest reaches the peer nodes like a
        client's. Raises InvalidSubjectError for a bad filter or queue name.
        """
        sub = Subscription(subject, queue, callback=callback)
        sub.max_msgs = max_msgs
        self._add(sub)
        return sub

    def subscribe_client(
        self, client: ClientSink, sid: bytes, subject: str, queue: str | None
    ) -> Subscription:
        """A client connection's subscription; deliveries go to `client.deliver`."""
        sub = Subscription(subject, queue, client=client, sid=sid)
        self._add(sub)
        return sub

    def _add(self, sub: Subscription) -> None:
        if not is_valid_filter(sub.subject):
            raise InvalidSubjectError(f"invalid subject {sub.subject!r}")
        _check_queue(sub.queue)
        self._sublist.insert(sub.subject, sub)
        if self._advertised(sub):
            self._change_interest(sub.subject, sub.queue, +1)

    def unsubscribe(self, sub: Subscription) -> None:
        """Remove a subscription (idempotent)."""
        if sub.closed:
            return
        sub.closed = True
        if self._sublist.remove(sub.subject, sub) and self._advertised(sub):
            self._change_interest(sub.subject, sub.queue, -1)
        if sub.client is not None:
            sub.client.subscription_closed(sub)

    def auto_unsubscribe(self, sub: Subscription, max_msgs: int) -> None:
        """UNSUB with a maximum: stop after `max_msgs` deliveries in total (now, if already reached)."""
        sub.max_msgs = max_msgs
        if max_msgs <= 0 or sub.delivered >= max_msgs:
            self.unsubscribe(sub)

    # --- interest, as advertised to peers ----------------------------------------------

    def add_interest_listener(self, listener: InterestListener) -> None:
        """`listener(subject, queue, count)` runs whenever the number of local subscribers on a
        (filter, queue group) pair changes; count 0 means the interest is gone."""
        self._interest_listeners.append(listener)

    def local_interest(self) -> list[tuple[str, str | None, int]]:
        return [(subject, queue, count) for (subject, queue), count in self._interest.items()]

    def _change_interest(self, subject: str, queue: str | None, delta: int) -> None:
        key = (subject, queue)
        count = self._interest.get(key, 0) + delta
        if count > 0:
            self._interest[key] = count
        else:
            self._interest.pop(key, None)
            count = 0
        for listener in self._interest_listeners:
            listener(subject, queue, count)
        self._notify_watches(subject)

    # --- interest in one subject, as a service waiting for a receiver sees it ---------------

    def watch_interest(self, subject: str, callback: Callable[[], None]) -> InterestWatch:
        """`callback()` runs each time a subscription that would receive literal `subject` comes or
        goes: a local one (client or internal) or a peer's, as its interest arrives over the route
        mesh. That is every moment `has_interest(subject)` may change, so a service waiting for a
        receiver (a push consumer's deliver subject, a leader's API subject) is told at once
        instead of looking again and again. Runs synchronously, like a subscription callback: it
        must not block. Raises InvalidSubjectError for a subject that is not literal."""
        if not is_valid_subject(subject):
            raise InvalidSubjectError(f"invalid subject to watch {subject!r}")
        watch = InterestWatch(subject, callback)
        self._watches.setdefault(subject, []).append(watch)
        return watch

    def unwatch_interest(self, watch: InterestWatch) -> None:
        """End a watch (idempotent)."""
        if watch.closed:
            return
        watch.closed = True
        watches = self._watches.get(watch.subject)
        if watches is not None:
            with contextlib.suppress(ValueError):
                watches.remove(watch)
            if not watches:
                del self._watches[watch.subject]

    def _notify_watches(self, filter_: str) -> None:
        """Interest on `filter_` came or went: call the watches of every subject it matches."""
        if not self._watches:
            return
        if has_wildcard(filter_):
            hit = [w for subject, ws in self._watches.items() if subject_matches(filter_, subject) for w in ws]
        else:
            hit = list(self._watches.get(filter_, ()))
        for watch in hit:
            if watch.closed:
                continue
            try:
                watch.callback()
            except Exception:
                log.exception("interest watch callback failed", subject=watch.subject)

    # --- peers -----------------------------------------------------------------------

    def attach_links(self, links: RemoteLinks) -> None:
        self._links = links

    def links_congested(self) -> bool:
        """Whether messages to peers are piling up: client connections pause reading while so."""
        return self._links is not None and self._links.congested()

    def when_links_drained(self, callback: Callable[[], None]) -> None:
        if self._links is None:
            callback()
        else:
            self._links.when_drained(callback)

    def peer_labels(self, peer: str) -> tuple[str, ...] | None:
        """The labels `peer` announced, while this node's route to it is up (None: not reachable)."""
        return self._links.peer_labels(peer) if self._links is not None else None

    def _rtt(self, peer: str) -> float | None:
        return self._links.rtt(peer) if self._links is not None else None

    def set_remote_interest(self, peer: str, subject: str, queue: str | None, weight: int) -> None:
        """Record that `peer` has `weight` subscribers on (subject, queue); 0 removes the interest."""
        interests = self._remote.setdefault(peer, {})
        key = (subject, queue)
        current = interests.get(key)
        if current is not None:
            if weight > 0 and current.weight == weight:
                return
            self._sublist.remove(subject, current)
            del interests[key]
        if weight > 0:
            if not is_valid_filter(subject):
                raise InvalidSubjectError(f"invalid subject {subject!r} from peer {peer}")
            _check_queue(queue)
            interest = RemoteInterest(peer, subject, queue, weight)
            interests[key] = interest
            self._sublist.insert(subject, interest)
        elif current is None:
            return  # nothing was there, nothing changed
        self._notify_watches(subject)

    def clear_remote_interest(self, peer: str) -> None:
        """Forget everything `peer` advertised (its link went down or it restarted)."""
        for interest in self._remote.pop(peer, {}).values():
            self._sublist.remove(interest.subject, interest)
            self._notify_watches(interest.subject)

    def remote_interest(self, peer: str) -> list[tuple[str, str | None, int]]:
        return [(i.subject, i.queue, i.weight) for i in self._remote.get(peer, {}).values()]

    # --- what /subsz reports ----------------------------------------------------------------

    def sublist_stats(self) -> SublistStats:
        """Counts of the subscription index: local subscriptions and peers' interest alike."""
        sublist = self._sublist
        return SublistStats(
            subscriptions=len(sublist),
            cache_entries=sublist.cache_len,
            inserts=sublist.inserts,
            removes=sublist.removes,
            matches=sublist.matches,
            cache_hits=sublist.cache_hits,
            peer_interest={peer: len(interests) for peer, interests in self._remote.items() if interests},
        )

    # --- publishing ---------------------------------------------------------------------

    def _plan(self, subject: str) -> _Plan:
        result = self._sublist.cached(subject)
        if result is None:
            # Like nats-server (non-pedantic), a published `*` or `>` token is a literal token, even
            # before the last: nats-py's CONSUMER.CREATE.<stream>.<name>.<filter> subjects carry them.
            if not is_message_subject(subject):
                raise InvalidSubjectError(f"invalid publish subject {subject!r}")
            result = self._sublist.match(subject)
        plan = result.memo
        if plan is None:
            plan = result.memo = _build_plan(result, self._internal_prefix_of(subject))
        return plan

    def _internal_prefix_of(self, subject: str) -> str | None:
        for prefix in self.internal_prefixes:
            if subject.startswith(prefix):
                return prefix
        return None

    def _advertised(self, sub: Subscription) -> bool:
        """Whether `sub` counts as this node's interest for its peers: a client's subscription inside
        the internal space is kept (and never matched) but not advertised."""
        return sub.client is None or self._internal_prefix_of(sub.subject) is None

    def has_interest(self, subject: str) -> bool:
        """Whether a message on `subject` would reach anyone, here or on a peer (or by a reply route:
        the answer to a request passed on to this node finds its requester before its interest
        arrives, see `pass_on`)."""
        plan = self._plan(subject)
        if plan.local or plan.peers or plan.groups:
            return True
        route = self._reply_routes.get(subject) if self._reply_routes else None
        return route is not None and route[1] >= time.monotonic()

    def publish(
        self,
        subject: str,
        payload: bytes = b"",
        reply: str | None = None,
        headers: bytes | None = None,
        *,
        origin: ClientSink | None = None,
        no_responders: bool = False,
        deliver_as: str | None = None,
        reply_via: str | None = None,
        rerouted: bool = False,
        may_hold: bool = True,
    ) -> int:
        """Deliver a message everywhere it is wanted; returns how many local deliveries and peer forwards it made.

        `origin` is the publishing client (None for internal publishers): it
        decides echo, and gets the 503 no-responders status when it asked for
        it. An internal publisher gets that status on `reply` by passing
        `no_responders=True`. `rerouted`: the message was handed on once already (see
        `on_unserved`), and the peer it goes to must not hand it on again. Raises InvalidSubjectError for a malformed subject (an empty token,
        whitespace), after sending the client's no-responders status as nats-server does.
        A client's publish that reaches nobody goes to the `on_unmatched_publish` handler first, unless
        `may_hold` is False (the handler publishing what it held): if it takes the message, there is
        no no-responders status (yet).
        """
        try:
            plan = self._plan(subject)
        except InvalidSubjectError:
            if reply and origin is not None and origin.no_responders:
                self.no_responders_to_client(origin, subject, reply)
            raise
        if plan.internal and origin is not None:
            plan = _NOBODY
        targets: Sequence[Subscription] = plan.local
        forwards: dict[str, list[str]] | None = None
        if plan.peers:
            forwards = {peer: [] for peer in plan.peers}
        if plan.groups:
            targets = list(targets)
            for group in plan.groups:
                chosen = self._choose(group)
                if chosen is None:
                    continue
                if type(chosen) is str:
                    if forwards is None:
                        forwards = {}
                    forwards.setdefault(chosen, []).append(group.name)
                else:
                    targets.append(chosen)  # type: ignore[arg-type]
        shown = deliver_as or subject
        count = self._deliver(targets, shown, reply, headers, payload, origin) if targets else 0
        if forwards:
            links = self._links
            if links is not None:
                for peer, queues in forwards.items():
                    links.forward(
                        peer, subject, reply, headers, payload, queues, deliver_as, reply_via, rerouted
                    )
                    count += 1
        if count == 0 and self._reply_routes:
            count = self._forward_by_reply_route(subject, reply, headers, payload, deliver_as)
        if (
            count == 0
            and origin is not None
            and may_hold
            and self._unmatched is not None
            and self._unmatched(subject, reply, headers, payload, origin)
        ):
            return 0
        if count == 0 and reply:
            if origin is not None:
                if origin.no_responders:
                    self.no_responders_to_client(origin, subject, reply)
            elif no_responders:
                self._no_responders_to_internal(subject, reply)
        return count

    def deliver_routed(
        self,
        subject: str,
        reply: str | None,
        headers: bytes | None,
        payload: bytes,
        queues: Iterable[str],
        deliver_as: str | None = None,
        reply_via: str | None = None,
        *,
        from_peer: str | None = None,
        rerouted: bool = False,
    ) -> int:
        """A message a peer forwarded: every local plain subscriber, and one local member of each
        queue group in `queues` (the peer chose this node for them).

        A group with no member left here (it unsubscribed while the message was on its way: a
        replica of a stream just deleted, a client gone) is handed once to another node that has
        one, so the message still reaches a member, as a publish made now would; a message
        already handed on (`rerouted`) is never handed on again.

        `reply_via`: the peer where `reply` has interest (the sender passed a request on), for
        answers published before that peer's own interest arrives."""
        if reply_via is not None and reply:
            self._remember_reply_route(reply, reply_via)
        plan = self._plan(subject)
        # plan.local and one member of each queue group, made once there is a group to add
        chosen: list[Subscription] | None = None
        handed_on: dict[str, list[str]] | None = None
        for name in queues:
            group = plan.groups_by_name.get(name)
            if group is None:
                continue
            members = [sub for sub in group.local if not sub.closed]
            if members:
                if chosen is None:
                    chosen = list(plan.local)
                chosen.append(self.policy_for(name).choose_local(name, members))
            elif not rerouted:
                peer = self._other_member_node(group, from_peer)
                if peer is not None:
                    if handed_on is None:
                        handed_on = {}
                    handed_on.setdefault(peer, []).append(name)
        targets: Sequence[Subscription] = plan.local if chosen is None else chosen
        count = self._deliver(targets, deliver_as or subject, reply, headers, payload, None) if targets else 0
        if handed_on and self._links is not None:
            # the requester's reply interest is where the message came from, unless it said otherwise
            via = reply_via or from_peer
            for peer, names in handed_on.items():
                self._links.forward(peer, subject, reply, headers, payload, names, deliver_as, via, True)
                count += 1
        if count == 0 and reply and not rerouted and self._unserved:
            for prefix, handler in self._unserved:
                if subject.startswith(prefix):
                    handler(Message(subject, reply, headers, payload), reply_via or from_peer)
                    return 1
        return count

    def on_unmatched_publish(self, handler: UnmatchedPublishHandler | None) -> None:
        """A client's publish that reaches nobody (no local subscriber, no peer's interest, no reply
        route) goes to `handler` before its no-responders status: a handler that returns True has
        taken it, and publishes it again (`may_hold=False`) or answers the status itself later. The
        cluster's publish hold (cluster/runtime/publish_hold.py), an option of the node, takes those on
        a stream's subjects while the stream leader's interest is on its way. None: no handler, and the
        status goes at once (nats-server's behaviour)."""
        self._unmatched = handler

    def on_unserved(self, prefix: str, handler: UnservedHandler) -> None:
        """A request under `prefix` that a peer forwarded here, for a subscriber gone by the time it
        arrived (a leader that stepped down while its peer's view of the interest still named it),
        goes to `handler` with the peer where its reply subject has interest, instead of being lost:
        the requester would hear nothing until its timeout. The handler hands it on at most once
        (`publish(..., rerouted=True)`), so a request never circles between two stale views."""
        self._unserved.append((prefix, handler))

    def on_lost_in_transit(self, prefix: str, handler: LostHandler) -> None:
        """A request under `prefix` (with a reply subject) that this node forwarded to a peer whose
        link went down before the peer confirmed it had read it (`lost_in_transit`) goes to `handler`,
        with the peer named as where its reply subject has interest, if any: the peer died or was cut
        off with the request unread or unsent, and its requester would hear nothing until its timeout.
        The peer may still have read it, so a handler resends only what is safe to ask twice."""
        self._lost.append((prefix, handler))
        self.lost_prefixes = tuple(prefix for prefix, _ in self._lost)

    def lost_in_transit(self, messages: Iterable[tuple[str, str, bytes | None, bytes, str | None]]) -> None:
        """Requests (subject, reply, headers, payload, reply_via) the route mesh forwarded on a link
        that went down before the peer confirmed them: each to its prefix's `on_lost_in_transit` handler."""
        for subject, reply, headers, payload, reply_via in messages:
            for prefix, handler in self._lost:
                if subject.startswith(prefix):
                    handler(Message(subject, reply, headers, payload), reply_via)
                    break

    def _other_member_node(self, group: QueueGroup[Subscription], sender: str | None) -> str | None:
        """A node with members of `group`, chosen by the group's policy: another than `sender` if there is
        one (its view sent the message here), else the sender itself, whose member may well be there
        still (a stream scaled down: the replica that stays is often the requester's node's)."""
        members = [(peer, weight) for peer, weight in group.remote if weight > 0]
        others = [(peer, weight) for peer, weight in members if peer != sender] or members
        if not others:
            return None
        chosen = self.policy_for(group.name).choose(QueueGroup(group.name, (), others))
        return chosen if isinstance(chosen, str) else None

    def pass_on(
        self,
        subject: str,
        payload: bytes,
        reply: str | None,
        headers: bytes | None,
        *,
        no_responders: bool = False,
    ) -> int:
        """Publish a request this node received and hands on to whoever serves it (the meta leader
        to a stream leader): a third node will answer the requester. The requester's node sent its
        reply interest to that node over their own link, which may lag behind the two hops the
        request took; so the request names the peer where the reply subject has interest, and the
        responder sends replies there until that interest arrives. `no_responders` as for `publish`."""
        return self.publish(
            subject, payload, reply, headers, no_responders=no_responders, reply_via=self._reply_peer(reply)
        )

    def _reply_peer(self, reply: str | None) -> str | None:
        if not reply:
            return None
        plan = self._plan(reply)
        # a local requester's interest reaches the responder over the same link as the request
        return None if plan.local or not plan.peers else plan.peers[0]

    def _remember_reply_route(self, reply: str, peer: str) -> None:
        routes = self._reply_routes
        now = time.monotonic()
        routes[reply] = (peer, now + REPLY_ROUTE_TTL)
        routes.move_to_end(reply)
        while routes and (len(routes) > REPLY_ROUTES_MAX or next(iter(routes.values()))[1] < now):
            routes.popitem(last=False)

    def _forward_by_reply_route(
        self, subject: str, reply: str | None, headers: bytes | None, payload: bytes, deliver_as: str | None
    ) -> int:
        """Nobody here or on a peer wants `subject`, but a request named where its answer goes."""
        route = self._reply_routes.get(subject)
        if route is None or self._links is None:
            return 0
        peer, expires = route
        if expires < time.monotonic():
            del self._reply_routes[subject]
            return 0
        self._links.forward(peer, subject, reply, headers, payload, (), deliver_as)
        return 1

    def _deliver(
        self,
        targets: Sequence[Subscription],
        subject: str,
        reply: str | None,
        headers: bytes | None,
        payload: bytes,
        origin: ClientSink | None,
    ) -> int:
        count = 0
        subject_b: bytes | None = None
        reply_b: bytes | None = None
        message: Message | None = None
        for sub in targets:
            if sub.closed:
                continue
            client = sub.client
            if client is None:
                if message is None:
                    message = Message(subject, reply, headers, payload)
                self._call(sub, message)
            else:
                if client is origin and not client.echo:
                    continue
                if subject_b is None:
                    subject_b = encode_token(subject)
                    reply_b = encode_token(reply) if reply else None
                client.deliver(sub.sid, subject_b, reply_b, headers, payload)
            count += 1
            sub.delivered += 1
            if sub.max_msgs and sub.delivered >= sub.max_msgs:
                self.unsubscribe(sub)
        return count

    def _choose(self, group: QueueGroup[Subscription]) -> Subscription | str | None:
        if group.local and group.name in self.local_queues:
            for sub in group.local:
                if not sub.closed:
                    return sub
        chosen = self.policy_for(group.name).choose(group)
        if chosen is None or type(chosen) is str or not chosen.closed:  # type: ignore[union-attr]
            return chosen
        # The chosen member unsubscribed while this plan was in use (e.g. from a callback
        # earlier in the same publish): fall back to any live member.
        for sub in group.local:
            if not sub.closed:
                return sub
        return group.remote[0][0] if group.remote else None

    def _call(self, sub: Subscription, message: Message) -> None:
        try:
            sub.callback(message)  # type: ignore[misc]
        except Exception:
            log.exception("internal subscription callback failed", subject=sub.subject, queue=sub.queue)

    def no_responders_to_client(self, origin: ClientSink, subject: str, reply: str) -> None:
        """The 503 status a client that asked for it gets for a request on `subject` nobody received."""
        try:
            result = self._plan(reply)
        except InvalidSubjectError:
            return
        status = encode_headers([("Nats-Subject", subject)], status=NO_RESPONDERS_STATUS)
        reply_b = encode_token(reply)
        for sub in result.local:
            if sub.client is origin and not sub.closed:
                origin.deliver(sub.sid, reply_b, None, status, b"")
                sub.delivered += 1
                if sub.max_msgs and sub.delivered >= sub.max_msgs:
                    self.unsubscribe(sub)
                return

    def _no_responders_to_internal(self, subject: str, reply: str) -> None:
        """The 503 for an internal publisher's request, to wherever `reply` is wanted: here, or the
        node of a requester whose request this node passed on (a prefix mapper's)."""
        status = encode_headers([("Nats-Subject", subject)], status=NO_RESPONDERS_STATUS)
        with contextlib.suppress(InvalidSubjectError):
            self.publish(reply, b"", None, status)
