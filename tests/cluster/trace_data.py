"""Reading the shared nats-py <-> nats-server wire traces from tests.

The traces are the compatibility reference: real nats-py <-> nats-server 2.15
sessions, kept in tests/traces/ (copied from the team's shared traces so a
clean clone, as CI runs it, has them). Tests pull
requests and responses out of them by the `# ---` marker that introduces a
call, so expectations are the real server's bytes, not hand-copied ones.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TRACES = Path(__file__).resolve().parents[1] / "traces"


def trace_lines(name: str) -> list[str]:
    return (TRACES / name).read_text().split("\n")


def section(name: str, marker: str) -> list[str]:
    """The lines after the first `# --- ` line containing `marker`, up to the next `# --- `."""
    lines = trace_lines(name)
    for i, line in enumerate(lines):
        if line.startswith("# --- ") and marker in line:
            out = []
            for following in lines[i + 1 :]:
                if following.startswith("# --- "):
                    break
                out.append(following)
            return out
    raise LookupError(f"no section {marker!r} in {name}")


def client_json(name: str, marker: str) -> bytes:
    """The JSON payload the client sent in that section (first `C: {` line)."""
    for line in section(name, marker):
        if re.match(r"C2?: \{", line):
            return line.split(": ", 1)[1].encode()
    raise LookupError(f"no client JSON in {marker!r}")


def server_json(name: str, marker: str) -> bytes:
    """The JSON payload the server answered with in that section (first `S: {` line), as bytes."""
    for line in section(name, marker):
        if re.match(r"S2?: \{", line):
            return line.split(": ", 1)[1].encode()
    raise LookupError(f"no server JSON in {marker!r}")


def server_obj(name: str, marker: str) -> dict[str, Any]:
    return json.loads(server_json(name, marker))


@dataclass
class Reply:
    """One MSG/HMSG the server sent: header block (None for MSG) and payload, as on the wire."""

    header: bytes | None
    payload: bytes


def server_replies(name: str, marker: str) -> list[Reply]:
    """Every MSG/HMSG in the section, rebuilt into bytes from the trace's one-line-per-wire-line form."""
    lines = section(name, marker)
    replies: list[Reply] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        match = re.match(r"(S2?: )(H?MSG) (.*)$", line)
        if not match:
            i += 1
            continue
        prefix, kind, args = match.group(1), match.group(2), match.group(3).split()
        i += 1
        if kind == "HMSG":
            header_len, total_len = int(args[-2]), int(args[-1])
            header_lines = []
            while True:
                text = lines[i][len(prefix) :] if lines[i] != prefix.rstrip() else ""
                i += 1
                header_lines.append(text)
                if text == "":
                    break
            header = "\r\n".join(header_lines).encode() + b"\r\n"
            assert len(header) == header_len, (header, header_len)
            payload_len = total_len - header_len
        else:
            header = None
            payload_len = int(args[-1])
        payload = b""
        if payload_len:
            payload = lines[i][len(prefix) :].encode()
            i += 1
            assert len(payload) == payload_len
        replies.append(Reply(header, payload))
    return replies


def all_server_errors() -> list[dict[str, Any]]:
    """Every JetStream error object any server response in any trace carries."""
    errors = []
    for path in sorted(TRACES.glob("*.txt")):
        for line in path.read_text().split("\n"):
            if re.match(r"S2?: \{", line):
                body = json.loads(line.split(": ", 1)[1])
                if "error" in body:
                    errors.append(body["error"])
    return errors


def client_request(name: str, marker: str) -> tuple[str, bytes]:
    """(subject, payload) of the first PUB/HPUB to a `$JS.` subject in the section."""
    lines = section(name, marker)
    for i, line in enumerate(lines):
        match = re.match(r"C2?: H?PUB (\$JS\.\S+) (?:\S+ )?(\d+)$", line)
        if match:
            size = int(match.group(2))
            payload = lines[i + 1].split(": ", 1)[1].encode() if size else b""
            assert len(payload) == size
            return match.group(1), payload
    raise LookupError(f"no request in {marker!r}")


def header_value(reply: Reply, name: str) -> str:
    assert reply.header is not None
    for line in reply.header.decode().split("\r\n"):
        if line.startswith(name + ": "):
            return line.split(": ", 1)[1]
    raise LookupError(name)
