"""The data source's options, parsed and checked once on the driver.

Spark hands options over as strings in a case-insensitive mapping; these
dataclasses turn them into typed, validated values so that a typo fails with
the option's name before any task starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

from pipeline.errors import OptionError
from storage.validation import MAX_TS
from subjects.grammar import is_valid_filter, is_valid_subject

DEFAULT_BATCH_SIZE = 1000
DEFAULT_MAX_BYTES = 1 << 20
DEFAULT_REQUEST_TIMEOUT = 5.0
DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_MAX_IN_FLIGHT = 1000
DEFAULT_ACK_TIMEOUT = 30.0
DEFAULT_MSG_ID_PREFIX = "spark"
# ADR-31 servers stop a batch at max_bytes or at their own max_pending (64 MiB by default).
MAX_MAX_BYTES = 64 << 20
LATEST_TIME_NS_SECONDS = MAX_TS // 1_000_000_000


def parse_servers(raw: str | None) -> tuple[str, ...]:
    """'nats://h:p,h2:p2' into ('nats://h:p', 'nats://h2:p2'), rejecting anything that is not host:port."""
    if raw is None or not raw.strip():
        raise OptionError("servers", "is required: a comma-separated list such as nats://127.0.0.1:4222")
    urls = []
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        url = item if "://" in item else f"nats://{item}"
        parts = urlsplit(url)
        try:
            port = parts.port
        except ValueError:
            port = None
        if parts.scheme not in ("nats", "tls") or not parts.hostname or port is None:
            raise OptionError("servers", f"{item!r} is not a NATS server URL like nats://127.0.0.1:4222")
        urls.append(url)
    if not urls:
        raise OptionError("servers", "lists no server")
    return tuple(urls)


def _int_option(
    options: Mapping[str, str], name: str, minimum: int, default: int | None = None
) -> int | None:
    raw = options.get(name)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise OptionError(name, f"must be an integer, got {raw!r}") from None
    if value < minimum:
        raise OptionError(name, f"must be at least {minimum}, got {value}")
    return value


def _float_option(options: Mapping[str, str], name: str, default: float) -> float:
    raw = options.get(name)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise OptionError(name, f"must be a number of seconds, got {raw!r}") from None
    if not value > 0:
        raise OptionError(name, f"must be positive, got {raw!r}")
    return value


def _time_option(options: Mapping[str, str], name: str) -> datetime | None:
    raw = options.get(name)
    if raw is None or str(raw).strip() == "":
        return None
    text = str(raw).strip()
    try:
        # fromisoformat keeps at most microseconds; RFC 3339 allows nanoseconds, which a read cannot use anyway.
        value = datetime.fromisoformat(_trim_fraction(text))
    except ValueError:
        raise OptionError(
            name, f"must be an RFC 3339 time such as 2024-11-04T23:45:02Z, got {raw!r}"
        ) from None
    if value.tzinfo is None:
        raise OptionError(name, f"must carry a time zone (Z or +hh:mm), got {raw!r}")
    if not LATEST_TIME_NS_SECONDS > value.timestamp() >= 0:
        # Servers keep times as 64-bit nanoseconds since the epoch and cannot take one outside that.
        raise OptionError(name, f"must lie between 1970 and 2262 (64-bit nanoseconds), got {raw!r}")
    return value.astimezone(UTC)


def _trim_fraction(text: str) -> str:
    dot = text.find(".")
    if dot < 0:
        return text
    end = dot + 1
    while end < len(text) and text[end].isdigit():
        end += 1
    return text[: min(end, dot + 7)] + text[end:]


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """Options of `spark.read.format("jetstream")` and `spark.readStream.format("jetstream")`."""

    servers: tuple[str, ...]
    stream: str
    subject: str | None = None
    start_seq: int | None = None
    end_seq: int | None = None  # inclusive: the last sequence read
    start_time: datetime | None = None
    partitions: int | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    max_bytes: int = DEFAULT_MAX_BYTES
    min_last_seq: int | None = None
    max_messages_per_trigger: int | None = None
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        servers = parse_servers(options.get("servers"))
        stream = (options.get("stream") or "").strip()
        if not stream:
            raise OptionError("stream", "is required: the name of the stream to read")
        if any(ch in stream for ch in " \t\r\n.*>"):
            raise OptionError("stream", f"{stream!r} is not a valid stream name")
        subject = (options.get("subject") or "").strip() or None
        if subject is not None and not is_valid_filter(subject):
            raise OptionError("subject", f"{subject!r} is not a valid subject filter")
        if subject == ">":
            subject = None
        start_seq = _int_option(options, "start_seq", 1)
        end_seq = _int_option(options, "end_seq", 1)
        start_time = _time_option(options, "start_time")
        if start_seq is not None and start_time is not None:
            raise OptionError(
                "start_time", "cannot be combined with start_seq (Direct Get takes one or the other)"
            )
        if start_seq is not None and end_seq is not None and end_seq < start_seq:
            raise OptionError("end_seq", f"{end_seq} is before start_seq {start_seq}")
        max_bytes = _int_option(options, "max_bytes", 1, DEFAULT_MAX_BYTES)
        assert max_bytes is not None
        if max_bytes > MAX_MAX_BYTES:
            raise OptionError("max_bytes", f"must be at most {MAX_MAX_BYTES}, got {max_bytes}")
        batch_size = _int_option(options, "batch_size", 1, DEFAULT_BATCH_SIZE)
        assert batch_size is not None
        return cls(
            servers=servers,
            stream=stream,
            subject=subject,
            start_seq=start_seq,
            end_seq=end_seq,
            start_time=start_time,
            partitions=_int_option(options, "partitions", 1),
            batch_size=batch_size,
            max_bytes=max_bytes,
            min_last_seq=_int_option(options, "min_last_seq", 0),
            max_messages_per_trigger=_int_option(options, "max_messages_per_trigger", 1),
            request_timeout=_float_option(options, "request_timeout", DEFAULT_REQUEST_TIMEOUT),
            connect_timeout=_float_option(options, "connect_timeout", DEFAULT_CONNECT_TIMEOUT),
        )


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """Options of `df.write.format("jetstream")`."""

    servers: tuple[str, ...]
    subject: str | None = None  # default subject; a `subject` column overrides it row by row
    msg_id_prefix: str = DEFAULT_MSG_ID_PREFIX
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    ack_timeout: float = DEFAULT_ACK_TIMEOUT
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        servers = parse_servers(options.get("servers"))
        subject = (options.get("subject") or "").strip() or None
        if subject is not None and not is_valid_subject(subject):
            raise OptionError("subject", f"{subject!r} is not a valid subject to publish to (no wildcards)")
        prefix = (options.get("msg_id_prefix") or DEFAULT_MSG_ID_PREFIX).strip()
        if not prefix or any(ch in prefix for ch in " \t\r\n:"):
            raise OptionError("msg_id_prefix", f"{prefix!r} must be non-empty, without spaces or ':'")
        max_in_flight = _int_option(options, "max_in_flight", 1, DEFAULT_MAX_IN_FLIGHT)
        assert max_in_flight is not None
        return cls(
            servers=servers,
            subject=subject,
            msg_id_prefix=prefix,
            max_in_flight=max_in_flight,
            ack_timeout=_float_option(options, "ack_timeout", DEFAULT_ACK_TIMEOUT),
            connect_timeout=_float_option(options, "connect_timeout", DEFAULT_CONNECT_TIMEOUT),
        )
