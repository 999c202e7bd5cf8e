"""One client connection: bytes in through the sans-IO parser, events applied to the router,
deliveries batched into one socket write per event-loop turn.

`data_received` only feeds the parser and drains its events. What nats-server
closes the connection for, we close it for, after an `-ERR '...'` in its
wording; what it only reports (a bad subject), we only report.
"""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
import time
from typing import Protocol, cast

import structlog

from gateway.accounts import GLOBAL_ACCOUNT, Accounts, AccountSpace
from gateway.auth import Authenticator, Identity, SlowCheck
from gateway.connect_options import (
    REQUEST_INFO_HEADER,
    USER_INFO_REQUEST,
    ConnectOptions,
    RequestInfoPolicy,
    client_info,
    drop_request_info,
    encode_client_info,
    stamp_request_info,
    strip_request_info,
)
from gateway.events import (
    ERR_AUTH_TIMEOUT,
    ERR_AUTHORIZATION,
    ERR_HEADERS_NOT_SUPPORTED,
    ERR_INVALID_PUBLISH_SUBJECT,
    ERR_INVALID_SUBJECT,
    ERR_MAX_CONNECTIONS,
    ERR_MAX_SUBSCRIPTIONS,
    ERR_STALE_CONNECTION,
    NEED_DATA,
    Connect,
    Err,
    HPub,
    Ping,
    Pong,
    ProtocolError,
    Pub,
    Sub,
    Unsub,
)
from gateway.limits import Limits, ServerStats
from gateway.nkey import new_nonce
from gateway.permissions import ConnectionPermissions
from gateway.protocol import OK_BYTES, PING_BYTES, PONG_BYTES, ClientCommandParser, encode_err, encode_token
from gateway.router import InvalidSubjectError, Router, Subscription
from gateway.transports.tls import TlsSettings
from storage.nats_time import format_rfc3339_nano
from subjects.grammar import is_valid_subject, subject_matches

log = structlog.get_logger(__name__)
# what a delivered request's headers hold when its client's node stamped it (gateway/connect_options.py)
REQUEST_INFO_MARK = b"\r\n" + REQUEST_INFO_HEADER.encode() + b": "

# One read can carry hundreds of commands. Handled in slices, with the rest of the node
# running in between, the first publishes' work (Raft appends, acks) goes ahead while
# later ones are still parsed, instead of all of it waiting for the last.
COMMANDS_PER_SLICE = 64
# Within a slice, the output so far is written every this many commands: a client that sent a
# burst of requests starts on the first answers while the node handles the rest, and the two
# work side by side instead of taking turns (Direct Get, 64 in flight, answered on the client's
# node: 4.5-5.1k -> 8.6-11.7k requests/s).
COMMANDS_PER_WRITE = 16


def publish_violation(subject: str) -> str:
    return f'Permissions Violation for Publish to "{subject}"'


def subscribe_violation(subject: str, queue: str | None) -> str:
    if queue:
        return f'Permissions Violation for Subscription to "{subject}" using queue "{queue}"'
    return f'Permissions Violation for Subscription to "{subject}"'


class ClientPort(Protocol):
    """The client port a connection belongs to (`gateway/server.py`'s GatewayServer)."""

    router: Router
    limits: Limits
    auth: Authenticator | None
    stats: ServerStats
    tls_upgrade: ssl.SSLContext | None
    tls: TlsSettings | None
    accounts: Accounts | None
    # which publishes carry the client's details to the server answering them (None: none do)
    request_info: RequestInfoPolicy | None

    def admit(self, conn: ClientConnection) -> bool:
        """Register `conn` if max_connections leaves room for it; whether it did."""
        ...

    def unregister(self, conn: ClientConnection) -> None: ...

    def info_bytes(self, conn: ClientConnection) -> bytes: ...


