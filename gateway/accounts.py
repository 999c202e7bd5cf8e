"""Accounts: isolated subject spaces on one router, joined only where one exports and another imports.

The router keeps one subject space. An account's subjects live in it under a prefix of its own
(`_ACC_.<account>.`), except the home account's, which live there as they are. Every account with
JetStream enabled has its own JetStream (nats-server's accounts with `jetstream`, or the global account
when none has it); the home account is one of them (the global account if it is, else the first by
name), whose services subscribe without a prefix as when jetraft served one account; the others' see
their own space through cluster/runtime/account_router.py. A connection maps what its client publishes
and subscribes into its account's space, and what it delivers back out, so clients see only their own
account's subjects; the route mesh need not know.

Imports join the spaces (ADR-19's JetStream across accounts rests on them):

- a service import maps a local subject (`to`, by default the exported subject) to the exporter's: a
  request published on it reaches the exporter's subscribers, its reply subject left in the importer's
  space, so the response comes back to the requester;
- a stream import makes the importer's subscriptions on its subjects also receive what is published on
  them in the exporter's space;
- a message that crosses into an account carries a reply subject of another space (a JetStream ack
  subject, say): the client sees it as its publisher gave it; an answer goes back to that space only for
  a request to a service the account exports (once), else it stays in the client's own space.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from subjects.grammar import filters_overlap, is_subset_filter, subject_matches

ACCOUNT_PREFIX = "_ACC_."
GLOBAL_ACCOUNT = "$G"
SYSTEM_ACCOUNT = "$SYS"
# Reply subjects of other spaces a connection remembers it may answer (the oldest go first).
MAX_FOREIGN_REPLIES = 10_000


class AccountConfigError(ValueError):
    """Exports and imports that do not fit together."""


@dataclass(frozen=True, slots=True)
class Export:
    subject: str
    service: bool  # a service (requests in) or a stream (messages out)
    accounts: tuple[str, ...] | None = None  # who may import it; None: anyone


@dataclass(frozen=True, slots=True)
class Import:
    account: str  # the exporter
    subject: str  # in the exporter's space
    local: str  # in the importer's space (`to`), with the same wildcards
    service: bool


@dataclass(frozen=True, slots=True)
class Account:
    name: str
    exports: tuple[Export, ...] = ()
    imports: tuple[Import, ...] = ()
    jetstream: bool = False


def map_wildcards(source_pattern: str, target_pattern: str, subject: str) -> str:
    """`subject` (matched by `source_pattern`) with its wildcard tokens put into `target_pattern`'s places."""
    source, target, tokens = source_pattern.split("."), target_pattern.split("."), subject.split(".")
    captured: list[str] = []
    for index, token in enumerate(source):
        if token == "*":
            captured.append(tokens[index])
        elif token == ">":
            captured.append(".".join(tokens[index:]))
    out: list[str] = []
    wildcards = iter(captured)
    for token in target:
        out.append(next(wildcards) if token in ("*", ">") else token)
    return ".".join(out)


def _in_own_space(subject: str) -> str:
    """A router subject as its own account sees it (the home account's are as they are)."""
    if subject.startswith(ACCOUNT_PREFIX):
        return subject.split(".", 2)[2]
    return subject


def _literal_tokens(pattern: str) -> int:
    return sum(1 for token in pattern.split(".") if token not in ("*", ">"))


def _wildcards(pattern: str) -> list[str]:
    return [token for token in pattern.split(".") if token in ("*", ">")]


