"""The NATS subject grammar, shared by every package that reads a subject.

A subject is dot-separated tokens; a filter may also use `*` (one token) and
`>` (one or more trailing tokens). Kept dependency-free so storage/ and
cluster/ can use it without pulling in the gateway's networking.
"""

from __future__ import annotations

import re
from functools import lru_cache

_FORBIDDEN = re.compile(r"[ \t\r\n]")


def _tokens_ok(subject: str, allow_wildcards: bool) -> bool:
    # Every check runs in C (a regex scan, list membership): this runs for each new reply subject,
    # and request/reply makes every one of them new.
    if not subject or _FORBIDDEN.search(subject) is not None:
        return False
    tokens = subject.split(".")
    if "" in tokens:
        return False
    if ">" in tokens and (not allow_wildcards or tokens.index(">") != len(tokens) - 1):
        return False
    return allow_wildcards or "*" not in tokens


@lru_cache(maxsize=65536)
def is_valid_subject(subject: str) -> bool:
    """A literal subject: what a message may be published or stored on."""
    return _tokens_ok(subject, allow_wildcards=False)


def is_message_subject(subject: str) -> bool:
    """What a message may carry and a stream may store: non-empty tokens without whitespace.

    nats-server (non-pedantic) delivers and stores a message published on `a.*`
    or `a.>.b` too: there a `*` or `>` token is a literal token, which only
    wildcard subscriptions match (a KV key written with the client's key check
    bypassed is one). `is_valid_subject` is the strict, literal-only form.
    """
    # Substring scans, all in C, and no cache: every reply inbox is a new subject (one per request),
    # which a cache only missed and churned (0.24 us here against 1.5 us for the cached regex and split)
    return (
        bool(subject)
        and subject[0] != "."
        and subject[-1] != "."
        and ".." not in subject
        and " " not in subject
        and "\t" not in subject
        and "\r" not in subject
        and "\n" not in subject
    )


@lru_cache(maxsize=65536)
def is_valid_filter(subject: str) -> bool:
    """A subject or a wildcard filter: what a subscription or a stream may name."""
    return _tokens_ok(subject, allow_wildcards=True)


def has_wildcard(subject: str) -> bool:
    return any(tok in ("*", ">") for tok in subject.split("."))


def subject_matches(filter_: str, subject: str) -> bool:
    """Whether literal `subject` is matched by `filter_` (which may hold wildcards)."""
    if filter_ == subject or filter_ == ">":
        return True
    return _matches_tokens(tuple(filter_.split(".")), tuple(subject.split(".")))


def _matches_tokens(ftoks: tuple[str, ...], stoks: tuple[str, ...]) -> bool:
    for i, ft in enumerate(ftoks):
        if ft == ">":
            return len(stoks) > i
        if i >= len(stoks):
            return False
        if ft != "*" and ft != stoks[i]:
            return False
    return len(ftoks) == len(stoks)


def filters_overlap(a: str, b: str) -> bool:
    """Whether some literal subject is matched by both filters."""
    if a == b:
        return True
    # Two different first tokens, neither a wildcard, decide most pairs at once: a stream create compares
    # its subjects with every other stream's (a fifth of a one-node create's CPU at 750 streams).
    a_head, b_head = a.partition(".")[0], b.partition(".")[0]
    if a_head != b_head and a_head != "*" and a_head != ">" and b_head != "*" and b_head != ">":
        return False
    if "*" not in a and ">" not in a and "*" not in b and ">" not in b:
        return False  # two different literal subjects
    at, bt = a.split("."), b.split(".")
    for i in range(max(len(at), len(bt))):
        x = at[i] if i < len(at) else None
        y = bt[i] if i < len(bt) else None
        if x == ">" or y == ">":
            return x is not None and y is not None
        if x is None or y is None:
            return False
        if x != y and x != "*" and y != "*":
            return False
    return True


def is_subset_filter(inner: str, outer: str) -> bool:
    """Whether every subject matched by `inner` is also matched by `outer`."""
    it, ot = inner.split("."), outer.split(".")
    for i, o in enumerate(ot):
        if o == ">":
            return len(it) > i
        if i >= len(it):
            return False
        x = it[i]
        if x == ">":
            return False
        if o != "*" and (x == "*" or x != o):
            return False
    return len(it) == len(ot)
