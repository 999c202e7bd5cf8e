"""Subject transforms as nats-server 2.15 builds and applies them (stream subject_transform, RePublish,
source and mirror transforms).

A transform maps a subject matched by `src` (default `>`) to `dest`. Each
destination token is a literal, or a reference to `src`'s wildcards:

- `$N` and `{{wildcard(N)}}`: the token the N-th `*` matched;
- `{{partition(n, i, j, ...)}}`: FNV-1a of the referenced tokens (of the
  whole subject with no references) modulo n;
- `{{split(i, sep)}}`, `{{splitFromLeft(i, pos)}}`, `{{splitFromRight(i, pos)}}`,
  `{{sliceFromLeft(i, size)}}`, `{{sliceFromRight(i, size)}}`, `{{left(i, n)}}`,
  `{{right(i, n)}}`: cut the referenced token into one or more tokens;
- `{{random(n)}}`: a random number below n;
- a trailing `>` takes what `src`'s `>` matched.

Everything here follows nats-server's quirks, each checked on a real
2.15.1 server (tests/test_subject_transform.py): lengths and positions count
bytes, not characters; `$0` or a negative reference takes the subject's
first token; a reference in a destination whose source has no wildcard is
refused, except `partition` (which then hashes the whole subject) and
`random`; a subject with a `*` or `>` token matches no transform. The error
texts are nats-server's, so config checks can answer with them.

Pure: no I/O. `random` uses the `random` module, which is why a stream
transforms a subject once, on its leader, and replicates the result.
"""

from __future__ import annotations

import enum
import random
import re
from dataclasses import dataclass

from subjects.grammar import subject_matches

_SPACE = "[\t\n\f\r ]"  # Go's `\s`
_COMMA = re.compile(f",{_SPACE}*")
_INT = re.compile(r"[+-]?[0-9]+")
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1

# nats-server's error texts (server/errors.go)
ERR_BAD_SUBJECT = "invalid subject"
_BAD_DEST = "invalid mapping destination"
ERR_INVALID_DESTINATION = f"{_BAD_DEST}: invalid transform"
ERR_UNKNOWN_FUNCTION = f"{_BAD_DEST}: unknown function"
ERR_INDEX_OUT_OF_RANGE = f"{_BAD_DEST}: wildcard index out of range"
ERR_NOT_ENOUGH_ARGS = f"{_BAD_DEST}: not enough arguments passed to the function"
ERR_INVALID_ARG = f"{_BAD_DEST}: function argument is invalid or in the wrong format"
ERR_TOO_MANY_ARGS = f"{_BAD_DEST}: too many arguments passed to the function"


class TransformError(ValueError):
    """A src/dest pair nats-server refuses; the message is nats-server's error text."""


def _destination_error(err: str, token: str) -> TransformError:
    return TransformError(f"{err} in {token}" if token else err)


class Function(enum.Enum):
    LITERAL = enum.auto()
    WILDCARD = enum.auto()
    PARTITION = enum.auto()
    SPLIT_FROM_LEFT = enum.auto()
    SPLIT_FROM_RIGHT = enum.auto()
    SLICE_FROM_LEFT = enum.auto()
    SLICE_FROM_RIGHT = enum.auto()
    SPLIT = enum.auto()
    LEFT = enum.auto()
    RIGHT = enum.auto()
    RANDOM = enum.auto()


def _function_pattern(name: str) -> re.Pattern[str]:
    # nats-server's regexps: the first letter of each word in either case, arguments greedy
    letters = "".join(f"[{c.lower()}{c.upper()}]" if c.isupper() or i == 0 else c for i, c in enumerate(name))
    return re.compile(r"\{\{" + _SPACE + "*" + letters + _SPACE + r"*\((.*)\)" + _SPACE + r"*\}\}")


