"""Controlling a running `jetraft local up` from another process, without signals: stop or start one node.

The running command watches `<data-dir>/local-control/requests/`. A client
(`jetraft local stop n2`, `jetraft local start n2`) writes a request there as
`<id>.json` (written under a temporary name, then renamed, so the watcher never
reads half a file); the command carries it out and answers in `<id>.answer.json`.
The command also keeps `<data-dir>/local-control/cluster.json` current: its own
PID, and each node's PID, URLs and whether it runs, so a client can tell whether
a cluster is running there and what it holds.

Files rather than a signal or a socket: nothing to allocate, any tool can use it,
and a request left behind by a dead command is visible, not lost in a pipe.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ACTIONS = ("stop", "kill", "start")


class ControlError(RuntimeError):
    """No running `local up` answered, or the request was refused."""


def control_dir(data_dir: str | Path) -> Path:
    return Path(data_dir) / "local-control"


def _write_atomically(path: Path, body: dict[str, Any]) -> None:
    partial = path.with_name(f".{path.name}.{secrets.token_hex(4)}.partial")
    partial.write_text(json.dumps(body))
    os.replace(partial, path)


@dataclass(frozen=True)
class Request:
    id: str
    action: str
    node: str


class ControlInbox:
    """The running command's side: takes requests in arrival order, answers each, publishes its state."""

    def __init__(self, data_dir: str | Path) -> None:
        self.dir = control_dir(data_dir)
        self.requests = self.dir / "requests"
        self.requests.mkdir(parents=True, exist_ok=True)
        for stale in self.requests.iterdir():  # a previous run's leftovers mean nothing to this one
            stale.unlink(missing_ok=True)

    def take(self) -> list[Request]:
        """The requests waiting, oldest first; each is removed as it is read (answer it with `answer`)."""
        waiting = sorted(
            (p for p in self.requests.glob("*.json") if not p.name.endswith(".answer.json")),
            key=lambda p: p.stat().st_mtime_ns,
        )
        taken = []
        for path in waiting:
            request_id = path.name.removesuffix(".json")
            try:
                body = json.loads(path.read_text())
            except (OSError, ValueError):
                body = {}
            path.unlink(missing_ok=True)
            action, node = body.get("action"), body.get("node")
            if action not in ACTIONS or not isinstance(node, str):
                self.answer(Request(request_id, str(action), str(node)), False, f"bad request {body!r}")
                continue
            taken.append(Request(request_id, action, node))
        return taken

    def answer(self, request: Request, ok: bool, message: str) -> None:
        _write_atomically(self.requests / f"{request.id}.answer.json", {"ok": ok, "message": message})

    def publish_state(self, state: dict[str, Any]) -> None:
        _write_atomically(self.dir / "cluster.json", {"pid": os.getpid(), **state})

    def close(self) -> None:
        (self.dir / "cluster.json").unlink(missing_ok=True)


def read_state(data_dir: str | Path) -> dict[str, Any] | None:
    """What the running command last published, or None when no command runs on `data_dir`."""
    path = control_dir(data_dir) / "cluster.json"
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    try:
        os.kill(int(state["pid"]), 0)
    except (KeyError, ValueError, ProcessLookupError):
        return None  # left by a command that died without cleaning up
    except PermissionError:
        pass
    return state


def send_request(data_dir: str | Path, action: str, node: str, timeout: float = 90.0) -> str:
    """Ask the `local up` running on `data_dir` to stop, kill or start `node`; its answer once done.
    Raises ControlError when none runs there, it refuses, or it does not answer within `timeout`."""
    if action not in ACTIONS:
        raise ControlError(f"unknown action {action!r}")
    if read_state(data_dir) is None:
        raise ControlError(f"no `jetraft local up` is running on {data_dir}")
    requests = control_dir(data_dir) / "requests"
    request_id = f"{time.time_ns()}-{secrets.token_hex(4)}"
    _write_atomically(requests / f"{request_id}.json", {"action": action, "node": node})
    answer_path = requests / f"{request_id}.answer.json"
    deadline = time.monotonic() + timeout
    while not answer_path.exists():  # another process's answer: nothing to await but the file
        if time.monotonic() > deadline or read_state(data_dir) is None:
            raise ControlError(f"no answer from `jetraft local up` on {data_dir} to {action} {node}")
        time.sleep(0.05)
    answer = json.loads(answer_path.read_text())
    answer_path.unlink(missing_ok=True)
    if not answer.get("ok"):
        raise ControlError(str(answer.get("message")))
    return str(answer.get("message"))
