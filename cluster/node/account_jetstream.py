"""The JetStream of one account that is not the home account: its own meta group, API entry and streams.

nats-server gives every account with JetStream enabled a JetStream of its own: its own stream names,
its API on `$JS.API.>` in its own subject space, its own limits and ACCOUNT INFO. A node runs, for each
such account, the same services as for the home account (gateway/accounts.py), on a context whose router
is the account's view of the node's router (cluster/runtime/account_router.py) and whose Raft groups and stores
are named with the account's tag (`<account>/`), so nothing of two accounts' streams of one name meets.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from cluster.api.entry import ApiEntry
from cluster.api.prefixes import PrefixMapper
from cluster.meta.service import MetaService
from cluster.runtime.account_limits import JetStreamAccountLimits
from cluster.runtime.account_router import AccountRouter
from cluster.runtime.account_usage import AccountUsage, ApiCounts
from cluster.runtime.context import INTERNAL_SUBJECT_PREFIXES, NodeContext
from cluster.runtime.internal_requests import InternalRequester
from cluster.runtime.meta_progress import MetaProgress
from gateway.router import Router
from raft.types import NodeId, Role


def account_tag(account: str) -> str:
    """What the names of the account's Raft groups and stores begin with."""
    return f"{account}/"


def api_entry_for(ctx: NodeContext, meta: MetaService) -> ApiEntry:
    """An account's JetStream API entry. Whether a stream or consumer exists comes from the replicated
    assignments: a member without a replica of the stream (an R1 stream elsewhere, or another worker of a
    replica's node) still sends the request straight to its leader, not by way of the meta leader."""
    return ApiEntry(
        ctx,
        knows_stream=lambda stream: stream in meta.machine.streams,
        knows_consumer=meta.knows_consumer,
    )


class AccountJetStream:
    """One account's JetStream services on this node."""

    def __init__(
        self,
        home: NodeContext,
        router: Router,
        account: str,
        limits: JetStreamAccountLimits,
        home_account: str,
        domain_prefixes: Iterable[str] = (),
    ) -> None:
        view = AccountRouter(router, account, INTERNAL_SUBJECT_PREFIXES, home_account)
        # the node's Raft host, metrics and stores, with this account's router, limits and counters
        self.ctx = replace(
            home,
            router=view,
            requester=InternalRequester(view, home.name),
            account_limits=limits,
            account_usage=AccountUsage(),
            api_counts=ApiCounts(),
            meta_progress=MetaProgress(),
            account=account,
            account_tag=account_tag(account),
            _tasks=set(),
        )
        self.account = account
        self.meta = MetaService(self.ctx)
        self.api = api_entry_for(self.ctx, self.meta)
        # `$JS.<domain>.API`, in this account's space as nats-server answers it in every account
        self.prefixes = PrefixMapper(self.ctx, domain_prefixes)

    @property
    def tag(self) -> str:
        return self.ctx.account_tag

    def start(self) -> None:
        self.meta.start()
        self.api.open()
        self.prefixes.open()

    def leader_changed(self, group: str, leader: NodeId | None, role: Role, term: int) -> None:
        """A Raft group of this account (its name begins with the account's tag) has a new leader."""
        self.meta.group_leader_changed(group, leader, role, term)

    async def stop(self) -> None:
        self.api.close()
        self.prefixes.close()
        await self.meta.stop()
        await self.ctx.cancel_tasks()
        self.ctx.requester.close()


# the file in a node's data directory naming the account whose JetStream data has no tag
HOME_ACCOUNT_FILE = "jetstream-home-account"


class HomeAccountChangedError(Exception):
    """The data directory holds another account's un-tagged JetStream data than the config's home account."""


def claim_home_account(node_data_dir: Path, home: str) -> None:
    """Record which account the node's un-tagged JetStream data (meta group `_meta_`, its streams) is,
    and refuse to start when the configuration now makes another account home: that account would take
    over the first one's streams. A directory written before this file existed is the home account's, as
    jetraft then served one account."""
    path = node_data_dir / HOME_ACCOUNT_FILE
    if path.exists():
        recorded = path.read_text(encoding="utf-8").strip()
        if recorded != home:
            raise HomeAccountChangedError(
                f"{node_data_dir} holds the JetStream data of account {recorded!r} without an account tag, "
                f"but the configuration makes {home!r} the home account (the global account if it enables "
                f"JetStream, else the first JetStream account by name): give {recorded!r} JetStream again, "
                "or move the data directory away"
            )
        return
    node_data_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(home + "\n", encoding="utf-8")