# in the order nats-server tries them
_FUNCTIONS: tuple[tuple[Function, re.Pattern[str]], ...] = (
    (Function.WILDCARD, _function_pattern("wildcard")),
    (Function.PARTITION, _function_pattern("partition")),
    (Function.SPLIT_FROM_LEFT, _function_pattern("splitFromLeft")),
    (Function.SPLIT_FROM_RIGHT, _function_pattern("splitFromRight")),
    (Function.SLICE_FROM_LEFT, _function_pattern("sliceFromLeft")),
    (Function.SLICE_FROM_RIGHT, _function_pattern("sliceFromRight")),
    (Function.RIGHT, _function_pattern("right")),
    (Function.LEFT, _function_pattern("left")),
    (Function.SPLIT, _function_pattern("split")),
    (Function.RANDOM, _function_pattern("random")),
)
_INDEX_AND_INT = frozenset(
    {
        Function.SPLIT_FROM_LEFT,
        Function.SPLIT_FROM_RIGHT,
        Function.SLICE_FROM_LEFT,
        Function.SLICE_FROM_RIGHT,
        Function.RIGHT,
        Function.LEFT,
    }
)


@dataclass(frozen=True, slots=True)
class _Placeholder:
    """One destination token as parsed: its function, the wildcard numbers it names, its other arguments."""

    function: Function
    wildcards: tuple[int, ...] = ()
    number: int = -1
    text: str = ""


def _atoi(text: str) -> int | None:
    """Go's strconv.Atoi: optional sign, ASCII digits, within int64."""
    if _INT.fullmatch(text) is None:
        return None
    value = int(text)
    return value if -_INT64_MAX - 1 <= value <= _INT64_MAX else None


def _to_int32(value: int) -> int:
    """Go's int32(v): wraps."""
    return (value + 2**31) % 2**32 - 2**31


def _arguments(pattern: re.Pattern[str], token: str) -> list[str] | None:
    found = pattern.search(token)
    return None if found is None else _COMMA.split(found.group(1))


def _parse_placeholder(token: str) -> _Placeholder:
    """nats-server's indexPlaceHolders: what one destination token asks for."""
    if len(token) > 1 and token[0] == "$":
        index = _atoi(token[1:])
        # other things rely on tokens starting with `$`: not a number, just a literal
        return _Placeholder(Function.LITERAL) if index is None else _Placeholder(Function.WILDCARD, (index,))
    if not (len(token) > 4 and token.startswith("{{") and token.endswith("}}")):
        return _Placeholder(Function.LITERAL)
    for function, pattern in _FUNCTIONS:
        args = _arguments(pattern, token)
        if args is not None:
            return _parse_function(function, args, token)
    raise _destination_error(ERR_UNKNOWN_FUNCTION, token)


def _parse_function(function: Function, args: list[str], token: str) -> _Placeholder:
    if function is Function.WILDCARD:
        if len(args) == 1 and args[0] == "":
            raise _destination_error(ERR_NOT_ENOUGH_ARGS, token)
        if len(args) > 1:
            raise _destination_error(ERR_TOO_MANY_ARGS, token)
        index = _atoi(args[0].strip(" "))
        if index is None:
            raise _destination_error(ERR_INVALID_ARG, token)
        return _Placeholder(Function.WILDCARD, (index,))
    if function is Function.PARTITION:
        count = _atoi(args[0].strip(" "))
        if count is None or count > _INT32_MAX:
            raise _destination_error(ERR_INVALID_ARG, token)
        indexes = []
        for arg in args[1:]:
            index = _atoi(arg.strip(" "))
            if index is None:
                raise _destination_error(ERR_INVALID_ARG, token)
            indexes.append(index)
        return _Placeholder(Function.PARTITION, tuple(indexes), _to_int32(count))
    if function in _INDEX_AND_INT:
        if len(args) < 2:
            raise _destination_error(ERR_NOT_ENOUGH_ARGS, token)
        if len(args) > 2:
            raise _destination_error(ERR_TOO_MANY_ARGS, token)
        index = _atoi(args[0].strip(" "))
        number = _atoi(args[1].strip(" "))
        if index is None or number is None or not -_INT32_MAX - 1 <= number <= _INT32_MAX:
            raise _destination_error(ERR_INVALID_ARG, token)
        return _Placeholder(function, (index,), number)
    if function is Function.SPLIT:
        if len(args) < 2:
            raise _destination_error(ERR_NOT_ENOUGH_ARGS, token)
        if len(args) > 2:
            raise _destination_error(ERR_TOO_MANY_ARGS, token)
        index = _atoi(args[0].strip(" "))
        if index is None or " " in args[1] or "." in args[1]:
            raise _destination_error(ERR_INVALID_ARG, token)
        return _Placeholder(Function.SPLIT, (index,), -1, args[1])
    # random(n)
    if len(args) != 1:
        raise _destination_error(ERR_NOT_ENOUGH_ARGS, token)
    ceiling = _atoi(args[0].strip(" "))
    if ceiling is None or ceiling > _INT32_MAX:
        raise _destination_error(ERR_INVALID_ARG, token)
    return _Placeholder(Function.RANDOM, (), _to_int32(ceiling))


