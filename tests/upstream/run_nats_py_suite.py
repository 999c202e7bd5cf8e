"""Run nats-py's own JetStream and micro-service tests against nats-server and against a one-node jetraft.

    python tests/upstream/run_nats_py_suite.py [--suite /tmp/nats.py] [--server both] [-k EXPR]

The suite is nats-py's checkout (tag v2.15.0, fetched by hand: see tests/upstream/README.md). Its
harness starts `nats-server` from PATH on the fixed ports 4222/8222; for jetraft, PATH starts with a
`nats-server` that runs nats_server_shim.py. Each run happens in its own network namespace when
`unshare` allows it, so the fixed ports clash with nothing else on the machine. Prints the pass counts,
every test that does not pass on jetraft with its first error line, and the shim's notices.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEST_FILES = ("nats/tests/test_js.py", "nats/tests/test_micro_service.py")
# every test module of the suite (`--files all`): the core client's tests beside the JetStream ones
ALL_FILES = "all"


def isolation_prefix() -> list[str]:
    """A fresh network namespace with only loopback up, if this machine lets us make one."""
    unshare = ["unshare", "--net"] + ([] if os.geteuid() == 0 else ["--map-root-user"])
    probe = subprocess.run([*unshare, "ip", "link", "set", "lo", "up"], capture_output=True)
    if probe.returncode != 0:
        print("note: no network namespace (unshare failed); ports 4222/8222 must be free", file=sys.stderr)
        return []
    return [*unshare, "sh", "-c", 'ip link set lo up && exec "$0" "$@"']


def server_bin_dir(server: str, work: Path, nats_server: Path) -> Path:
    bin_dir = work / "bin"
    bin_dir.mkdir()
    target = bin_dir / "nats-server"
    if server == "jetraft":
        target.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{HERE / "nats_server_shim.py"}" "$@"\n')
        target.chmod(0o755)
    else:
        target.symlink_to(nats_server)
    return bin_dir


def run_suite(server: str, args: argparse.Namespace, work: Path) -> dict[str, tuple[str, str]]:
    """Runs pytest once; returns test id -> (outcome, first line of its failure)."""
    work.mkdir(parents=True)
    env = dict(os.environ)
    env.pop("DEBUG_NATS_TEST", None)
    env["PATH"] = f"{server_bin_dir(server, work, args.nats_server)}:{env['PATH']}"
    # the client of the same tag as its tests; a PYTHONPATH already set (e.g. aiofiles) goes after it
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(args.suite / "nats/src"), env.get("PYTHONPATH")]))
    env["JETRAFT_SHIM_LOG"] = str(work / "shim-notices.log")
    env["JETRAFT_SHIM_SCRATCH"] = str(work)
    junit = work / "junit.xml"
    cmd = [
        *args.isolation, sys.executable, "-m", "pytest", *args.files, "-p", "no:cacheprovider", "-q",
        # test_js.py uses unittest.mock without importing it: upstream, test_client.py imports it first
        "-p", "unittest.mock",
        f"--timeout={args.test_timeout}", f"--junitxml={junit}", *(["-k", args.k] if args.k else []),
        *args.pytest_args,
    ]  # fmt: skip
    print(f"== {server}: {shlex.join(cmd)}", flush=True)
    with open(work / "pytest.log", "w") as out:
        proc = subprocess.Popen(cmd, cwd=args.suite, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
        try:
            proc.wait(timeout=args.wall)
        except subprocess.TimeoutExpired:
            print(f"== {server}: wall-clock limit {args.wall}s reached, run stopped", flush=True)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    print(f"== {server}: pytest exit {proc.returncode}, log {work / 'pytest.log'}", flush=True)
    return read_junit(junit) if junit.exists() else {}


def read_junit(path: Path) -> dict[str, tuple[str, str]]:
    results = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        test_id = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            element = case.find(tag)
            if element is not None:
                outcome = {"failure": "failed"}.get(tag, tag)
                message = (element.get("message") or element.text or "").strip().splitlines()[0:1]
                message = message[0][:160] if message else ""
                break
        results[test_id] = (outcome, message)
    return results


def summary(name: str, results: dict[str, tuple[str, str]]) -> str:
    counts = Counter(outcome for outcome, _ in results.values())
    parts = ", ".join(f"{counts[o]} {o}" for o in ("failed", "error", "skipped") if counts[o])
    return f"{name}: {counts['passed']}/{len(results)} passed" + (f" ({parts})" if parts else "")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--suite", type=Path, default=Path("/tmp/nats.py"), help="nats.py checkout (v2.15.0)")
    parser.add_argument("--server", choices=("both", "jetraft", "nats-server"), default="both")
    parser.add_argument("--nats-server", type=Path, default=Path(sys.executable).parent / "nats-server",
                        help="the reference binary (default: the venv's)")  # fmt: skip
    parser.add_argument("--test-timeout", type=int, default=60, help="pytest-timeout per test, seconds")
    parser.add_argument("--wall", type=int, default=1800, help="wall-clock limit per run, seconds")
    parser.add_argument("--out", type=Path, help="keep logs and junit XML here (default: a temp dir)")
    parser.add_argument("-k", help="pytest -k expression")
    parser.add_argument("--files", default=",".join(TEST_FILES),
                        help=f"comma-separated test files of the suite, or '{ALL_FILES}' for nats/tests/test_*.py "
                        "(default: the JetStream and micro-service files)")  # fmt: skip
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args()
    args.suite = args.suite.resolve()
    if not all((args.suite / f).is_file() for f in TEST_FILES):
        parser.error(f"{args.suite} holds no nats-py test suite; see tests/upstream/README.md")
    if args.files == ALL_FILES:
        args.files = sorted(str(p.relative_to(args.suite)) for p in (args.suite / "nats/tests").glob("test_*.py"))
    else:
        args.files = args.files.split(",")
        missing = [f for f in args.files if not (args.suite / f).is_file()]
        if missing:
            parser.error(f"not in the suite: {', '.join(missing)}")
    # The harness prefers these paths to PATH; either would bypass the shim.
    for shadow in (Path.home() / "nats-server" / "nats-server", args.suite / "nats/tests/nats-server"):
        if shadow.is_file():
            parser.error(f"{shadow} exists and would be run instead of the server on PATH")
    args.isolation = isolation_prefix()
    out = args.out or Path(tempfile.mkdtemp(prefix="nats-py-suite-"))
    servers = ("nats-server", "jetraft") if args.server == "both" else (args.server,)
    results = {}
    for server in servers:
        results[server] = run_suite(server, args, out / server)
        shutil.rmtree(out / server / "bin")
        for scratch in (out / server).glob("jetraft-shim-*"):
            shutil.rmtree(scratch, ignore_errors=True)
    print()
    for server in servers:
        print(summary(server, results[server]))
    if "jetraft" in results:
        reference = results.get("nats-server", {})
        failing = {t: r for t, r in results["jetraft"].items() if r[0] != "passed"}
        print(
            f"\njetraft: {len(failing)} not passing"
            + (" (nats-server outcome in brackets)" if reference else "")
        )
        for test_id, (outcome, message) in sorted(failing.items()):
            ref = f" [{reference.get(test_id, ('not run', ''))[0]}]" if reference else ""
            print(f"  {outcome:7} {test_id}{ref}\n          {message}")
        notices = out / "jetraft" / "shim-notices.log"
        if notices.exists():
            print("\nshim notices (settings jetraft did not get), times seen:")
            for notice, count in Counter(notices.read_text().splitlines()).most_common():
                print(f"  {count:4}  {notice}")
    print(f"\nlogs and junit XML: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
