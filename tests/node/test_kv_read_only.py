"""ADR-8's read-only bucket, made read-only by the reader's permissions (publish denied on the
bucket's subjects and on the API requests that change it), driven by nats-py against a nats-server
2.15.1 and a jetraft node given the same accounts: the reader reads and watches, and every write it
tries fails the same way on both."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import nats
import pytest

from local.cluster import node_available
from tests.node.reference_server import NATS_SERVER, on_both_with_jetstream

pytestmark = pytest.mark.skipif(
    not (node_available() and NATS_SERVER.exists()), reason="needs `jetraft node` and nats-server"
)

TIMEOUT = 5.0
ACCOUNTS = """
accounts {
  KV: {
    jetstream: enabled
    users: [
      {user: writer, password: w}
      {user: reader, password: r, permissions: {
        publish: {
          allow: ["$JS.API.>", "$KV.RO.>"]
          deny: ["$KV.RO.>", "$JS.API.STREAM.PURGE.KV_RO", "$JS.API.STREAM.DELETE.KV_RO",
                 "$JS.API.STREAM.UPDATE.KV_RO", "$JS.API.STREAM.MSG.DELETE.KV_RO"]
        }
      }}
    ]
  }
}
"""


async def _outcome(action: Any) -> Any:
    try:
        result = await action
    except (nats.errors.Error, nats.js.errors.Error) as exc:
        return type(exc).__name__
    return getattr(result, "value", result)


async def _read_only(port: int) -> list[Any]:
    url = f"nats://127.0.0.1:{port}"
    writer = await nats.connect(url, user="writer", password="w", max_reconnect_attempts=0)
    violations: list[str] = []

    async def on_error(exc: Exception) -> None:
        violations.append(str(exc).split("'")[1] if "'" in str(exc) else str(exc))

    reader = await nats.connect(url, user="reader", password="r", error_cb=on_error, max_reconnect_attempts=0)
    seen: list[Any] = []
    try:
        bucket = await writer.jetstream().create_key_value(bucket="RO", history=2)
        await bucket.put("k", b"v1")
        await bucket.put("k", b"v2")
        # a write the server drops for want of permission is answered by no one: each waits out this
        reader_js = reader.jetstream(timeout=1.0)
        view = await reader_js.key_value("RO")
        seen.append((await view.get("k")).value)
        seen.append([entry.value for entry in await view.history("k")])
        seen.append(await view.keys())
        watcher = await view.watchall()
        # the current value and nats-py's end-of-initial-values marker (None), in either order: nats-py
        # sends the marker when the watch consumer's info says nothing is pending, and under load that
        # info can come after the server delivered the value (seen once against nats-server itself)
        initial = [await watcher.updates(timeout=TIMEOUT) for _ in range(2)]
        seen.append(sorted(("marker",) if update is None else (update.key, update.value) for update in initial))
        await bucket.put("k", b"v3")  # the writer's change reaches the reader's watch
        seen.append((await watcher.updates(timeout=TIMEOUT)).value)
        await watcher.stop()
        seen.append(await _outcome(view.put("k", b"mine")))
        seen.append(await _outcome(view.delete("k")))
        seen.append(await _outcome(view.purge("k")))
        seen.append(await _outcome(reader_js.purge_stream("KV_RO")))
        seen.append(await _outcome(reader_js.delete_stream("KV_RO")))
        seen.append((await view.get("k")).value)  # nothing the reader tried changed the bucket
        for _ in range(100):  # the server's -ERR lines arrive on their own time
            if len(violations) >= 5:
                break
            await asyncio.sleep(0.05)
        seen.append(violations)
        return seen
    finally:
        await reader.close()
        await writer.close()


async def test_a_bucket_read_only_by_permissions(tmp_path: Path) -> None:
    theirs, ours = await on_both_with_jetstream(tmp_path, ACCOUNTS, _read_only)
    assert ours == theirs
    assert theirs[0] == b"v2" and theirs[4] == b"v3"
