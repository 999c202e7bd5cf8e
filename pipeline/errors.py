"""Errors the data source raises, each naming the option, stream or server at fault.

They are raised on the driver while Spark plans the query (before any task
starts) whenever the fault can be seen there, so the message reaches the user
inside Spark's AnalysisException rather than as a failed task.
"""

from __future__ import annotations


class PipelineError(Exception):
    """Base of every error raised by the jetstream data source."""


class OptionError(PipelineError, ValueError):
    """An option is missing or malformed; the message names the option."""

    def __init__(self, option: str, problem: str) -> None:
        super().__init__(f"jetstream option '{option}': {problem}")
        self.option = option


class ServersUnreachableError(PipelineError):
    """None of the servers in the 'servers' option accepted a connection."""


class StreamNotFoundError(PipelineError):
    """The stream named by the 'stream' option does not exist."""


class DirectGetNotAllowedError(PipelineError):
    """The stream does not have allow_direct set, so no replica answers Direct Get."""


class BatchNotSupportedError(PipelineError):
    """The server answered a Direct Get batch with a single message (ADR-31: no Nats-Num-Pending)."""


class DirectGetError(PipelineError):
    """A Direct Get request failed: an error status, a timeout, or a replica that stayed behind."""


class PublishError(PipelineError):
    """A publish from the sink was refused or its PubAck never came."""
