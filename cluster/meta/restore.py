"""STREAM.RESTORE on the meta leader: take a jetraft archive in chunks, then rebuild the stream from it.

The protocol is nats-server's (server/jetstream_api.go, processStreamRestore): the answer names a deliver
subject `$JS.SNAPSHOT.RESTORE.<stream>.<id>`; the client sends the archive there in chunks, each with a
reply subject that gets an empty message once the chunk is taken; an empty chunk ends the upload, and its
reply gets the STREAM.CREATE-shaped answer (the restored stream's info, or 10062 "restore failed: ...")
once the stream is rebuilt. A chunk without a reply subject, or five seconds without one, abandons the
restore.

The chunks go to a spool file in the node's data directory, not to memory, and nothing is created before
the whole archive has arrived and read back intact (cluster/backup/archive.py checks its digest): a cut
or altered upload creates no stream. Then the stream is created under a subject no client publishes to
(its republish and subject transform left out, unsealed), its messages are proposed at their archived
sequences and times through its own Raft group (STORE_AT_SEQS entries of a few hundred kilobytes, so
every replica stores them), the sequences after the last message are skipped, an update gives it the
requested configuration, and each archived consumer is created with its config and starts from its
archived state (its first entry RESTORED, in place of a start position); if any step fails, the stream
is deleted again (its consumers with it). Clients cannot publish into it while it is rebuilt, so no new
message can take a sequence the archive holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import structlog

from cluster.api import jsjson
from cluster.api.advisories import (
    RESTORE_COMPLETE_TYPE,
    RESTORE_CREATE_TYPE,
    backup_advisory,
    backup_advisory_subject,
    new_event_id,
)
from cluster.api.errors import ApiError, JSErrors, plain_error
from cluster.api.response_types import STREAM_CREATE_TYPE
from cluster.backup.archive import (
    ArchivedConsumer,
    ArchivedMessage,
    ArchiveError,
    ArchiveHeader,
    archive_kind,
    read_archive,
    unframe,
)
from cluster.backup.restore_batch import join_restore_batch
from cluster.runtime.context import NodeContext
from cluster.stream.entries import SkipMsgs, StoreAtSeq, StoreAtSeqs
from gateway.router import Message

log = structlog.get_logger(__name__)

STALL_S = 5.0  # nats-server's: a restore that receives nothing for this long is abandoned
# a restore's messages go through the stream's group as entries of about this much, a few per request
# to the stream leader: one Raft entry each cost a 3-node cluster about 120 us of CPU per message
ENTRY_BYTES = 256 * 1024
ENTRIES_PER_REQUEST = 4
SPOOL_READ_BYTES = 1024 * 1024
RESTORING_SUBJECT_PREFIX = "_jetraft_restoring."


def restore_config(stream: str, payload: bytes) -> dict[str, Any]:
    """The requested config of a STREAM.RESTORE, after nats-server's checks of the request itself."""
    if jsjson.is_empty_request(payload):
        raise JSErrors.BAD_REQUEST()
    try:
        body = jsjson.loads_object(payload)
    except jsjson.RequestJSONError as exc:
        raise JSErrors.INVALID_JSON(err=str(exc)) from None
    config = body.get("config")
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise JSErrors.INVALID_JSON(err="json: cannot unmarshal into Go struct field of type StreamConfig")
    config = dict(config)
    if not config.get("name"):
        config["name"] = stream  # nats-server: a config without a name takes the subject's
    if config["name"] != stream:
        raise JSErrors.STREAM_MISMATCH()
    if "/" in stream or "\\" in stream:
        raise JSErrors.STREAM_NAME_CONTAINS_PATH_SEPARATORS()
    if config.get("mirror") or config.get("sources"):
        # the rebuilt copy would race the mirror's or sources' own fetching for the same sequences
        raise JSErrors.STREAM_RESTORE(err="jetraft cannot restore a mirror or a stream with sources yet")
    return config