class ClientConnection(asyncio.Protocol):
    def __init__(self, server: ClientPort, client_id: int) -> None:
        self.server = server
        self.client_id = client_id
        self.router = server.router
        self._output = server.router.output
        limits = server.limits
        self._parser = ClientCommandParser(limits.max_payload, limits.max_control_line)
        self._max_pending = limits.max_pending
        self.options = ConnectOptions()
        # whether a CONNECT was accepted, and whether the PONG after it (and the INFO naming the client's
        # account that follows it) went out
        self._connect_accepted = False
        self._first_pong_sent = False
        # Mirrors of `options` read on every delivery (ClientSink attributes).
        self.echo = True
        self.no_responders = False
        self.headers_enabled = False
        self.verbose = True
        self.pedantic = True
        self.authenticated = server.auth is None
        # None: the client may publish and subscribe to anything (no users list, or a user without limits)
        self.permissions: ConnectionPermissions | None = None
        # sids of subscriptions whose messages are checked against the subscribe deny list on delivery
        self._filtered_sids: set[bytes] = set()
        self.user = ""
        # The client's account, when there are several: its subjects are mapped to and from the router's.
        self.space: AccountSpace | None = None
        # Router subscriptions beyond the first that one SUB needed (stream imports), by sid.
        self._extra_subs: dict[str, list[Subscription]] = {}
        # sids whose import subscriptions are wider than the client's filter: deliveries are checked.
        self._overlap_filters: dict[bytes, str] = {}
        # A password check running on a worker thread: nothing more is read or handled until it is done.
        self._checking_credentials = False
        # What this client must sign to prove an nkey (sent in its INFO); empty when no nkey users exist.
        self.nonce = new_nonce() if server.auth is not None and server.auth.nonce_required else ""
        self.subs: dict[str, Subscription] = {}
        self.transport: asyncio.Transport | None = None
        # a client of the WebSocket port: its transport is the WebSocket (gateway/transports/websocket.py)
        self.websocket = False
        self.remote_ip = ""
        self.remote_port = 0
        self.closed = False
        self.pings_out = 0
        self._out: list[bytes] = []
        self._out_size = 0
        self._flush_pending = False
        self._reading_paused = False
        self._waiting_for_links = False
        self._slice_scheduled = False
        self._loop = asyncio.get_running_loop()
        self._auth_timer: asyncio.TimerHandle | None = None
        # closes the connection when its credentials expire (operator mode's JWTs)
        self._expiry_timer: asyncio.TimerHandle | None = None
        self._tls_upgrade: asyncio.Task[None] | None = None
        # TLS is required and the task that starts it has not yet sent INFO
        self._tls_pending = False
        self._ping_timer: asyncio.TimerHandle | None = None
        self.in_msgs = 0
        self.out_msgs = 0
        # for /connz and /varz: payload and header bytes, as nats-server counts them
        self.in_bytes = 0
        self.out_bytes = 0
        self.started_ns = time.time_ns()
        self.last_activity_ns = self.started_ns
        self._started_monotonic_ns = time.monotonic_ns()
        # nats-server's first estimate of the client's RTT: from accepting the connection to its CONNECT
        self.rtt_ns = 0
        # this client's Nats-Request-Info value, made at its first request (its CONNECT is known by then)
        self._request_info_json: bytes | None = None

    # --- asyncio.Protocol -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.remote_ip = peer[0] if peer else ""
        self.remote_port = peer[1] if peer else 0
        limits = self.server.limits
        if not self.server.admit(self):
            # As nats-server: INFO, the error, then the connection closes.
            self._write(self.server.info_bytes(self))
            self.close_with_error(ERR_MAX_CONNECTIONS)
            return
        upgrade = None if self.websocket else self.server.tls_upgrade
        if upgrade is not None:
            # INFO in clear, then TLS: both from the task, back to back. The loop starts reading this
            # socket as soon as connection_made returns (uvloop ignores a pause made in it), so INFO
            # is only sent once the TLS layer can be put in place before the client can answer it.
            self._tls_pending = True
            self._tls_upgrade = self._loop.create_task(self._start_tls(upgrade))
        else:
            self._write(self.server.info_bytes(self))
        if not self.authenticated:
            self._auth_timer = self._loop.call_later(limits.auth_timeout, self._auth_timed_out)
        self._ping_timer = self._loop.call_later(limits.ping_interval, self._ping_tick)

    async def _start_tls(self, context: ssl.SSLContext) -> None:
        transport = self.transport
        tls = self.server.tls
        assert transport is not None and tls is not None
        if self.closed:
            return
        # start_tls pauses reading and puts the TLS layer in place before it first yields, so the
        # client's answer to this INFO (its ClientHello) can only reach the TLS layer
        transport.write(self.server.info_bytes(self))
        self._tls_pending = False
        try:
            upgraded = await self._loop.start_tls(
                transport, self, context, server_side=True, ssl_handshake_timeout=tls.timeout
            )
        except (OSError, ssl.SSLError, ConnectionError, TimeoutError) as exc:
            # A client that did not start TLS (or failed to): closed without a word, as nats-server does.
            log.debug("client TLS handshake failed", client_id=self.client_id, error=repr(exc))
            transport.abort()
            self._shutdown()
            return
        if self.closed or upgraded is None:
            return
        self.transport = cast(asyncio.Transport, upgraded)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        if self._tls_pending:
            # bytes before the server's INFO, on a port that requires TLS: no TLS client sends them
            log.debug("client spoke before TLS", client_id=self.client_id)
            self.transport.abort()
            self._shutdown()
            return
        # once per read rather than per message: /connz's last_activity needs no finer grain
        self.last_activity_ns = time.time_ns()
        self._parser.receive_data(data)
        if not self._slice_scheduled:
            self._drain_slice()

    def _drain_slice(self) -> None:
        self._slice_scheduled = False
        stopped_early = self._drain_events(COMMANDS_PER_SLICE)
        self._output.flush()
        if self.closed:
            return
        if stopped_early:
            self._slice_scheduled = True
            self._loop.call_soon(self._drain_slice)
        if not self._waiting_for_links and self.router.links_congested():
            # A peer link is backed up: stop reading this publisher until it drains.
            self._waiting_for_links = True
            self.router.when_links_drained(self._links_drained)
        self._update_reading()

    def _links_drained(self) -> None:
        self._waiting_for_links = False
        self._update_reading()

    def _update_reading(self) -> None:
        """Read from the socket unless a peer link is backed up or commands already read wait for a slice."""
        paused = self._waiting_for_links or self._slice_scheduled or self._checking_credentials
        if paused is self._reading_paused or self.closed or self.transport is None:
            return
        self._reading_paused = paused
        if paused:
            self.transport.pause_reading()
        else:
            self.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._shutdown()

    # --- events -------------------------------------------------------------------------

    def _drain_events(self, budget: int) -> bool:
        """Handle up to `budget` commands already read; whether it stopped with the budget spent."""
        parser = self._parser
        handled = 0
        while not self.closed:
            if self._checking_credentials:
                return False
            if handled == budget:
                return parser.buffered > 0
            if handled and handled % COMMANDS_PER_WRITE == 0:
                self._output.flush()
            handled += 1
            try:
                event = parser.next_event()
            except ProtocolError as exc:
                self.close_with_error(exc.message)
                return False
            if event is NEED_DATA:
                return False
            kind = type(event)
            if not self.authenticated and kind is not Connect:
                self.close_with_error(ERR_AUTHORIZATION)
                return False
            if kind is Pub:
                self._publish(event.subject, event.reply, None, event.payload)  # type: ignore[union-attr]
            elif kind is HPub:
                if not self.headers_enabled:
                    self.close_with_error(ERR_HEADERS_NOT_SUPPORTED)
                    return False
                self._publish(event.subject, event.reply, event.headers or None, event.payload)  # type: ignore[union-attr]
            elif kind is Ping:
                self._write(PONG_BYTES)
                if not self._first_pong_sent and self._connect_accepted:
                    # as nats-server: the first PONG after CONNECT is followed by the INFO that names the
                    # client's account, for clients that take asynchronous INFOs
                    self._first_pong_sent = True
                    if self.options.protocol >= 1:
                        self._write(self.server.connect_info_bytes(self))
            elif kind is Pong:
                self.pings_out = 0
            elif kind is Sub:
                self._subscribe(event)  # type: ignore[arg-type]
            elif kind is Unsub:
                self._unsubscribe(event)  # type: ignore[arg-type]
            elif kind is Connect:
                self._connect(event)  # type: ignore[arg-type]
            elif kind is Err:
                # nats-server treats an error from a client as the end of the conversation.
                self.close()
            # INFO and +OK from a client carry nothing a server acts on.
        return False

    def _connect(self, event: Connect) -> None:
        self.rtt_ns = max(1, time.monotonic_ns() - self._started_monotonic_ns)
        try:
            options = ConnectOptions.from_dict(event.options)
        except ProtocolError as exc:
            self.close_with_error(exc.message)
            return
        auth = self.server.auth
        if auth is not None:
            identity = auth.check(options, self.nonce)
            if isinstance(identity, SlowCheck):
                self._check_credentials_off_loop(identity, options)
                return
            if identity is None or not self._may_connect(identity):
                self.close_with_error(ERR_AUTHORIZATION)
                return
            self._identified(identity)
        self._accept(options)

    def _check_credentials_off_loop(self, check: SlowCheck, options: ConnectOptions) -> None:
        self._checking_credentials = True
        future = self._loop.run_in_executor(None, check.run)

        def done(_future: asyncio.Future[Identity | None]) -> None:
            self._checking_credentials = False
            if self.closed:
                return
            identity = None if future.cancelled() or future.exception() else future.result()
            if identity is None or not self._may_connect(identity):
                self.close_with_error(ERR_AUTHORIZATION)
                return
            self._identified(identity)
            self._accept(options)
            self._drain_slice()  # what the client sent after its CONNECT

        future.add_done_callback(done)

    def _may_connect(self, identity: Identity) -> bool:
        """Whether the identity may connect this way and from here (its connection types and networks)."""
        if identity.connection_types is not None:
            kind = "WEBSOCKET" if self.websocket else "STANDARD"
            if kind not in identity.connection_types:
                log.info("client_connection_type_not_allowed", client_id=self.client_id, type=kind)
                return False
        if identity.sources is not None:
            try:
                address = ipaddress.ip_address(self.remote_ip)
            except ValueError:
                address = None
            if address is None or not any(address in network for network in identity.sources):
                log.info("client_source_not_allowed", client_id=self.client_id, address=self.remote_ip)
                return False
        return True

    def _identified(self, identity: Identity) -> None:
        if self._expiry_timer is not None:  # a second CONNECT's credentials replace the first's
            self._expiry_timer.cancel()
            self._expiry_timer = None
        if identity.expires_at:
            delay = max(0.0, identity.expires_at - time.time())
            self._expiry_timer = self._loop.call_later(delay, self.close_with_error, identity.expiry_error)
        self.user = identity.user
        accounts = self.server.accounts
        if accounts is not None:
            self.space = accounts.space(identity.account)
        if identity.permissions is not None:
            self.permissions = ConnectionPermissions(identity.permissions)

    def _accept(self, options: ConnectOptions) -> None:
        if self.space is None and self.server.accounts is not None and self.server.auth is None:
            self.space = self.server.accounts.space(GLOBAL_ACCOUNT)
        self.authenticated = True
        if self._auth_timer is not None:
            self._auth_timer.cancel()
            self._auth_timer = None
        self.options = options
        self._connect_accepted = True
        self.echo = options.echo
        self.no_responders = options.no_responders
        self.headers_enabled = options.headers
        self.verbose = options.verbose
        self.pedantic = options.pedantic
        if self.verbose:
            self._write(OK_BYTES)

    def _publish(self, subject: str, reply: str | None, headers: bytes | None, payload: bytes) -> None:
        self.in_msgs += 1
        self.in_bytes += len(payload) + (len(headers) if headers else 0)
        if self.pedantic and not is_valid_subject(subject):
            self._write(encode_err(ERR_INVALID_PUBLISH_SUBJECT))
            return
        if self.permissions is not None and not self.permissions.may_publish(subject):
            # nats-server reports it and keeps the connection.
            self._write(encode_err(publish_violation(subject)))
            return
        client_subject = subject
        space = self.space
        if space is not None:
            mapped = space.publish_subject(subject)
            mapped_reply = space.reply_subject(reply) if reply else None
            if mapped is None or (reply and mapped_reply is None):
                self._write(encode_err(publish_violation(subject if mapped is None else reply or "")))
                return
            subject, reply = mapped, mapped_reply
        if self.verbose:
            # nats-server acknowledges before it delivers, so a publisher subscribed to
            # its own subject sees +OK ahead of the MSG.
            self._write(OK_BYTES)
        policy = self.server.request_info
        if policy is not None:
            if subject.startswith(policy.prefixes) or client_subject.startswith(policy.prefixes):
                headers = self._with_request_info(policy, client_subject, subject, headers)
            elif client_subject == USER_INFO_REQUEST:
                # its answer names this client's user and account, as nats-server's does from its ClientInfo
                headers = stamp_request_info(headers, self._request_info(policy))
        # Without pedantic, nats-server drops a message on an invalid subject silently. (try, not
        # contextlib.suppress: this runs for every PUB, and the context manager costs it ~0.7 us)
        try:  # noqa: SIM105
            self.router.publish(subject, payload, reply, headers, origin=self)
        except InvalidSubjectError:
            pass

    def _with_request_info(
        self, policy: RequestInfoPolicy, client_subject: str, subject: str, headers: bytes | None
    ) -> bytes | None:
        """`headers` with this client's Nats-Request-Info, on a request the JetStream API answers and audits,
        while anyone listens for the audit: in the client's own account, or in the JetStream account the
        request reaches by way of an import. Unwatched, a request travels as its client sent it."""
        if client_subject.startswith(policy.prefixes):
            audited_in = self.space.prefix if self.space is not None else ""
            asked = client_subject
        else:
            audited_in, asked = "", subject  # the JetStream account's subjects are the router's as they are
        if not policy.stamps(asked):
            return headers
        if policy.watched and not self.router.has_interest(audited_in + policy.watched):
            return drop_request_info(headers)
        return stamp_request_info(headers, self._request_info(policy))

    def _request_info(self, policy: RequestInfoPolicy) -> bytes:
        if self._request_info_json is None:
            options = self.options
            info = client_info(
                start=format_rfc3339_nano(self.started_ns),
                host=self.remote_ip,
                client_id=self.client_id,
                account=self.account_name,
                user=self.user,
                name=options.name,
                lang=options.lang,
                version=options.version,
                rtt_ns=self.rtt_ns,
                server=policy.server,
                cluster=policy.cluster,
            )
            self._request_info_json = encode_client_info(info)
        return self._request_info_json

    def _subscribe(self, event: Sub) -> None:
        existing = self.subs.get(event.sid)
        if existing is None:
            max_subscriptions = self.server.limits.max_subscriptions
            if 0 < max_subscriptions <= len(self.subs):
                # nats-server reports it and keeps the connection.
                self._write(encode_err(ERR_MAX_SUBSCRIPTIONS))
                return
            permissions = self.permissions
            if permissions is not None:
                if not permissions.may_subscribe(event.subject):
                    self._write(encode_err(subscribe_violation(event.subject, event.queue)))
                    return
                if permissions.filters_deliveries(event.subject):
                    self._filtered_sids.add(encode_token(event.sid))
            sid = encode_token(event.sid)
            subjects, wider = (
                ([event.subject], False) if self.space is None else self.space.subscription_subjects(event.subject)
            )
            try:
                sub = self.router.subscribe_client(self, sid, subjects[0], event.queue)
            except InvalidSubjectError:
                self._write(encode_err(ERR_INVALID_SUBJECT))
                return
            self.subs[event.sid] = sub
            if len(subjects) > 1:
                self._extra_subs[event.sid] = [
                    self.router.subscribe_client(self, sid, extra, event.queue) for extra in subjects[1:]
                ]
                if wider:
                    self._overlap_filters[sid] = event.subject
        if self.verbose:
            self._write(OK_BYTES)

    def _unsubscribe(self, event: Unsub) -> None:
        sub = self.subs.get(event.sid)
        if sub is not None:
            if event.max_msgs:
                self.router.auto_unsubscribe(sub, event.max_msgs)
            else:
                self.router.unsubscribe(sub)
                self._drop_extra_subs(event.sid)
        if self.verbose:
            self._write(OK_BYTES)

    # --- ClientSink: called by the router -----------------------------------------------

    def deliver(
        self, sid: bytes, subject: bytes, reply: bytes | None, headers: bytes | None, payload: bytes
    ) -> None:
        if self.closed:
            return
        space = self.space
        if space is not None:
            shown, imported = space.delivered_subject(subject.decode())
            if shown is None:
                return  # another account's subject, matched by a wildcard in the router's space
            if imported:
                overlap = self._overlap_filters.get(sid)
                if overlap is not None and not subject_matches(overlap, shown):
                    return
            subject = shown.encode()
            if reply:
                reply = space.delivered_reply(reply.decode(), shown).encode()
            if headers is not None and space.prefix and headers.startswith(b"NATS/1.0 503"):
                # the no-responders status names the subject as the client published it
                headers = headers.replace(b"Nats-Subject: " + space.prefix.encode(), b"Nats-Subject: ", 1)
        if headers is not None and REQUEST_INFO_MARK in headers:
            policy = self.server.request_info
            if policy is not None and subject.startswith(policy.delivered_prefixes):
                headers = strip_request_info(headers)
        permissions = self.permissions
        if permissions is not None:
            if sid in self._filtered_sids and not permissions.may_receive(subject.decode()):
                return
            if reply:
                permissions.delivered_request(reply.decode())
        if headers is not None and self.headers_enabled:
            hdr_len = len(headers)
            if reply:
                line = b"HMSG %s %s %s %d %d\r\n" % (subject, sid, reply, hdr_len, hdr_len + len(payload))
            else:
                line = b"HMSG %s %s %d %d\r\n" % (subject, sid, hdr_len, hdr_len + len(payload))
            data = line + headers + payload + b"\r\n"
        elif reply:
            data = b"MSG %s %s %s %d\r\n%s\r\n" % (subject, sid, reply, len(payload), payload)
        else:
            data = b"MSG %s %s %d\r\n%s\r\n" % (subject, sid, len(payload), payload)
        self.out_msgs += 1
        self.out_bytes += len(payload) + (len(headers) if headers is not None and self.headers_enabled else 0)
        self._out.append(data)
        self._out_size += len(data)
        if not self._flush_pending:
            self._flush_pending = True
            self._output.add(self)
        if self._out_size > self._max_pending:
            self._slow_consumer()

    def subscription_closed(self, sub: Subscription) -> None:
        sid = sub.sid.decode("utf-8", "surrogateescape")
        if self.subs.get(sid) is sub:
            del self.subs[sid]
            self._filtered_sids.discard(sub.sid)
            self._drop_extra_subs(sid)

    def _drop_extra_subs(self, sid: str) -> None:
        extras = self._extra_subs.pop(sid, None)
        if extras:
            self._overlap_filters.pop(encode_token(sid), None)
            for extra in extras:
                self.router.unsubscribe(extra)

    # --- output -------------------------------------------------------------------------

    @property
    def account_name(self) -> str:
        """The account the client belongs to (the global one when no accounts are configured)."""
        return self.space.account.name if self.space is not None else GLOBAL_ACCOUNT

    @property
    def pending_bytes(self) -> int:
        """Bytes queued for this client and not yet handed to the transport."""
        return self._out_size

    def _write(self, data: bytes) -> None:
        if self.closed:
            return
        self._out.append(data)
        self._out_size += len(data)
        if not self._flush_pending:
            self._flush_pending = True
            self._output.add(self)

    def flush_output(self) -> None:
        self._flush_pending = False
        transport = self.transport
        if not self._out or transport is None or self.closed:
            return
        out = self._out
        transport.write(out[0] if len(out) == 1 else b"".join(out))
        out.clear()
        self._out_size = 0
        if transport.get_write_buffer_size() > self._max_pending:
            self._slow_consumer()

    def _slow_consumer(self) -> None:
        log.warning("slow consumer, closing", client_id=self.client_id, name=self.options.name)
        stats = self.server.stats
        stats.slow_consumers += 1
        stats.slow_consumers_by_account[self.account_name] = stats.slow_consumers_by_account.get(self.account_name, 0) + 1
        self.closed = True
        self._out.clear()
        if self.transport is not None:
            self.transport.abort()
        self._shutdown()

    # --- closing and timers ---------------------------------------------------------------

    def close_with_error(self, message: str) -> None:
        """Send `-ERR '<message>'`, flush what is pending, and close."""
        self._write(encode_err(message))
        self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.flush_output()
        self.closed = True
        if self.transport is not None:
            self.transport.close()
        self._shutdown()

    def send_info(self, info: bytes) -> None:
        """An asynchronous INFO (cluster membership changed), for clients that understand it."""
        if self.authenticated and self.options.protocol >= 1:
            self._write(info)

    def _shutdown(self) -> None:
        """Drop everything this connection holds in the router; safe to call twice."""
        self.closed = True
        for timer in (self._auth_timer, self._ping_timer, self._expiry_timer):
            if timer is not None:
                timer.cancel()
        if self._tls_upgrade is not None and not self._tls_upgrade.done():
            self._tls_upgrade.cancel()
        subs = list(self.subs.values())
        for extras in self._extra_subs.values():
            subs += extras
        self.subs.clear()
        self._extra_subs.clear()
        for sub in subs:
            self.router.unsubscribe(sub)
        self.server.unregister(self)

    def _auth_timed_out(self) -> None:
        if not self.authenticated:
            self.close_with_error(ERR_AUTH_TIMEOUT)

    def _ping_tick(self) -> None:
        if self.closed:
            return
        limits = self.server.limits
        if self.pings_out >= limits.max_pings_out:
            self.close_with_error(ERR_STALE_CONNECTION)
            return
        self.pings_out += 1
        self._write(PING_BYTES)
        self._ping_timer = self._loop.call_later(limits.ping_interval, self._ping_tick)
