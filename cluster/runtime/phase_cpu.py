"""Where a node's loop thread spends its CPU, phase by phase, under a real load (a development tool).

cProfile inflates call-heavy Python about fourfold and cannot see inside the mypyc-compiled modules;
py-spy's wall-clock samples charge a function for the time its thread waited for a core. This counts
what each phase really costs: `JETRAFT_PHASE_CPU_DIR=<dir>` in a node's environment (it reaches
every node and worker a benchmark starts) wraps a fixed set of synchronous methods on the hot paths
with the thread's CPU clock and times the garbage collector's passes, and a daemon thread writes
`<dir>/<member>-<pid>.json` every second (and once more at exit): for each phase its calls and the CPU
spent inside it, and the loop thread's CPU in all. Phases nest (a client's publish runs inside the handling of its commands), so
their times are inclusive and do not add up. `bench/phase_cpu.py` reads two of these files around
a benchmark's measuring window and prints CPU per operation by node and phase.

Off unless asked: nothing is wrapped without the variable. Each wrapped call costs about 1 us on this
VM (two reads of the thread's CPU clock, a system call each, and the wrapper's own call).
"""

from __future__ import annotations

import atexit
import functools
import gc
import importlib
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

PHASE_CPU_DIR_ENV = "JETRAFT_PHASE_CPU_DIR"
# more phases for one investigation, without editing PHASES: `module:function` or `module:Class.method`,
# comma-separated, each reported under that name
PHASE_CPU_EXTRA_ENV = "JETRAFT_PHASE_CPU_EXTRA"
WRITE_INTERVAL_S = 1.0

# (phase, module, class or None for a module function, attribute). Each a synchronous function of a
# module that is not compiled with mypyc (a compiled class's methods cannot be replaced).
PHASES: tuple[tuple[str, str, str | None, str], ...] = (
    # a client's commands: parse, route, and what routing runs at once (a proposal, a local answer)
    ("client_commands", "gateway.connection", "ClientConnection", "_drain_slice"),
    ("client_flush", "gateway.output", "OutputFlusher", "flush"),
    ("stream_publish", "cluster.stream.leader", "StreamLeader", "_on_publish"),
    ("stream_puback", "cluster.stream.leader", "StreamLeader", "_published"),
    ("direct_get", "cluster.direct_get.responder", "DirectGetResponder", "_on_request"),
    ("raft_propose", "raft.driver", "RaftHost", "_hand_proposals"),
    ("raft_log_append", "raft.driver", "RaftHost", "_stage"),
    ("raft_apply", "raft.driver", "RaftHost", "_apply"),
    ("raft_frame_build", "raft.transport", "RaftTransport", "_build_frame"),
    ("raft_decode", "raft.transport", None, "message_from_pb"),
    ("raft_deliver", "raft.driver", "RaftHost", "_deliver"),
    ("route_receive", "gateway.routes", "RouteMesh", "_deliver_messages"),
    ("route_frame_build", "gateway.routes", "_PeerLink", "_next_frame"),
)


class PhaseClock:
    """Calls and thread CPU per phase; updated on the loop thread, read by the writer thread."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.cpu_ns: dict[str, int] = {}
        self._loop_thread = threading.get_ident()

    def wrap(self, phase: str, function: Callable[..., Any]) -> Callable[..., Any]:
        clock = time.thread_time_ns
        calls, cpu_ns = self.calls, self.cpu_ns
        calls[phase] = 0
        cpu_ns[phase] = 0

        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = clock()
            try:
                return function(*args, **kwargs)
            finally:
                cpu_ns[phase] += clock() - started
                calls[phase] += 1

        return timed

    def watch_collector(self) -> None:
        """Count the garbage collector's passes on the loop thread as the phases `gc0`, `gc1` and `gc2`
        (by generation): a pass runs inside whichever phase allocated when it came due, so its CPU is in
        that phase's too."""
        clock = time.thread_time_ns
        loop_thread = self._loop_thread
        started = [0]
        for generation in range(3):
            self.calls[f"gc{generation}"] = 0
            self.cpu_ns[f"gc{generation}"] = 0

        def on_collection(phase: str, info: dict[str, int]) -> None:
            if threading.get_ident() != loop_thread:
                return
            if phase == "start":
                started[0] = clock()
                return
            name = f"gc{info['generation']}"
            self.cpu_ns[name] += clock() - started[0]
            self.calls[name] += 1

        gc.callbacks.append(on_collection)

    def report(self) -> dict[str, Any]:
        loop_clock = time.pthread_getcpuclockid(self._loop_thread)
        return {
            "pid": os.getpid(),
            "wall_s": time.monotonic(),
            "loop_thread_cpu_ns": time.clock_gettime_ns(loop_clock),
            "process_cpu_ns": time.process_time_ns(),
            "phases": {
                phase: {"calls": self.calls[phase], "cpu_ns": self.cpu_ns[phase]} for phase in self.calls
            },
        }


def extra_phases(env: Mapping[str, str]) -> list[tuple[str, str, str | None, str]]:
    """The phases $JETRAFT_PHASE_CPU_EXTRA names (`cluster.stream.leader:prepare_publish`,
    `gateway.router:Router.publish`); a malformed name stops the node at start, not halfway."""
    phases = []
    for spec in filter(None, (part.strip() for part in env.get(PHASE_CPU_EXTRA_ENV, "").split(","))):
        module_name, sep, qualified = spec.partition(":")
        class_name, dot, attribute = qualified.rpartition(".")
        if not sep or not module_name or not attribute or qualified.count(".") > 1:
            raise ValueError(f"{PHASE_CPU_EXTRA_ENV}: {spec!r} is not module:function or module:Class.method")
        phases.append((spec, module_name, class_name if dot else None, attribute))
    return phases


def install_phase_clock(member: str) -> PhaseClock | None:
    """Wrap the phases and start writing reports when $JETRAFT_PHASE_CPU_DIR is set (call it on the
    thread that will run the event loop, before the node is built); otherwise do nothing."""
    directory = os.environ.get(PHASE_CPU_DIR_ENV)
    if not directory:
        return None
    clock = PhaseClock()
    for phase, module_name, class_name, attribute in (*PHASES, *extra_phases(os.environ)):
        owner: Any = importlib.import_module(module_name)
        if class_name is not None:
            owner = getattr(owner, class_name)
        setattr(owner, attribute, clock.wrap(phase, getattr(owner, attribute)))
    clock.watch_collector()
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    target = path / f"{member.replace('/', '-')}-{os.getpid()}.json"

    def write() -> None:
        partial = target.with_suffix(".tmp")
        partial.write_text(json.dumps(clock.report()))
        partial.replace(target)  # a reader never sees half a report

    def keep_writing() -> None:
        while True:
            time.sleep(WRITE_INTERVAL_S)
            write()

    threading.Thread(target=keep_writing, name="phase-cpu-writer", daemon=True).start()
    atexit.register(write)
    return clock
