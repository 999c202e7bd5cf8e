"""nats-server's `$SYS.REQ` requests that operators' tools send: server discovery and monitoring over NATS.

`nats server ls`/`ping` ask `$SYS.REQ.SERVER.PING` (every server answers with its statsz),
`nats server report jetstream` asks `$SYS.REQ.SERVER.PING.JSZ`, `nats account info` asks
`$SYS.REQ.USER.INFO` (answered by the server the client is connected to). Each answer is
`{"server": <who answered>, "data" or "statsz": <the monitoring endpoint's body>}`.

jetraft has one account: any client may ask these (nats-server answers the SERVER requests only
to its system account). docs/monitoring.md says so.

A node of several workers answers as one server: its workers share one queue group for the PING
requests and the node's server id, so one of them answers each, with the node's bodies, which it
asks of the supervisor's HTTP port (the merge of every worker's), and with the node's name and id.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import structlog

from cluster.node.monitoring import statsz_of
from gateway.accounts import GLOBAL_ACCOUNT
from gateway.connect_options import REQUEST_INFO_HEADER, USER_INFO_REQUEST
from gateway.headers import HeaderError, decode_headers
from gateway.router import Message, Router, Subscription
from storage.nats_time import format_rfc3339_nano

log = structlog.get_logger(__name__)

SERVER_PING = "$SYS.REQ.SERVER.PING"
USER_INFO = USER_INFO_REQUEST
# USER.INFO is about the asker's own connection: the node it is connected to answers, only that one
USER_INFO_QUEUE = "_sys_user_info"
# nats-server's capability bit for JetStream (its other bits name features jetraft lacks)
FLAG_JETSTREAM = 1


class SystemEndpoints(Protocol):
    """The bodies each request kind answers with (cluster/node/monitoring.py)."""

    def statsz(self) -> dict[str, Any]: ...

    def varz(self) -> dict[str, Any]: ...

    def connz(self, query: Mapping[str, str]) -> dict[str, Any]: ...

    def subsz(self, query: Mapping[str, str]) -> dict[str, Any]: ...

    def routez(self) -> dict[str, Any]: ...

    def jsz(self, query: Mapping[str, str]) -> dict[str, Any]: ...

    def healthz(self, query: Mapping[str, str]) -> tuple[int, dict[str, Any]]: ...

    def gatewayz(self) -> dict[str, Any]: ...

    def leafz(self) -> dict[str, Any]: ...

    def accountz(self, query: Mapping[str, str]) -> dict[str, Any]: ...


class NodeMonitoring(Protocol):
    """A several-worker node's monitoring endpoints, merged by its supervisor
    (cluster/node/supervision/node_endpoints.py)."""

    name: str
    server_id: str

    async def get(self, path: str, query: Mapping[str, str]) -> tuple[int, Any]:
        """(HTTP status, JSON body or error text); status 0 when the supervisor could not be asked."""
        ...


# the node's endpoint each request kind asks, on a several-worker node (STATSZ is made of /varz and /routez)
_NODE_PATHS = {
    "VARZ": "/varz",
    "CONNZ": "/connz",
    "SUBSZ": "/subsz",
    "ROUTEZ": "/routez",
    "JSZ": "/jsz",
    "HEALTHZ": "/healthz",
    "GATEWAYZ": "/gatewayz",
    "LEAFZ": "/leafz",
    "ACCOUNTZ": "/accountz",
}
_KINDS = ("STATSZ", *_NODE_PATHS)


def node_queue(node: str) -> str:
    """The queue group a node's workers answer its PING requests in: one answer per node."""
    return f"_sys_node_{node}"


def _options(payload: bytes) -> dict[str, Any]:
    """The request's options object ({} when empty or not an object)."""
    if not payload.strip():
        return {}
    try:
        parsed = json.loads(payload)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _query(options: Mapping[str, Any]) -> dict[str, str]:
    """Request options as the endpoints' query parameters (booleans as nats-server's query text)."""
    names = {
        "accounts": "accounts",
        "streams": "streams",
        "consumer": "consumers",
        "config": "config",
        "leader_only": "leader-only",
        "subscriptions": "subs",
        "offset": "offset",
        "limit": "limit",
        "sort": "sort",
        "cid": "cid",
        "test": "test",
        "js_enabled_only": "js-enabled-only",
        "js_server_only": "js-server-only",
        "account": "acc",
        "auth": "auth",
        "details": "details",
    }
    query: dict[str, str] = {}
    for key, name in names.items():
        value = options.get(key)
        if value is None or value is False:
            continue
        query[name] = "true" if value is True else str(value)
    return query


