"""Subject transforms: `src` -> `dest` as nats-server maps a subject (stream RePublish, and mappings).

The destination's literal tokens are kept, `$N` and `{{wildcard(N)}}` take
the N-th `*` of `src`, a trailing `>` takes what `src`'s `>` matched, and a
destination with no reference sends everything to that literal subject.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from subjects.grammar import is_valid_filter

_MUSTACHE_WILDCARD = re.compile(r"\{\{\s*wildcard\s*\(\s*(\d+)\s*\)\s*\}\}", re.IGNORECASE)
_LEGACY_WILDCARD = re.compile(r"\$(\d+)")
_TAIL = -1  # a destination part standing for what the source's `>` matched


class TransformError(ValueError):
    """A src/dest pair nats-server rejects, or a mapping function jetraft does not implement."""


class UnsupportedMappingError(TransformError):
    """A mapping function nats-server accepts (`{{partition(...)}}`, ...) that jetraft does not implement."""


@dataclass(frozen=True, slots=True)
class SubjectTransform:
    """`src` -> `dest` as nats-server maps a subject; `apply` gives None for a subject `src` does not match."""

    src_tokens: tuple[str, ...]
    # per destination token: a literal, the source token index a wildcard reference takes, or _TAIL
    dest_parts: tuple[str | int, ...]

    @classmethod
    def compile(cls, src: str, dest: str) -> SubjectTransform:
        src = src or ">"
        if not is_valid_filter(src) or not dest:
            raise TransformError(f"invalid transform from '{src}' to '{dest}'")
        src_tokens = tuple(src.split("."))
        star_positions = [i for i, token in enumerate(src_tokens) if token == "*"]
        dest_tokens = dest.split(".")
        if (src_tokens[-1] == ">") != (dest_tokens[-1] == ">"):
            raise TransformError(f"'>' must end both '{src}' and '{dest}' or neither")
        parts: list[str | int] = []
        for position, token in enumerate(dest_tokens):
            if token == ">":
                if position != len(dest_tokens) - 1:
                    raise TransformError(f"'>' is not the last token of '{dest}'")
                parts.append(_TAIL)
                continue
            if token == "*" or not token:
                raise TransformError(f"invalid destination token '{token}' in '{dest}'")
            reference = _wildcard_reference(token)
            if reference is None:
                parts.append(token)
                continue
            if not 1 <= reference <= len(star_positions):
                raise TransformError(f"'{token}' names no wildcard of '{src}'")
            parts.append(star_positions[reference - 1])
        return cls(src_tokens, tuple(parts))

    def apply(self, subject: str) -> str | None:
        src = self.src_tokens
        tokens = subject.split(".")
        if src[-1] == ">":
            if len(tokens) < len(src):
                return None
        elif len(tokens) != len(src):
            return None
        for want, got in zip(src, tokens, strict=False):
            if want == ">":
                break
            if want != "*" and want != got:
                return None
        out = []
        for part in self.dest_parts:
            if isinstance(part, str):
                out.append(part)
            elif part == _TAIL:
                out.extend(tokens[len(src) - 1 :])
            else:
                out.append(tokens[part])
        return ".".join(out)


def _wildcard_reference(token: str) -> int | None:
    """The wildcard number a whole-token reference names, None for a literal token."""
    match = _MUSTACHE_WILDCARD.fullmatch(token) or _LEGACY_WILDCARD.fullmatch(token)
    if match is not None:
        return int(match.group(1))
    if token.startswith("{{") and token.endswith("}}"):
        raise UnsupportedMappingError(f"subject mapping function '{token}' is not supported")
    return None
