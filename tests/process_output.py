"""Reading a child process's stdout in tests: its lines up to a marker, bounded by time."""

from __future__ import annotations

import os
import selectors
import subprocess
import time


def read_lines_until(proc: subprocess.Popen[bytes], marker: str, timeout: float) -> list[str]:
    """`proc`'s stdout lines up to and including the line `marker` (`jetraft local up` prints its URLs,
    then `ready`); fails if it exits first or says nothing more within `timeout` seconds."""
    assert proc.stdout is not None
    lines: list[str] = []
    buffered = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while marker not in lines:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no {marker!r} after {timeout}s; said {lines}"
            if not selector.select(remaining):
                continue
            data = os.read(proc.stdout.fileno(), 4096)
            assert data, f"exited with {proc.wait()} before {marker!r}; said {lines}"
            buffered += data
            *complete, buffered = buffered.split(b"\n")
            lines += [line.decode() for line in complete]
    return lines
