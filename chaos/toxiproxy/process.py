"""The embedded Toxiproxy server as a child process on 127.0.0.1, started and stopped by PID.

For tests, `jetraft local up --toxiproxy` and the demo: the child prints one
JSON line `{"event": "ready", "url": ..., "port": ...}` on stdout once its API
answers, so nobody has to poll or guess a port.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

from chaos.toxiproxy.server import DEFAULT_HOST

READY_TIMEOUT = 20.0


class ToxiproxyProcessError(RuntimeError):
    """The child exited, or did not say it was ready in time."""


class ToxiproxyProcess:
    """`jetraft toxiproxy` as a subprocess; `port=0` lets it pick a free port (see `port`/`url` after start)."""

    def __init__(
        self,
        host: str = DEFAULT_HOST,
        port: int = 0,
        seed: int | None = None,
        log_path: str | Path | None = None,
        extra_args: list[str] | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self._seed = seed
        self._log_path = Path(log_path) if log_path is not None else None
        self._extra_args = extra_args or []
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise ToxiproxyProcessError("not started")
        return self._proc.pid

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "chaos.toxiproxy_cli", "--host", self.host, "--port", str(self.port)]
        if self._seed is not None:
            cmd += ["--seed", str(self._seed)]
        return cmd + self._extra_args

    def start(self, timeout: float = READY_TIMEOUT) -> None:
        stderr = open(self._log_path, "ab") if self._log_path is not None else subprocess.DEVNULL  # noqa: SIM115
        try:
            self._proc = subprocess.Popen(
                self.command(), stdout=subprocess.PIPE, stderr=stderr, start_new_session=True
            )
        finally:
            if self._log_path is not None:
                stderr.close()  # type: ignore[union-attr]
        try:
            ready = self._read_ready_line(timeout)
        except BaseException:
            self.kill()
            raise
        self.port = int(ready["port"])

    def _read_ready_line(self, timeout: float) -> dict[str, object]:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        deadline = time.monotonic() + timeout
        buffered = b""
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ToxiproxyProcessError(f"toxiproxy (pid {proc.pid}) not ready after {timeout}s")
                if not selector.select(remaining):
                    continue
                data = os.read(proc.stdout.fileno(), 4096)
                if not data:
                    raise ToxiproxyProcessError(
                        f"toxiproxy exited with code {proc.wait()} before it was ready"
                    )
                buffered += data
                while b"\n" in buffered:
                    line, buffered = buffered.split(b"\n", 1)
                    with contextlib.suppress(ValueError):
                        event = json.loads(line)
                        if isinstance(event, dict) and event.get("event") == "ready":
                            return event

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM, then SIGKILL if it has not exited within `timeout` seconds."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close_pipe()

    def kill(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        self._close_pipe()

    def _close_pipe(self) -> None:
        if self._proc is not None and self._proc.stdout is not None:
            self._proc.stdout.close()

    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def __enter__(self) -> ToxiproxyProcess:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