def rebuilding_config(config: dict[str, Any], token: str) -> dict[str, Any]:
    """The config the stream is created with while it is rebuilt: a subject only the restore knows, no
    republish or subject transform (they would act on the restored messages), not sealed yet."""
    building = copy.deepcopy(config)
    building["subjects"] = [RESTORING_SUBJECT_PREFIX + token]
    for field in ("republish", "subject_transform"):
        building.pop(field, None)
    building["sealed"] = False
    return building


class RestoreSteps(Protocol):
    """What the meta leader does for a restore once the archive is in (cluster/meta/service.py)."""

    async def create_stream(self, name: str, config: dict[str, Any]) -> None: ...

    async def store_restored(self, name: str, batch: bytes) -> None: ...

    async def update_stream(self, name: str, config: dict[str, Any]) -> None: ...

    async def create_consumer(self, name: str, consumer: ArchivedConsumer) -> None: ...

    async def delete_stream(self, name: str) -> None: ...

    async def restored_info(self, name: str) -> bytes:
        """The stream's STREAM.CREATE-shaped answer, from its leader."""
        ...


class StreamRestore:
    """One restore: the upload into a spool file, then the rebuild."""

    def __init__(
        self,
        ctx: NodeContext,
        name: str,
        config: dict[str, Any],
        steps: RestoreSteps,
        spool_dir: Path,
        client: dict[str, Any] | None = None,
    ) -> None:
        self._ctx = ctx
        self._client = client  # the requester's ClientInfo, for the advisories
        self._begun_ns = time.time_ns()
        self._name = name
        self._config = config
        self._steps = steps
        self._token = secrets.token_hex(11)
        self.deliver_subject = f"$JS.SNAPSHOT.RESTORE.{name}.{self._token}"
        spool_dir.mkdir(parents=True, exist_ok=True)
        self._spool_path = spool_dir / f"{name}-{self._token}.archive"
        self._spool = self._spool_path.open("wb")
        self._received = 0
        self._last_activity = time.monotonic()
        self._sub: Any = None
        self._done = False
        self._watchdog: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._sub = self._ctx.router.subscribe(self.deliver_subject, self._on_chunk)
        self._watchdog = self._ctx.spawn(self._watch(), f"restore-watch-{self._name}")
        self._advise("RESTORE_CREATE", RESTORE_CREATE_TYPE, self._begun_ns)

    def _advise(self, event: str, kind: str, now_ns: int, **fields: Any) -> None:
        ctx, name, client = self._ctx, self._name, self._client
        ctx.advise(
            backup_advisory_subject(event, name),
            lambda: backup_advisory(kind, name, client, new_event_id(), now_ns, ctx.domain, **fields),
        )

    def _advise_complete(self) -> None:
        """RESTORE_COMPLETE, sent as nats-server sends it: once the upload ended, the restore done or not."""
        ended_ns = time.time_ns()
        fields = {"start": self._begun_ns, "end": ended_ns, "bytes": self._received}
        self._advise("RESTORE_COMPLETE", RESTORE_COMPLETE_TYPE, ended_ns, **fields)

    def _on_chunk(self, msg: Message) -> None:
        if self._done:
            return
        if not msg.reply:
            self._abandon(f"restore for stream '{self._name}' requires reply subject for each chunk")
            return
        self._last_activity = time.monotonic()
        if not msg.payload:
            self._end_upload()
            self._ctx.spawn(self._rebuild(msg.reply), f"restore-{self._name}")
            return
        try:
            self._spool.write(msg.payload)
        except OSError as exc:
            self._abandon(f"restore for stream '{self._name}' could not spool: {exc}")
            self._ctx.api_reply(msg.reply, _failed(str(exc)))
            return
        self._received += len(msg.payload)
        self._ctx.reply(msg.reply, b"")

    async def _watch(self) -> None:
        while not self._done:
            idle = time.monotonic() - self._last_activity
            if idle >= STALL_S:
                self._abandon(f"restore for stream '{self._name}' is stalled")
                return
            await asyncio.sleep(STALL_S - idle)

    def _end_upload(self) -> None:
        self._done = True
        if self._sub is not None:
            self._ctx.router.unsubscribe(self._sub)
        self._spool.close()
        if self._watchdog is not None and self._watchdog is not asyncio.current_task():
            self._watchdog.cancel()

    def _abandon(self, reason: str) -> None:
        log.warning("stream_restore_abandoned", stream=self._name, reason=reason, received=self._received)
        self._end_upload()
        self._spool_path.unlink(missing_ok=True)

    async def _rebuild(self, reply: str) -> None:
        started = time.monotonic()
        created = False
        try:
            header, consumers = await asyncio.to_thread(self._verified_archive)
            building = rebuilding_config(self._config, self._token)
            await self._steps.create_stream(self._name, building)
            created = True
            messages = await self._replay(header, building)
            await self._steps.update_stream(self._name, self._config)
            for consumer in consumers:
                await self._steps.create_consumer(self._name, consumer)
            body = await self._steps.restored_info(self._name)
        except Exception as exc:  # every failure ends the restore with nats-server's restore error
            reason = exc.description if isinstance(exc, ApiError) else str(exc)
            log.warning("stream_restore_failed", stream=self._name, reason=reason, created=created)
            if created:
                with contextlib.suppress(Exception):
                    await self._steps.delete_stream(self._name)
            self._ctx.api_reply(reply, _failed(reason))
            return
        finally:
            self._spool_path.unlink(missing_ok=True)
            self._advise_complete()
        log.info(
            "stream_restored",
            stream=self._name,
            messages=messages,
            bytes=self._received,
            seconds=round(time.monotonic() - started, 3),
        )
        self._ctx.api_reply(reply, body)

    def _verified_archive(self) -> tuple[ArchiveHeader, list[ArchivedConsumer]]:
        """Read the whole spooled archive once (off the loop): its header and consumers, if every record
        and the digest are intact."""
        with self._spool_path.open("rb") as spool:
            kind = archive_kind(spool.read(16))
        if kind == "nats-server":
            raise ArchiveError("the archive is nats-server's, which jetraft cannot read")
        if kind != "jetraft":
            raise ArchiveError("not a jetraft stream archive")
        header: ArchiveHeader | None = None
        consumers = []
        for record in read_archive(unframe(self._spool_pieces())):
            if isinstance(record, ArchiveHeader):
                header = record
            elif isinstance(record, ArchivedConsumer):
                consumers.append(record)
        assert header is not None  # read_archive raises before it could yield no header
        if header.stream != self._name:
            raise ArchiveError(f"the archive holds stream {header.stream!r}")
        return header, consumers

    async def _replay(self, header: ArchiveHeader, building: dict[str, Any]) -> int:
        """Propose every message at its sequence, a STORE_AT_SEQS entry per ENTRY_BYTES of them and a few
        entries per request to the stream leader, then skip to the archived last sequence."""
        first_seq = building.get("first_seq") or 0
        last = first_seq - 1 if first_seq > 0 else 0
        entries: list[bytes] = []
        pending: list[StoreAtSeq] = []
        size = messages = 0
        for record in read_archive(unframe(self._spool_pieces())):
            if not isinstance(record, ArchivedMessage):
                continue
            pending.append(StoreAtSeq(record.seq, record.subject, record.headers, record.payload, record.ts_ns))
            size += len(record.subject) + len(record.headers) + len(record.payload)
            last = record.seq
            messages += 1
            if size >= ENTRY_BYTES:
                entries.append(StoreAtSeqs(tuple(pending)).encode())
                pending, size = [], 0
                if len(entries) >= ENTRIES_PER_REQUEST:
                    await self._steps.store_restored(self._name, join_restore_batch(entries))
                    entries = []
        if pending:
            entries.append(StoreAtSeqs(tuple(pending)).encode())
        if header.last_seq > last:
            entries.append(SkipMsgs(header.last_seq - last).encode())
        if entries:
            await self._steps.store_restored(self._name, join_restore_batch(entries))
        return messages

    def _spool_pieces(self) -> Iterator[bytes]:
        with self._spool_path.open("rb") as spool:
            while piece := spool.read(SPOOL_READ_BYTES):
                yield piece


def _failed(reason: str) -> bytes:
    return plain_error(STREAM_CREATE_TYPE, JSErrors.STREAM_RESTORE(err=reason))