class AccountSpace:
    """One account's view of the router's subject space."""

    def __init__(self, account: Account, prefix: str, spaces: dict[str, str]) -> None:
        self.account = account
        self.prefix = prefix
        # each import with the router-space prefix of its exporter
        # The most specific first: with `fromA.>` and `fromA.$KV.>` both imported, `fromA.$KV.x` is the KV's.
        self._service_imports = sorted(
            ((imp, spaces[imp.account]) for imp in account.imports if imp.service),
            key=lambda entry: -_literal_tokens(entry[0].local),
        )
        self._stream_imports = [(imp, spaces[imp.account]) for imp in account.imports if not imp.service]
        self._foreign_replies: OrderedDict[str, None] = OrderedDict()
        self._service_exports = [export.subject for export in account.exports if export.service]

    def publish_subject(self, subject: str) -> str | None:
        """Where a client's publish goes in the router's space; None for the home account's client naming
        another account's space directly (reserved: `_ACC_.`)."""
        if subject in self._foreign_replies:
            del self._foreign_replies[subject]  # one response per request
            return subject
        for imp, exporter_prefix in self._service_imports:
            if subject_matches(imp.local, subject):
                return exporter_prefix + map_wildcards(imp.local, imp.subject, subject)
        if not self.prefix and subject.startswith(ACCOUNT_PREFIX):
            return None
        return self.prefix + subject

    def reply_subject(self, reply: str) -> str | None:
        if not self.prefix and reply.startswith(ACCOUNT_PREFIX):
            return None
        return self.prefix + reply

    def subscription_subjects(self, subject: str) -> tuple[list[str], bool]:
        """The router subjects a client subscription on `subject` needs (its own space's, and each stream
        import's that it overlaps), and whether an import's is wider than `subject`: then what comes
        through imports must be checked against `subject` on delivery."""
        subjects = [self.prefix + subject]
        wider = False
        for imp, exporter_prefix in self._stream_imports:
            if is_subset_filter(subject, imp.local):
                subjects.append(exporter_prefix + map_wildcards(imp.local, imp.subject, subject))
            elif filters_overlap(subject, imp.local):
                subjects.append(exporter_prefix + imp.subject)
                wider = True
        return subjects, wider

    def delivered_subject(self, subject: str) -> tuple[str | None, bool]:
        """The subject a client sees for a router subject delivered to it (None if it is another
        account's), and whether it came in through a stream import."""
        prefix = self.prefix
        if prefix and subject.startswith(prefix):
            return subject[len(prefix) :], False
        for imp, exporter_prefix in self._stream_imports:
            if not subject.startswith(exporter_prefix):
                continue
            inner = subject[len(exporter_prefix) :]
            if exporter_prefix == "" and inner.startswith(ACCOUNT_PREFIX):
                continue  # the home space holds no other account's subjects
            if subject_matches(imp.subject, inner):
                return map_wildcards(imp.subject, imp.local, inner), True
        if not prefix and subject.startswith(ACCOUNT_PREFIX):
            return None, False  # another account's traffic, matched by a wildcard of the home account's client
        # What the router matched to this account's subscription is this account's, whatever subject it
        # shows: a consumer's delivery to a pull request's inbox shows the stored message's subject.
        return subject, False

    def delivered_reply(self, reply: str, subject: str) -> str:
        """The reply subject a client sees for a message shown on `subject`. A reply in another account's
        space is answerable only on a request for a service this account exports (one response, as
        nats-server's default `singleton` responses); any other, such as a JetStream ack subject of
        a message delivered across accounts, is shown as it is and leads nowhere, as in nats-server."""
        prefix = self.prefix
        if prefix and reply.startswith(prefix):
            return reply[len(prefix) :]
        if not prefix and not reply.startswith(ACCOUNT_PREFIX):
            return reply
        if not any(subject_matches(export, subject) for export in self._service_exports):
            # as the publisher gave it, in its own account's space (a JetStream ack subject of an account
            # whose subjects are prefixed here reads `$JS.ACK...`, as on nats-server)
            return _in_own_space(reply)
        self._foreign_replies[reply] = None
        self._foreign_replies.move_to_end(reply)
        if len(self._foreign_replies) > MAX_FOREIGN_REPLIES:
            self._foreign_replies.popitem(last=False)
        return reply


@dataclass
class Accounts:
    """Every account of the configuration, with the home account chosen and imports checked."""

    accounts: dict[str, Account] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.accounts.setdefault(GLOBAL_ACCOUNT, Account(GLOBAL_ACCOUNT))
        with_jetstream = sorted(a.name for a in self.accounts.values() if a.jetstream)
        # Every account that enables JetStream has its own; as in nats-server, the global account has it
        # when no other account is configured (the system account aside), and none has it when accounts
        # are configured and none enables it. One of them is home: its subjects and its streams' internal
        # names are un-prefixed, as they were when jetraft served one account, so a node keeps reading the
        # data it wrote then. The global account is home when it has JetStream (or when none has), else
        # the first JetStream account by name.
        configured = set(self.accounts) - {GLOBAL_ACCOUNT, SYSTEM_ACCOUNT}
        self.jetstream_accounts: tuple[str, ...] = tuple(with_jetstream) or (
            () if configured else (GLOBAL_ACCOUNT,)
        )
        self.home = (
            self.jetstream_accounts[0]
            if self.jetstream_accounts and GLOBAL_ACCOUNT not in self.jetstream_accounts
            else GLOBAL_ACCOUNT
        )
        self.prefixes = {
            name: "" if name == self.home else f"{ACCOUNT_PREFIX}{name}." for name in self.accounts
        }
        for account in self.accounts.values():
            for imp in account.imports:
                self._check_import(account.name, imp)

    def _check_import(self, importer: str, imp: Import) -> None:
        kind = "service" if imp.service else "stream"
        exporter = self.accounts.get(imp.account)
        if exporter is None:
            raise AccountConfigError(f"account {importer}: {kind} import from unknown account {imp.account!r}")
        if _wildcards(imp.subject) != _wildcards(imp.local):
            raise AccountConfigError(
                f"account {importer}: {kind} import {imp.subject!r} to {imp.local!r}: both must have the same wildcards"
            )
        for export in exporter.exports:
            if export.service == imp.service and is_subset_filter(imp.subject, export.subject):
                if export.accounts is not None and importer not in export.accounts:
                    raise AccountConfigError(
                        f"account {importer}: account {imp.account} exports {export.subject!r} only to "
                        f"{', '.join(export.accounts)}"
                    )
                return
        raise AccountConfigError(
            f"account {importer}: account {imp.account} exports no {kind} that covers {imp.subject!r}"
        )

    def space(self, name: str) -> AccountSpace | None:
        """A new connection's view of account `name`; None when there is only one account (nothing to map)."""
        if len(self.accounts) == 1:
            return None
        return AccountSpace(self.accounts[name], self.prefixes[name], self.prefixes)
