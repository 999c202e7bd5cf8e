"""gateway/permissions.py: nats-server's publish, subscribe and response rules, without a socket."""

from __future__ import annotations

import pytest

from gateway.permissions import ConnectionPermissions, Permissions, ResponsePermission, SubjectRule


def test_allow_then_deny_with_wildcards() -> None:
    rule = SubjectRule(allow=("orders.>", "x.*"), deny=("orders.secret",))
    assert rule.permits("orders.a.b") and rule.permits("x.y")
    assert not rule.permits("orders.secret") and not rule.permits("x.y.z") and not rule.permits("other")
    assert SubjectRule().permits("anything") and not SubjectRule(allow=()).permits("anything")


def test_a_subscription_subject_matches_filters_token_by_token() -> None:
    # nats-server's sublist treats the subscription's wildcards as tokens: `*` allows `>` as well.
    rule = SubjectRule(allow=("orders.*",))
    assert rule.permits("orders.*") and rule.permits("orders.>")
    assert not rule.permits("orders.a.b")


def test_a_wildcard_subscription_overlapping_a_deny_filter_is_filtered_on_delivery() -> None:
    perms = ConnectionPermissions(Permissions(subscribe=SubjectRule(deny=("orders.secret",))))
    assert perms.may_subscribe("orders.*") and perms.filters_deliveries("orders.*")
    assert not perms.filters_deliveries("orders.open") and not perms.filters_deliveries("other.*")
    assert perms.may_receive("orders.open") and not perms.may_receive("orders.secret")


@pytest.mark.parametrize(("max_msgs", "answers"), [(1, 1), (3, 3), (-1, 10)])
def test_responses_are_allowed_up_to_max_per_request(max_msgs: int, answers: int) -> None:
    perms = ConnectionPermissions(
        Permissions(publish=SubjectRule(allow=()), responses=ResponsePermission(max_msgs=max_msgs))
    )
    assert not perms.may_publish("_INBOX.1")
    perms.delivered_request("_INBOX.1")
    allowed = [perms.may_publish("_INBOX.1") for _ in range(10)]
    assert allowed == [True] * answers + [False] * (10 - answers)
    assert not perms.may_publish("_INBOX.2")


def test_responses_expire_after_their_ttl(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    perms = ConnectionPermissions(
        Permissions(publish=SubjectRule(allow=()), responses=ResponsePermission(max_msgs=-1, ttl=5.0))
    )
    monkeypatch.setattr(perms, "_now", lambda: now[0])
    perms.delivered_request("r")
    now[0] = 104.0
    assert perms.may_publish("r")
    now[0] = 105.5
    assert not perms.may_publish("r")
