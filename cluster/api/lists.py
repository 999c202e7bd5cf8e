"""Paged LIST answers assembled by the meta leader from what each leader reports about itself."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from cluster.api import jsjson
from cluster.runtime.internal_requests import InternalRequester, NoRespondersError

ENTRY_TIMEOUT = 2.0


async def list_page(
    requester: InternalRequester,
    response_type: str,
    key: str,
    names: Sequence[str],
    offset: int,
    limit: int,
    entry_subject: Callable[[str], str],
    headers: bytes | None = None,
    standalone: bool = False,
) -> bytes:
    """`{"type", "total", "offset", "limit", key: [...]}` for names[offset:offset+limit], each entry asked
    of its leader at `entry_subject(name)` (with `headers`); those that do not answer are listed under
    `missing`. An empty page shows total 0 in a cluster (nats-server's clustered LIST answers before
    it counts), the number of names on a standalone server."""
    offset = min(offset, len(names))
    page = names[offset : offset + limit]

    async def entry(name: str) -> Any:
        try:
            reply = await requester.request(entry_subject(name), b"", ENTRY_TIMEOUT, headers)
            body = orjson.loads(reply.payload)
        except (NoRespondersError, TimeoutError, orjson.JSONDecodeError):
            return None
        if not isinstance(body, dict) or "error" in body:
            return None
        body.pop("type", None)
        return body

    entries = await asyncio.gather(*(entry(name) for name in page))
    out: dict[str, Any] = {
        "type": response_type,
        "total": len(names) if page or standalone else 0,
        "offset": offset,
        "limit": limit,
        key: [e for e in entries if e is not None],
    }
    missing = [name for name, e in zip(page, entries, strict=True) if e is None]
    if missing:
        out["missing"] = missing
    return jsjson.dumps(out)
