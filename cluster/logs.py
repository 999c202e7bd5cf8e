"""Structured logging for a node: JSON lines, or human-readable in a terminal.

Every log line carries the node name; callers bind stream, group and term
where they apply (`log.bind(stream=..., group=..., term=...)`).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Literal

import structlog

LogFormat = Literal["json", "console", "auto"]


def configure_logging(node: str, level: str | None = None, fmt: LogFormat = "auto") -> structlog.BoundLogger:
    """Set up structlog for this process and return the node's bound logger.

    `level` falls back to $JETRAFT_LOG_LEVEL, then INFO; `auto` picks JSON unless
    stderr is a terminal.
    """
    level_name = (level or os.environ.get("JETRAFT_LOG_LEVEL") or "INFO").upper()
    numeric = logging.getLevelName(level_name)
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level_name!r}")
    if fmt == "auto":
        fmt = "console" if sys.stderr.isatty() else "json"
    renderer: structlog.types.Processor = (
        structlog.dev.ConsoleRenderer() if fmt == "console" else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    return structlog.get_logger().bind(node=node)