def _subject_info(subject: str) -> tuple[bool, list[str], int, bool]:
    """nats-server's subjectInfo: valid, tokens, number of `*`, ends with `>`."""
    if not subject:
        return False, [], 0, False
    stars, full = 0, False
    tokens = subject.split(".")
    for token in tokens:
        if not token or full:
            return False, [], 0, False
        if token == ">":
            full = True
        elif token == "*":
            stars += 1
    return True, tokens, stars, full


@dataclass(frozen=True, slots=True)
class _Part:
    """A compiled destination token: its function, the source token positions it reads, its arguments."""

    function: Function
    literal: str = ""
    positions: tuple[int, ...] = ()
    number: int = -1
    text: str = ""


@dataclass(frozen=True, slots=True)
class SubjectTransform:
    """`src` -> `dest`, compiled; `apply` gives the mapped subject, None when `src` does not take it."""

    src: str
    dest: str
    src_tokens: tuple[str, ...]
    parts: tuple[_Part, ...]

    @classmethod
    def compile(cls, src: str, dest: str) -> SubjectTransform:
        """nats-server's NewSubjectTransform for a non-empty `dest`; raises TransformError."""
        transform = new_transform(src, dest)
        if transform is None:
            raise TransformError(ERR_INVALID_DESTINATION)
        return transform

    @property
    def is_identity(self) -> bool:
        return self.src == ">" and self.dest == ">"

    def apply(self, subject: str) -> str | None:
        """nats-server's Match: the mapped subject, None for a subject `src` does not match or that has a
        wildcard token (only the identity transform passes those through)."""
        if self.is_identity:
            return subject
        tokens = subject.split(".")
        if any(token in ("", "*", ">") for token in tokens):
            return None
        if self.src != ">" and not subject_matches(self.src, subject):
            return None
        return self._transform(tokens)

    def _transform(self, tokens: list[str]) -> str:
        out: list[str] = []
        last = len(self.parts) - 1
        for i, part in enumerate(self.parts):
            if part.function is Function.LITERAL and part.literal == ">":
                break
            out.append(_render(part, tokens))
            if i < last:
                out.append(".")
        if self.parts[-1].function is Function.LITERAL and self.parts[-1].literal == ">":
            out.append(".".join(tokens[len(self.src_tokens) - 1 :]))
        return "".join(out)


def new_transform(src: str, dest: str) -> SubjectTransform | None:
    """nats-server's NewSubjectTransform: None for an empty `dest` (no transform); raises TransformError."""
    if not dest:
        return None
    src = src or ">"
    src_ok, src_tokens, stars, src_full = _subject_info(src)
    dest_ok, dest_tokens, dest_stars, dest_full = _subject_info(dest)
    if not src_ok or not dest_ok or dest_stars > 0 or src_full != dest_full:
        raise TransformError(ERR_BAD_SUBJECT)
    # the n-th `*` (from 1) -> its token position; any other number reads as position 0, as in Go
    star_positions = {n: i for n, i in enumerate((i for i, t in enumerate(src_tokens) if t == "*"), start=1)}
    parts = []
    for token in dest_tokens:
        placeholder = _parse_placeholder(token)
        function = placeholder.function
        if function is Function.LITERAL:
            parts.append(_Part(Function.LITERAL, literal=token))
        elif function is Function.RANDOM:
            parts.append(_Part(Function.RANDOM, number=placeholder.number))
        elif stars == 0 and not src_full:
            if function is not Function.PARTITION:
                raise _destination_error(ERR_INDEX_OUT_OF_RANGE, token)
            # without wildcards a partition hashes the whole subject, whatever it names
            parts.append(_Part(Function.PARTITION, number=placeholder.number))
        else:
            positions = []
            for wildcard in placeholder.wildcards:
                if wildcard > stars:
                    raise _destination_error(ERR_INDEX_OUT_OF_RANGE, f"{token}: [{wildcard}]")
                positions.append(star_positions.get(wildcard, 0))
            parts.append(_Part(function, "", tuple(positions), placeholder.number, placeholder.text))
    return SubjectTransform(src, dest, tuple(src_tokens), tuple(parts))


