"""Structured logging for a node: JSON lines, or human-readable in a terminal.

Every line carries the node name, added by a processor (so lines logged from
gRPC's threads and by libraries through the standard `logging` module carry it
too); callers add stream, group and term where they apply, as keywords or with
`log.bind(...)`.

The level is the `--log-level` flag, else `$JETRAFT_LOG_LEVEL`, else INFO.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import MutableMapping
from typing import Any, Literal, TextIO

import structlog

LogFormat = Literal["json", "console", "auto"]
LEVEL_ENV = "JETRAFT_LOG_LEVEL"
DEFAULT_LEVEL = "INFO"


def resolve_level(level: str | None, environ: MutableMapping[str, str] | None = None) -> int:
    """The numeric level: the flag's, else $JETRAFT_LOG_LEVEL's, else INFO; ValueError for a bad name."""
    env = os.environ if environ is None else environ
    name = (level or env.get(LEVEL_ENV) or DEFAULT_LEVEL).strip().upper()
    numeric = logging.getLevelName(name)
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {name!r}")
    return numeric


def resolve_format(fmt: str, stream: TextIO) -> Literal["json", "console"]:
    """`auto` means console for a terminal, JSON for anything else (a file, a pipe, a container log)."""
    if fmt == "auto":
        isatty = getattr(stream, "isatty", None)
        return "console" if callable(isatty) and isatty() else "json"
    if fmt not in ("json", "console"):
        raise ValueError(f"unknown log format {fmt!r}")
    return fmt  # type: ignore[return-value]


def _add_node(node: str) -> structlog.types.Processor:
    def add_node(_logger: Any, _method: str, event_dict: structlog.types.EventDict) -> structlog.types.EventDict:
        event_dict.setdefault("node", node)
        return event_dict

    return add_node


def configure_logging(
    node: str, level: str | None = None, fmt: LogFormat | str = "auto", stream: TextIO | None = None
) -> structlog.BoundLogger:
    """Set up structlog (and the standard `logging` root) for this process; the node's bound logger."""
    out = sys.stderr if stream is None else stream
    numeric = resolve_level(level)
    renderer: structlog.types.Processor = (
        structlog.dev.ConsoleRenderer()
        if resolve_format(fmt, out) == "console"
        else structlog.processors.JSONRenderer()
    )
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        _add_node(node),
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        # one write() per line, its newline included: a node's workers share one stderr, and print()'s
        # two writes (the line, then "\n") let another worker's line land between them
        logger_factory=structlog.WriteLoggerFactory(file=out),
        cache_logger_on_first_use=True,
    )
    # Libraries (grpc, asyncio) log through the standard module: same fields, same renderer.
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name, structlog.processors.format_exc_info],
        )
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_jetraft_node_handler", False)]:
        root.removeHandler(old)
    handler._jetraft_node_handler = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(numeric)
    return structlog.get_logger().bind(node=node)
