"""One client connection: bytes in through the sans-IO parser, events applied to the router,
deliveries batched into one socket write per event-loop turn.

`data_received` only feeds the parser and drains its events. What nats-server
closes the connection for, we close it for, after an `-ERR '...'` in its
wording; what it only reports (a bad subject), we only report.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Protocol, cast

import structlog

from gateway.auth import Authenticator
from gateway.connect_options import ConnectOptions
from gateway.events import (
    ERR_AUTH_TIMEOUT,
    ERR_AUTHORIZATION,
    ERR_HEADERS_NOT_SUPPORTED,
    ERR_INVALID_PUBLISH_SUBJECT,
    ERR_INVALID_SUBJECT,
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
from gateway.protocol import OK_BYTES, PING_BYTES, PONG_BYTES, ClientCommandParser, encode_err, encode_token
from gateway.router import InvalidSubjectError, Router, Subscription
from subjects.grammar import is_valid_subject

log = structlog.get_logger(__name__)

# One read can carry hundreds of commands. Handled in slices, with the rest of the node
# running in between, the first publishes' work (Raft appends, acks) goes ahead while
# later ones are still parsed, instead of all of it waiting for the last.
COMMANDS_PER_SLICE = 64
# Within a slice, the output so far is written every this many commands: a client that sent a
# burst of requests starts on the first answers while the node handles the rest, and the two
# work side by side instead of taking turns (Direct Get, 64 in flight, answered on the client's
# node: 4.5-5.1k -> 8.6-11.7k requests/s).
COMMANDS_PER_WRITE = 16


class ClientPort(Protocol):
    """The client port a connection belongs to (`gateway/server.py`'s GatewayServer)."""

    router: Router
    limits: Limits
    auth: Authenticator | None
    stats: ServerStats

    def register(self, conn: ClientConnection) -> None: ...

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
        # Mirrors of `options` read on every delivery (ClientSink attributes).
        self.echo = True
        self.no_responders = False
        self.headers_enabled = False
        self.verbose = True
        self.pedantic = True
        self.authenticated = server.auth is None
        self.subs: dict[str, Subscription] = {}
        self.transport: asyncio.Transport | None = None
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
        self._ping_timer: asyncio.TimerHandle | None = None
        self.in_msgs = 0
        self.out_msgs = 0
        # for /connz and /varz: payload and header bytes, as nats-server counts them
        self.in_bytes = 0
        self.out_bytes = 0
        self.started_ns = time.time_ns()
        self.last_activity_ns = self.started_ns

    # --- asyncio.Protocol -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.remote_ip = peer[0] if peer else ""
        self.remote_port = peer[1] if peer else 0
        self.server.register(self)
        self._write(self.server.info_bytes(self))
        limits = self.server.limits
        if not self.authenticated:
            self._auth_timer = self._loop.call_later(limits.auth_timeout, self._auth_timed_out)
        self._ping_timer = self._loop.call_later(limits.ping_interval, self._ping_tick)

    def data_received(self, data: bytes) -> None:
        if self.closed:
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
        paused = self._waiting_for_links or self._slice_scheduled
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
        try:
            options = ConnectOptions.from_dict(event.options)
        except ProtocolError as exc:
            self.close_with_error(exc.message)
            return
        auth = self.server.auth
        if auth is not None and not auth.check(options):
            self.close_with_error(ERR_AUTHORIZATION)
            return
        self.authenticated = True
        if self._auth_timer is not None:
            self._auth_timer.cancel()
            self._auth_timer = None
        self.options = options
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
        if self.verbose:
            # nats-server acknowledges before it delivers, so a publisher subscribed to
            # its own subject sees +OK ahead of the MSG.
            self._write(OK_BYTES)
        # Without pedantic, nats-server drops a message on an invalid subject silently.
        with contextlib.suppress(InvalidSubjectError):
            self.router.publish(subject, payload, reply, headers, origin=self)

    def _subscribe(self, event: Sub) -> None:
        existing = self.subs.get(event.sid)
        if existing is None:
            try:
                sub = self.router.subscribe_client(self, encode_token(event.sid), event.subject, event.queue)
            except InvalidSubjectError:
                self._write(encode_err(ERR_INVALID_SUBJECT))
                return
            self.subs[event.sid] = sub
        if self.verbose:
            self._write(OK_BYTES)

    def _unsubscribe(self, event: Unsub) -> None:
        sub = self.subs.get(event.sid)
        if sub is not None:
            if event.max_msgs:
                self.router.auto_unsubscribe(sub, event.max_msgs)
            else:
                self.router.unsubscribe(sub)
        if self.verbose:
            self._write(OK_BYTES)

    # --- ClientSink: called by the router -----------------------------------------------

    def deliver(
        self, sid: bytes, subject: bytes, reply: bytes | None, headers: bytes | None, payload: bytes
    ) -> None:
        if self.closed:
            return
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

    # --- output -------------------------------------------------------------------------

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
        self.server.stats.slow_consumers += 1
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
        for timer in (self._auth_timer, self._ping_timer):
            if timer is not None:
                timer.cancel()
        subs = list(self.subs.values())
        self.subs.clear()
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