def validate_mapping(src: str, dest: str) -> None:
    """nats-server's ValidateMapping (stream, source and mirror transforms); raises TransformError.

    An empty `dest` is valid (it transforms nothing)."""
    if not dest:
        return
    after_full = False
    for token in dest.split("."):
        if not token or after_full:
            raise _destination_error(ERR_INVALID_DESTINATION, token)
        if len(token) > 4 and token.startswith("{{") and token.endswith("}}"):
            if not any(pattern.search(token) for _, pattern in _FUNCTIONS):
                raise _destination_error(ERR_UNKNOWN_FUNCTION, token)
            continue
        if token == ">":
            after_full = True
        elif re.search(_SPACE, token):
            raise TransformError(ERR_INVALID_DESTINATION)
    new_transform(src, dest)


def _fnv1a32(data: bytes) -> int:
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def _bytes(token: str) -> bytes:
    return token.encode("utf-8", "surrogateescape")


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _render(part: _Part, tokens: list[str]) -> str:
    """One destination token for a subject's tokens (it may hold several tokens, dots included)."""
    function = part.function
    if function is Function.LITERAL:
        return part.literal
    if function is Function.WILDCARD:
        position = part.positions[0] if part.positions else len(tokens)
        return tokens[position] if position < len(tokens) else ""
    if function is Function.PARTITION:
        if part.positions:
            key = b"".join(_bytes(tokens[p]) for p in part.positions)
        else:
            key = _bytes(".".join(tokens))
        buckets = part.number & 0xFFFFFFFF  # Go: uint32(n)
        return "0" if part.number == 0 else str(_fnv1a32(key) % buckets)
    if function is Function.RANDOM:
        return "0" if part.number == 0 else str(random.randrange(abs(part.number)))
    token = tokens[part.positions[0]]
    if function is Function.SPLIT:
        return _split(token, part.text)
    return _text(_cut(function, _bytes(token), part.number))


def _cut(function: Function, token: bytes, n: int) -> bytes:
    """The byte-length functions; a size or position out of (0, len) leaves the token whole."""
    size = len(token)
    if not 0 < n < size:
        return token
    if function is Function.LEFT:
        return token[:n]
    if function is Function.RIGHT:
        return token[size - n :]
    if function is Function.SPLIT_FROM_LEFT:
        return token[:n] + b"." + token[n:]
    if function is Function.SPLIT_FROM_RIGHT:
        return token[: size - n] + b"." + token[size - n :]
    if function is Function.SLICE_FROM_LEFT:
        pieces = [token[i : i + n] for i in range(0, size - size % n, n)]
        if size % n:
            pieces.append(token[size - size % n :])
        return b".".join(pieces)
    # sliceFromRight: the short piece first
    remainder = size % n
    pieces = [token[:remainder]] if remainder else []
    pieces += [token[i : i + n] for i in range(remainder, size, n)]
    return b".".join(pieces)


def _split(token: str, separator: str) -> str:
    """strings.Split, then joined as nats-server joins it: no empty pieces, odd dots kept."""
    pieces = list(token) if separator == "" else token.split(separator)
    out = []
    for j, piece in enumerate(pieces):
        if piece:
            out.append(piece)
        if j < len(pieces) - 1 and pieces[j + 1] and not (j == 0 and not piece):
            out.append(".")
    return "".join(out)
