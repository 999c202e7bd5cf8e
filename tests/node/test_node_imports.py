"""What a node process imports before it serves: it keeps rich out (cluster/node/process_setup.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

# The node's own entry point run as `python -m cluster.node.command --help` would (its `__main__` blocks
# included), stopped by argparse's exit after every module-level import; then what it imported.
_RUN_NODE_COMMAND = """
import runpy, sys
sys.argv = ["cluster.node.command", "--help"]
try:
    runpy.run_module("cluster.node.command", run_name="__main__")
except SystemExit:
    pass
import structlog.dev
print("rich:", sys.modules.get("rich", "absent"), "structlog.dev.rich:", structlog.dev.rich)
"""


@pytest.mark.skipif(importlib.util.find_spec("rich") is None, reason="rich is not installed here")
def test_a_node_process_leaves_rich_unimported_although_installed() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _RUN_NODE_COMMAND], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.splitlines()[-1] == "rich: None structlog.dev.rich: None"
