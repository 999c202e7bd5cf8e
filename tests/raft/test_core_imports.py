"""The core is sans-IO: its modules import no I/O, concurrency, clock or global randomness."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

RAFT_DIR = Path(__file__).resolve().parents[2] / "raft"
CORE_MODULES = ("types.py", "core.py", "log_storage.py", "raft_log.py", "progress.py", "read_index.py")
FORBIDDEN = {
    "asyncio",
    "socket",
    "selectors",
    "threading",
    "multiprocessing",
    "concurrent",
    "subprocess",
    "time",
    "datetime",
    "grpc",
    "os",
}


def _imported_modules(tree: ast.Module) -> list[tuple[str, list[str]]]:
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, [alias.name for alias in node.names]))
    return found


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_module_imports_nothing_that_does_io_or_reads_clocks(module: str) -> None:
    tree = ast.parse((RAFT_DIR / module).read_text())
    for name, names in _imported_modules(tree):
        top = name.split(".")[0]
        assert top not in FORBIDDEN, f"raft/{module} imports {name}"
        if top == "random":
            # Only the Random type may be named: randomness comes in as an injected instance.
            assert names in ([], ["Random"]), f"raft/{module} imports {names} from random"
        if top == "raft":
            assert f"{name.split('.')[-1]}.py" in CORE_MODULES, f"raft/{module} imports non-core {name}"


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_module_uses_random_only_as_the_injected_type(module: str) -> None:
    tree = ast.parse((RAFT_DIR / module).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "random":
            assert node.attr == "Random", f"raft/{module} calls random.{node.attr} (global randomness)"


def test_the_import_check_would_catch_a_forbidden_import() -> None:
    tree = ast.parse("import time\nfrom asyncio import sleep\nrandom.random()\n")
    assert {name for name, _ in _imported_modules(tree)} == {"time", "asyncio"}
