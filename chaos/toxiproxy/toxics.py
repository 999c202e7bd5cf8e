"""The toxic types, their attributes as the real Toxiproxy names them, and their effect on a stream.

Each toxic is an immutable set of attributes with a `pipe(stage)` coroutine
that moves chunks from the stage's input to its output, the way Toxiproxy's
toxics/*.go define the effect. Whatever a toxic is in the middle of sending
is `hold`-ed, so that removing or updating the toxic passes it on instead of
losing it; only the toxics whose job is to cut (timeout, reset_peer,
limit_data) drop bytes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import struct
from dataclasses import dataclass
from typing import Any, ClassVar

from chaos.toxiproxy.errors import BAD_REQUEST_BODY, INVALID_STREAM
from chaos.toxiproxy.stage import Chunk, Stage

# Toxiproxy's attributes are Go int64: larger numbers are a bad body there too.
_INT64_MAX = 2**63 - 1
_FLOAT32_MAX = 3.4028234663852886e38


class Direction(enum.StrEnum):
    """`upstream` is client to server, `downstream` server to client."""

    UPSTREAM = "upstream"
    DOWNSTREAM = "downstream"

    @classmethod
    def parse(cls, value: str) -> Direction:
        try:
            return cls(value.lower())
        except ValueError:
            raise INVALID_STREAM from None


def _now() -> float:
    return asyncio.get_running_loop().time()


@dataclass(frozen=True, slots=True)
class Toxic:
    """Base of every toxic type: attributes are the dataclass fields, all non-negative integers."""

    type_name: ClassVar[str] = ""
    # removing a toxic with this flag closes the connections it was on, as Toxiproxy's timeout does
    closes_on_removal: ClassVar[bool] = False

    def attributes(self) -> dict[str, int]:
        return dataclasses.asdict(self)

    def validate(self) -> None:
        """Reject attribute combinations the toxic cannot run with (raise an ApiError)."""

    def new_state(self) -> object:
        return None

    async def pipe(self, stage: Stage) -> None:
        while (chunk := await stage.receive()) is not None:
            stage.forward(chunk)
        stage.close()


@dataclass(frozen=True, slots=True)
class NoopToxic(Toxic):
    """Passes everything through; also what a toxic runs on a connection its toxicity spared."""

    type_name: ClassVar[str] = "noop"


@dataclass(frozen=True, slots=True)
class LatencyToxic(Toxic):
    """Delays each chunk until `latency` ± `jitter` ms after it was read; chunks still flow back to back."""

    type_name: ClassVar[str] = "latency"
    latency: int = 0
    jitter: int = 0

    async def pipe(self, stage: Stage) -> None:
        while (chunk := await stage.receive()) is not None:
            stage.hold(chunk)
            delay_ms = self.latency + (stage.rng.uniform(-self.jitter, self.jitter) if self.jitter else 0)
            wait = delay_ms / 1000 - (_now() - chunk.timestamp)
            if wait > 0:
                await asyncio.sleep(wait)
            # a later latency toxic counts from when this one let the chunk go
            chunk.timestamp += wait
            stage.release()
        stage.close()


@dataclass(frozen=True, slots=True)
class BandwidthToxic(Toxic):
    """Limits throughput to `rate` KB/s (1 KB = 1000 bytes); a rate of 0 lets nothing through."""

    type_name: ClassVar[str] = "bandwidth"
    rate: int = 0

    async def pipe(self, stage: Stage) -> None:
        if self.rate <= 0:
            # Toxiproxy's arithmetic never delivers anything at rate 0; hold data until removed
            await _hold_everything(stage)
            return
        bytes_per_second = self.rate * 1000
        slice_size = self.rate * 100  # what 100 ms of the rate allows
        owed = 0.0  # seconds of sending time not yet waited for, carried across chunks
        while (chunk := await stage.receive()) is not None:
            stage.hold(chunk)
            owed += len(chunk.data) / bytes_per_second
            # a chunk larger than 100 ms worth goes out in 100 ms slices
            while len(chunk.data) > slice_size:
                await asyncio.sleep(0.1)
                stage.forward(Chunk(chunk.data[:slice_size], chunk.timestamp))
                chunk.data = chunk.data[slice_size:]
                owed -= 0.1
            started = _now()
            if owed > 0:
                await asyncio.sleep(owed)
            owed -= _now() - started
            stage.release()
        stage.close()


@dataclass(frozen=True, slots=True)
class TimeoutToxic(Toxic):
    """Lets no data through; closes the connection after `timeout` ms without data (never if 0)."""

    type_name: ClassVar[str] = "timeout"
    closes_on_removal: ClassVar[bool] = True
    timeout: int = 0

    async def pipe(self, stage: Stage) -> None:
        wait = self.timeout / 1000 if self.timeout > 0 else None
        while True:
            try:
                chunk = await stage.receive(timeout=wait)
            except TimeoutError:
                break
            if chunk is None:
                break
            stage.drop(chunk)
        stage.close()


@dataclass(frozen=True, slots=True)
class ResetPeerToxic(Toxic):
    """On the first data (or end of stream), waits `timeout` ms then resets the connection (TCP RST)."""

    type_name: ClassVar[str] = "reset_peer"
    timeout: int = 0

    async def pipe(self, stage: Stage) -> None:
        first = await stage.receive()
        if first is not None:
            stage.drop(first)
        if self.timeout > 0:
            await asyncio.sleep(self.timeout / 1000)
        stage.reset()


@dataclass(frozen=True, slots=True)
class SlowCloseToxic(Toxic):
    """Passes data through but delays the close by `delay` ms."""

    type_name: ClassVar[str] = "slow_close"
    delay: int = 0

    async def pipe(self, stage: Stage) -> None:
        while (chunk := await stage.receive()) is not None:
            stage.forward(chunk)
        stage.hold(None)
        await asyncio.sleep(self.delay / 1000)
        stage.release()


@dataclass(frozen=True, slots=True)
class SlicerToxic(Toxic):
    """Cuts chunks into slices of about `average_size` ± `size_variation` bytes, `delay` µs apart."""

    type_name: ClassVar[str] = "slicer"
    average_size: int = 0
    size_variation: int = 0
    delay: int = 0

    def validate(self) -> None:
        # Toxiproxy recurses forever (or slices out of range) outside these bounds
        if self.average_size < 1:
            raise BAD_REQUEST_BODY.wrapping("slicer average_size must be at least 1")
        if self.size_variation >= self.average_size:
            raise BAD_REQUEST_BODY.wrapping("slicer size_variation must be less than average_size")

    def slice_bounds(self, size: int, rng: Any) -> list[tuple[int, int]]:
        """Offsets cutting `size` bytes: halve around the middle (± variation) until pieces are small enough."""
        bounds: list[tuple[int, int]] = []
        pending = [(0, size)]
        while pending:
            start, end = pending.pop()
            if (end - start) - self.average_size <= self.size_variation:
                bounds.append((start, end))
                continue
            middle = start + (end - start) // 2
            if self.size_variation > 0:
                middle += rng.randrange(-self.size_variation, self.size_variation)
            # the right half is pushed first so the left one is cut (and emitted) first
            pending.append((middle, end))
            pending.append((start, middle))
        return bounds

    async def pipe(self, stage: Stage) -> None:
        pause = self.delay / 1_000_000
        while (chunk := await stage.receive()) is not None:
            for start, end in self.slice_bounds(len(chunk.data), stage.rng):
                rest = chunk.data[end:]
                stage.forward(Chunk(chunk.data[start:end], chunk.timestamp))
                if rest:
                    stage.hold(Chunk(rest, chunk.timestamp))
                else:
                    stage.hold()
                await asyncio.sleep(pause)
            stage.hold()
        stage.close()


@dataclass(slots=True)
class LimitDataState:
    transmitted: int = 0


@dataclass(frozen=True, slots=True)
class LimitDataToxic(Toxic):
    """Lets `bytes` bytes through on each connection, then closes it."""

    type_name: ClassVar[str] = "limit_data"
    bytes: int = 0

    def new_state(self) -> object:
        return LimitDataState()

    async def pipe(self, stage: Stage) -> None:
        state = stage.state
        assert isinstance(state, LimitDataState)
        while (chunk := await stage.receive()) is not None:
            remaining = max(self.bytes - state.transmitted, 0)
            if remaining < len(chunk.data):
                stage.drop(Chunk(chunk.data[remaining:], chunk.timestamp))
                chunk.data = chunk.data[:remaining]
            if chunk.data:
                stage.forward(chunk)
                state.transmitted += len(chunk.data)
            if self.bytes - state.transmitted <= 0:
                break
        stage.close()


async def _hold_everything(stage: Stage) -> None:
    """Keep every chunk (in order) until interrupted; the stage passes them all on then."""
    held: list[Chunk | None] = []
    while (chunk := await stage.receive()) is not None:
        held.append(chunk)
        stage.hold(*held)
    stage.hold(*held, None)
    await asyncio.Event().wait()


TOXIC_TYPES: dict[str, type[Toxic]] = {
    cls.type_name: cls
    for cls in (
        NoopToxic,
        LatencyToxic,
        BandwidthToxic,
        TimeoutToxic,
        ResetPeerToxic,
        SlowCloseToxic,
        SlicerToxic,
        LimitDataToxic,
    )
}


def build_toxic(type_name: str, attributes: object, current: Toxic | None = None) -> Toxic:
    """A toxic of `type_name` from JSON attributes; missing ones keep `current`'s values (or 0).

    Unknown attribute names are ignored, as Go's JSON decoding does; a value that
    is not a non-negative integer is a bad request body.
    """
    cls = TOXIC_TYPES[type_name]
    if attributes is None:
        attributes = {}
    if not isinstance(attributes, dict):
        raise BAD_REQUEST_BODY.wrapping(f"attributes must be a JSON object, got {_json_kind(attributes)}")
    values: dict[str, int] = current.attributes() if current is not None else {}
    for field in dataclasses.fields(cls):
        value = attributes.get(field.name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise BAD_REQUEST_BODY.wrapping(
                f"attribute {field.name!r} of a {type_name} toxic must be an integer, got {value!r}"
            )
        if not 0 <= value <= _INT64_MAX:
            raise BAD_REQUEST_BODY.wrapping(
                f"attribute {field.name!r} of a {type_name} toxic must be between 0 and {_INT64_MAX}, got {value}"
            )
        values[field.name] = value
    toxic = cls(**values)
    toxic.validate()
    return toxic


def parse_toxicity(value: object) -> float:
    """Toxiproxy keeps toxicity as a float32: any number in its range (only 0..1 makes sense)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BAD_REQUEST_BODY.wrapping(f"toxicity must be a number, got {value!r}")
    if not abs(value) <= _FLOAT32_MAX:
        raise BAD_REQUEST_BODY.wrapping(f"toxicity {value!r} is out of range")
    return _shortest_float32(float(value))