def _health_data(status: int, body: dict[str, Any]) -> dict[str, Any]:
    """Over NATS, nats-server's health answer carries its HTTP status as `status_code` (`nats server
    report health` counts a server healthy by it)."""
    return {"status": body["status"], "status_code": status, **body}


class SystemResponder:
    """Answers `$SYS.REQ.SERVER.PING[.<kind>]`, `$SYS.REQ.SERVER.<id>.<kind>` and `$SYS.REQ.USER.INFO`."""

    def __init__(
        self,
        router: Router,
        endpoints: SystemEndpoints,
        identity: Callable[[], dict[str, Any]],
        server_id: str,
        user: str,
        account_prefixes: tuple[str, ...] = ("",),
        node: NodeMonitoring | None = None,
        system_prefix: str = "",
    ) -> None:
        """`node`: the node this process is one worker of, which it answers for (None: the process is
        the node). `system_prefix`: where the system account's subjects live in the router, the only
        account whose users are answered the servers' requests (gateway/accounts.py)."""
        self._router = router
        self._node = node
        self._tasks: set[asyncio.Task[None]] = set()
        self._endpoints = endpoints
        self._identity = identity
        self._server_id = server_id
        self._user = user
        # where each account's subjects live in the router (gateway/accounts.py): USER.INFO is answered in all
        self._account_prefixes = account_prefixes
        self._system_prefix = system_prefix
        self._seq = 0
        self._subs: list[Subscription] = []

    def open(self) -> None:
        router, node = self._router, self._node
        # one server's requests: each asked of this process alone, or of one worker of its node
        group = node_queue(node.name) if node is not None else None
        system = self._system_prefix
        self._subs = [
            router.subscribe(system + SERVER_PING, self._on_ping, group),
            router.subscribe(f"{system}{SERVER_PING}.*", self._on_kind, group),
            router.subscribe(f"{system}$SYS.REQ.SERVER.{self._server_id}.*", self._on_kind),
            # the node's id, which its answers give (a worker's own, above, is in its clients' INFO)
            *(
                [router.subscribe(f"{system}$SYS.REQ.SERVER.{node.server_id}.*", self._on_kind, group)]
                if node
                else []
            ),
            *(
                router.subscribe(prefix + USER_INFO, self._on_user_info, USER_INFO_QUEUE)
                for prefix in self._account_prefixes
            ),
        ]

    def close(self) -> None:
        for sub in self._subs:
            self._router.unsubscribe(sub)
        self._subs = []
        for task in self._tasks:
            task.cancel()

    def _who(self) -> dict[str, Any]:
        """The server answering: this process, or the node it is a worker of."""
        identity = self._identity()
        if self._node is not None:
            identity.update(name=self._node.name, id=self._node.server_id)
        return identity

    def _server(self) -> dict[str, Any]:
        self._seq += 1
        return {
            **self._who(),
            "jetstream": True,
            "flags": FLAG_JETSTREAM,
            "seq": self._seq,
            "time": format_rfc3339_nano(time.time_ns()),
        }

    def _answer(self, reply: str, key: str, body: dict[str, Any]) -> None:
        payload = json.dumps({"server": self._server(), key: body}).encode()
        self._router.publish(reply, payload)

    def _selected(self, options: Mapping[str, Any]) -> bool:
        """nats-server's EventFilterOptions: name, cluster and host match as substrings unless
        `exact_match`; every tag asked for must be one of this server's; the domain must equal."""
        identity = self._who()
        exact = bool(options.get("exact_match"))
        for option, field in (("server_name", "name"), ("cluster", "cluster"), ("host", "host")):
            wanted = options.get(option)
            if not wanted:
                continue
            have = str(identity.get(field, ""))
            if (have != wanted) if exact else (str(wanted) not in have):
                return False
        tags = options.get("tags") or []
        if tags and not set(tags) <= set(identity.get("tags", [])):
            return False
        domain = options.get("domain")
        return not (domain and domain != identity.get("domain", ""))

    def _on_ping(self, msg: Message) -> None:
        if not msg.reply or not self._selected(_options(msg.payload)):
            return
        if self._node is not None:
            self._for_node(msg.reply, "statsz", "STATSZ", {})
            return
        self._answer(msg.reply, "statsz", self._endpoints.statsz())

    def _on_kind(self, msg: Message) -> None:
        if not msg.reply:
            return
        options = _options(msg.payload)
        if msg.subject.startswith(self._system_prefix + SERVER_PING) and not self._selected(options):
            return
        kind = msg.subject.rsplit(".", 1)[-1]
        if self._node is not None:
            if kind in _KINDS:  # nats-server does not subscribe to kinds it does not serve: no answer
                self._for_node(msg.reply, "data", kind, _query(options))
            return
        endpoints, query = self._endpoints, _query(options)
        builders: dict[str, Callable[[], dict[str, Any]]] = {
            "STATSZ": endpoints.statsz,
            "VARZ": endpoints.varz,
            "CONNZ": lambda: endpoints.connz(query),
            "SUBSZ": lambda: endpoints.subsz(query),
            "ROUTEZ": endpoints.routez,
            "JSZ": lambda: endpoints.jsz(query),
            "HEALTHZ": lambda: _health_data(*endpoints.healthz(query)),
            "GATEWAYZ": endpoints.gatewayz,
            "LEAFZ": endpoints.leafz,
            "ACCOUNTZ": lambda: endpoints.accountz(query),
        }
        build = builders.get(kind)
        if build is None:
            return  # nats-server does not subscribe to kinds it does not serve: no answer
        try:
            body = build()
        except ValueError as exc:
            payload = json.dumps({"server": self._server(), "error": {"code": 400, "description": str(exc)}})
            self._router.publish(msg.reply, payload.encode())
            return
        self._answer(msg.reply, "data", body)

    def _for_node(self, reply: str, key: str, kind: str, query: Mapping[str, str]) -> None:
        task = asyncio.get_running_loop().create_task(self._answer_for_node(reply, key, kind, query))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer_for_node(self, reply: str, key: str, kind: str, query: Mapping[str, str]) -> None:
        """The node's body for `kind`, from its supervisor; no answer if it cannot give one (a server
        that cannot answer does not)."""
        node = self._node
        assert node is not None
        if kind == "STATSZ":
            (varz_status, varz), (routez_status, routez) = await asyncio.gather(
                node.get("/varz", {}), node.get("/routez", {})
            )
            if varz_status != 200 or routez_status != 200:
                log.warning("node_statsz_unavailable", varz=varz_status, routez=routez_status)
                return
            self._answer(reply, key, statsz_of(varz, routez["routes"]))
            return
        status, body = await node.get(_NODE_PATHS[kind], query)
        if status == 400:
            payload = json.dumps({"server": self._server(), "error": {"code": 400, "description": str(body)}})
            self._router.publish(reply, payload.encode())
        elif kind == "HEALTHZ" and status in (200, 503) and isinstance(body, dict):
            self._answer(reply, key, _health_data(status, body))
        elif status == 200 and isinstance(body, dict):
            self._answer(reply, key, body)
        else:
            log.warning("node_monitoring_unavailable", kind=kind, status=status)

    def _on_user_info(self, msg: Message) -> None:
        """The asking client's user and account, from the ClientInfo its node stamped on the request (the
        node's own user and the global account for a request that has none)."""
        if not msg.reply:
            return
        user, account = self._user, GLOBAL_ACCOUNT
        if msg.headers is not None:
            try:
                stamped = decode_headers(msg.headers).get(REQUEST_INFO_HEADER)
                client = json.loads(stamped) if stamped else {}
            except (HeaderError, ValueError):
                client = {}
            if isinstance(client, dict) and client:
                user, account = str(client.get("user", "")), str(client.get("acc", GLOBAL_ACCOUNT))
        self._answer(msg.reply, "data", {"user": user, "account": account, "account_name": account})
