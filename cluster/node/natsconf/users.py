"""nats-server's `users` list and permissions blocks (server/opts.go: parseUsers, parseUserPermissions)."""

from __future__ import annotations

import re
from typing import Any

from cluster.node.natsconf.parser import ConfMap, Place
from gateway.accounts import GLOBAL_ACCOUNT
from gateway.auth import NkeyUser, User
from gateway.nkey import InvalidNkey
from gateway.permissions import DEFAULT_RESPONSE_TTL_S, Permissions, ResponsePermission, SubjectRule
from subjects.grammar import is_valid_filter


class ConfPermissionError(ValueError):
    """A users list or permissions block jetraft cannot take; the message names the key and its place."""


def _fail(path: str, place: Place, why: str) -> ConfPermissionError:
    return ConfPermissionError(f"{place}: {path}: {why}")


_GO_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def go_duration(text: str) -> float | None:
    """Seconds in a Go duration string such as `50ms` or `1m30s` (what nats-server's `ttl` takes)."""
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    if body == "0":
        return 0.0
    position, total = 0, 0.0
    while position < len(body):
        match = _GO_DURATION_PART.match(body, position)
        if match is None:
            return None
        total += float(match.group(1)) * _GO_UNITS[match.group(2)]
        position = match.end()
    return sign * total if body else None


def _subjects(path: str, value: Any, place: Place) -> tuple[str, ...]:
    items = value if isinstance(value, list) else [value]
    subjects = []
    for item in items:
        if not isinstance(item, str):
            raise _fail(path, place, f"expected a subject or a list of subjects, got {item!r}")
        if " " in item.strip():
            raise _fail(path, place, f"{item!r}: queue permissions are not supported by jetraft yet")
        if not is_valid_filter(item):
            raise _fail(path, place, f"subject {item!r} is not a valid subject")
        subjects.append(item)
    return tuple(subjects)


def _subject_rule(path: str, value: Any, place: Place) -> SubjectRule:
    if not isinstance(value, ConfMap):
        return SubjectRule(allow=_subjects(path, value, place))
    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()
    for key, sub_value in value.values.items():
        if key in value.used_as_variable:
            continue
        sub_place = value.places[key]
        if key.lower() == "allow":
            allow = _subjects(f"{path}.allow", sub_value, sub_place)
        elif key.lower() == "deny":
            deny = _subjects(f"{path}.deny", sub_value, sub_place)
        else:
            raise _fail(f"{path}.{key}", sub_place, "unknown setting: only allow and deny are permitted")
    return SubjectRule(allow=allow, deny=deny)


def _responses(path: str, value: Any, place: Place) -> ResponsePermission | None:
    if value is True:
        return ResponsePermission()
    if value is False:
        return None
    if not isinstance(value, ConfMap):
        raise _fail(path, place, "expected true, false or a block { max, ttl }")
    max_msgs, ttl = 1, DEFAULT_RESPONSE_TTL_S
    for key, sub_value in value.values.items():
        if key in value.used_as_variable:
            continue
        sub_place = value.places[key]
        if key.lower() in ("max", "max_msgs", "max_messages", "max_responses"):
            if isinstance(sub_value, bool) or not isinstance(sub_value, int):
                raise _fail(f"{path}.{key}", sub_place, f"expected an integer, got {sub_value!r}")
            max_msgs = sub_value or 1  # 0 means the default, as in nats-server; below 0 means no limit
        elif key.lower() in ("expires", "expiration", "ttl"):
            seconds = go_duration(sub_value) if isinstance(sub_value, str) else None
            if seconds is None:
                raise _fail(f"{path}.{key}", sub_place, f"expected a duration such as 50ms or 1m, got {sub_value!r}")
            # 0 means the default, as in nats-server's validateResponsePermissions; below 0 means no limit
            ttl = DEFAULT_RESPONSE_TTL_S if seconds == 0 else max(seconds, 0.0)
        else:
            raise _fail(f"{path}.{key}", sub_place, "unknown setting")
    return ResponsePermission(max_msgs=max_msgs, ttl=ttl)


def parse_permissions(path: str, value: Any, place: Place) -> Permissions:
    if not isinstance(value, ConfMap):
        raise _fail(path, place, f"expected a permissions block {{ publish, subscribe }}, got {value!r}")
    publish, subscribe, responses = SubjectRule(), SubjectRule(), None
    for key, sub_value in value.values.items():
        if key in value.used_as_variable:
            continue
        sub_place = value.places[key]
        lowered = key.lower()
        if lowered in ("pub", "publish"):
            publish = _subject_rule(f"{path}.{key}", sub_value, sub_place)
        elif lowered in ("sub", "subscribe"):
            subscribe = _subject_rule(f"{path}.{key}", sub_value, sub_place)
        elif lowered in ("allow_responses", "publish_allow_responses"):
            responses = _responses(f"{path}.{key}", sub_value, sub_place)
        else:
            raise _fail(f"{path}.{key}", sub_place, "unknown setting")
    if responses is not None and publish.allow is None:
        # As nats-server: allowing responses turns off the blanket publish allow.
        publish = SubjectRule(allow=(), deny=publish.deny)
    return Permissions(publish=publish, subscribe=subscribe, responses=responses)


def parse_users(
    value: Any,
    place: Place,
    default_permissions: Permissions | None,
    *,
    account: str = GLOBAL_ACCOUNT,
    path: str = "authorization.users",
) -> list[User | NkeyUser]:
    if not isinstance(value, list):
        raise _fail(path, place, f"expected a list of users, got {value!r}")
    list_path = path
    users: list[User | NkeyUser] = []
    for index, entry in enumerate(value):
        path = f"{list_path}[{index}]"
        if not isinstance(entry, ConfMap):
            raise _fail(path, place, f"expected a user block {{ user, password }}, got {entry!r}")
        name = password = nkey = None
        permissions = default_permissions
        for key, sub_value in entry.values.items():
            if key in entry.used_as_variable:
                continue
            sub_place = entry.places[key]
            lowered = key.lower()
            if lowered in ("user", "username", "pass", "password"):
                if not isinstance(sub_value, str) or not sub_value:
                    raise _fail(f"{path}.{key}", sub_place, "expected a non-empty string")
                if lowered.startswith("user"):
                    name = sub_value
                else:
                    password = sub_value
            elif lowered in ("permission", "permissions", "authorization"):
                permissions = parse_permissions(f"{path}.{key}", sub_value, sub_place)
            elif lowered == "nkey":
                if not isinstance(sub_value, str):
                    raise _fail(f"{path}.{key}", sub_place, "expected an nkey user public key (U...)")
                nkey = sub_value
            elif lowered in ("account", "allowed_connection_types", "connection_types", "clients",
                             "proxy_required"):  # fmt: skip
                raise _fail(f"{path}.{key}", sub_place, "nats-server's setting is not supported by jetraft yet")
            else:
                raise _fail(f"{path}.{key}", sub_place, "unknown setting")
        if nkey is not None:
            if name is not None or password is not None:
                raise _fail(path, place, "an nkey user has no user name or password")
            try:
                users.append(NkeyUser(nkey, permissions, account))
            except InvalidNkey as exc:
                raise _fail(f"{path}.nkey", place, str(exc)) from exc
            continue
        if name is None:
            raise _fail(path, place, "a user needs a user name (and a password), or an nkey")
        # Without a password, as in nats-server, the user is only ever the no_auth_user.
        users.append(User(name, password or "", permissions, account))
    return users