def _shortest_float32(value: float) -> float:
    """`value` rounded to float32, as the fewest decimal digits that read back as that float32.

    This is what Toxiproxy stores and prints: 0.123456789 becomes 0.12345679.
    """
    as_float32 = struct.unpack("f", struct.pack("f", value))[0]
    for digits in range(1, 10):
        candidate = float(f"{as_float32:.{digits}g}")
        if struct.pack("f", candidate) == struct.pack("f", as_float32):
            return candidate
    return as_float32


@dataclass(frozen=True, slots=True)
class ToxicEntry:
    """A toxic as the API knows it: a name, a direction and the probability it applies to a connection."""

    name: str
    stream: Direction
    toxicity: float
    toxic: Toxic

    @property
    def type_name(self) -> str:
        return self.toxic.type_name

    def to_json(self) -> dict[str, Any]:
        # Toxiproxy's field order, and its float32 toxicity printed without a needless ".0"
        whole = self.toxicity.is_integer() and abs(self.toxicity) < 2**53
        toxicity: float | int = int(self.toxicity) if whole else self.toxicity
        return {
            "attributes": self.toxic.attributes(),
            "name": self.name,
            "type": self.type_name,
            "stream": self.stream.value,
            "toxicity": toxicity,
        }


def _json_kind(value: object) -> str:
    kinds = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return kinds.get(type(value), type(value).__name__)
