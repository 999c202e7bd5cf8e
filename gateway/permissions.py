"""What one user may publish and subscribe to, decided as nats-server decides it (server/client.go).

Publish: a subject is allowed when the allow list is absent or one of its filters matches, and no deny
filter matches. Subscribe: the same, with the subscription's subject (wildcards and all) matched token by
token against the filters, as nats-server's sublist matches it; a wildcard subscription that overlaps a
deny filter is allowed, and the messages the deny filter matches are not delivered on it. With
`allow_responses`, a client may publish to the reply subject of a request it was delivered, up to `max`
times within `ttl`, even where its publish permissions would not let it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from subjects.grammar import filters_overlap, has_wildcard, subject_matches

# nats-server's DEFAULT_ALLOW_RESPONSE_EXPIRATION: how long a reply stays allowed unless told otherwise
DEFAULT_RESPONSE_TTL_S = 120.0
# A connection remembers this many publish decisions (nats-server's pcache is as small).
DECISION_CACHE_SIZE = 128


@dataclass(frozen=True, slots=True)
class SubjectRule:
    """One direction's allow and deny filters; allow None means everything not denied."""

    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()

    def permits(self, subject: str) -> bool:
        if self.allow is not None and not any(subject_matches(f, subject) for f in self.allow):
            return False
        return not any(subject_matches(f, subject) for f in self.deny)

    def denies_delivery_on(self, subscription: str) -> bool:
        """Whether messages on a wildcard subscription must be filtered against the deny list."""
        return has_wildcard(subscription) and any(filters_overlap(f, subscription) for f in self.deny)


@dataclass(frozen=True, slots=True)
class ResponsePermission:
    """nats-server's `allow_responses`: `max` replies per request (0: any number), for `ttl` seconds (0: no
    limit). nats-server's defaults, for `allow_responses: true` or a 0 given: one reply, within 2 minutes."""

    max_msgs: int = 1
    ttl: float = DEFAULT_RESPONSE_TTL_S


@dataclass(frozen=True, slots=True)
class Permissions:
    publish: SubjectRule = field(default_factory=SubjectRule)
    subscribe: SubjectRule = field(default_factory=SubjectRule)
    responses: ResponsePermission | None = None


class ConnectionPermissions:
    """One connection's view of its user's permissions: decisions cached, reply subjects it may answer."""

    def __init__(self, permissions: Permissions) -> None:
        self.permissions = permissions
        self._now = time.monotonic
        self._publish_decisions: dict[str, bool] = {}
        # reply subject -> (when it was delivered, replies sent to it)
        self._replies: dict[str, tuple[float, int]] = {}

    def may_publish(self, subject: str) -> bool:
        allowed = self._publish_decisions.get(subject)
        if allowed is None:
            allowed = self.permissions.publish.permits(subject)
            if len(self._publish_decisions) >= DECISION_CACHE_SIZE:
                self._publish_decisions.clear()
            self._publish_decisions[subject] = allowed
        return allowed or self._response_allowed(subject)

    def may_subscribe(self, subject: str) -> bool:
        return self.permissions.subscribe.permits(subject)

    def filters_deliveries(self, subscription: str) -> bool:
        return self.permissions.subscribe.denies_delivery_on(subscription)

    def may_receive(self, subject: str) -> bool:
        """For a subscription that `filters_deliveries`: whether this message's subject is not denied."""
        return not any(subject_matches(f, subject) for f in self.permissions.subscribe.deny)

    def delivered_request(self, reply: str) -> None:
        """A message with reply subject `reply` went to this client: it may answer it, if responses are allowed."""
        if self.permissions.responses is None or self.permissions.publish.permits(reply):
            return
        self._replies[reply] = (self._now(), 0)
        if len(self._replies) > 10_000:
            self._prune()

    def _response_allowed(self, subject: str) -> bool:
        responses = self.permissions.responses
        entry = self._replies.get(subject)
        if responses is None or entry is None:
            return False
        delivered_at, sent = entry
        sent += 1
        if (responses.max_msgs > 0 and sent > responses.max_msgs) or (
            responses.ttl > 0 and self._now() - delivered_at > responses.ttl
        ):
            del self._replies[subject]
            return False
        self._replies[subject] = (delivered_at, sent)
        return True

    def _prune(self) -> None:
        responses = self.permissions.responses
        if responses is None or responses.ttl <= 0:
            # Without a time limit, the oldest half goes (dicts keep insertion order).
            for reply in list(self._replies)[: len(self._replies) // 2]:
                del self._replies[reply]
            return
        now = self._now()
        for reply, (delivered_at, _sent) in list(self._replies.items()):
            if now - delivered_at > responses.ttl:
                del self._replies[reply]
