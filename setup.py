"""Compiles jetraft's hot-path modules with mypyc at install time, when it can; pyproject.toml says the rest.

The modules are pyproject.toml's `[tool.jetraft] mypyc-modules` (bench/compiled_bench.py measures them).
Each one stays plain Python as well: without mypyc or a C compiler, when compiling fails, or with
JETRAFT_COMPILE=0 in the environment, jetraft installs and runs as Python and this says so on stderr.
An editable install (`pip install -e .`, `make install`) puts the compiled `.so` files beside the
sources, where they are loaded instead of the `.py` files: `make compile` rebuilds them after an edit,
`make uncompile` removes them (docs/compiled.md).
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def _say(message: str) -> None:
    print(f"jetraft setup: {message}", file=sys.stderr, flush=True)


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"


def _module_files() -> dict[str, list[str]]:
    """The modules to compile as source paths, grouped by top package (one shared library per group)."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        names = tomllib.load(file)["tool"]["jetraft"]["mypyc-modules"]
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(name.split(".")[0], []).append(name.replace(".", "/") + ".py")
    return groups


def _compiled_in_tree() -> list[Path]:
    """Every compiled module and shared library beside the sources, from this build or an earlier one
    (of a module since taken off the list too: its .so would still be loaded instead of its source)."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        includes = tomllib.load(file)["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = [pattern.rstrip("*") for pattern in includes]
    return [binary for package in packages for binary in (ROOT / package).rglob("*.so")]


def _as_python(reason: str) -> list[Any]:
    # An earlier build's .so files would be loaded instead of the sources this build leaves as Python.
    stale = _compiled_in_tree()
    for binary in stale:
        binary.unlink()
    removed = f" (removed {len(stale)} compiled files an earlier build left beside the sources)" if stale else ""
    _say(f"{reason}: installing the hot-path modules as plain Python{removed}")
    return []


def _compiled_extensions() -> list[Any]:
    if os.environ.get("JETRAFT_COMPILE", "1") == "0":
        return _as_python("JETRAFT_COMPILE=0")
    try:
        from mypyc.build import mypycify
    except ImportError:
        return _as_python("mypyc is not installed")
    groups = _module_files()
    files = [path for paths in groups.values() for path in paths]
    try:
        return mypycify(
            # Imports outside the compiled modules are followed for their types only; packages without
            # type information (rocksdict) are Any to the compiler.
            ["--ignore-missing-imports", "--follow-imports=silent", *files],
            opt_level="3",
            # one shared library per package, inside it (e.g. storage/native__mypyc.*.so), so an editable
            # install finds it the way it finds the package's modules
            separate=[(paths, f"{package}.native") for package, paths in groups.items()],
        )
    except BaseException as exc:  # mypyc exits through SystemExit when the code does not type-check
        return _as_python(f"mypyc could not compile the hot-path modules ({_first_line(exc)})")


class OptionalBuildExt(build_ext):
    """Builds the compiled modules, or, if the compiler fails, leaves all of them plain Python."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:
            self._remove_built()
            _say(f"compiling the hot-path modules failed ({_first_line(exc)}): installing them as plain Python")
            return
        if self.extensions:
            if self.inplace or getattr(self, "editable_mode", False):
                self._date_in_tree()
            _say(f"compiled {len(self.extensions)} extension modules with mypyc")

    def _date_in_tree(self) -> None:
        built = {ROOT / self.get_ext_filename(extension.name) for extension in self.extensions}
        for binary in _compiled_in_tree():
            if binary not in built:  # a module taken off the list since an earlier build
                binary.unlink()
            else:
                # Dated now, not copied with the date it was first built (an unchanged module is not
                # rebuilt): tests/test_compiled.py takes a source newer than its compiled module for an
                # edit not compiled.
                binary.touch()

    def _remove_built(self) -> None:
        # Some modules compiled and others not would mix native calls into a library that is not there.
        for extension in self.extensions:
            Path(self.get_ext_fullpath(extension.name)).unlink(missing_ok=True)
        for binary in _compiled_in_tree():
            binary.unlink()


setup(ext_modules=_compiled_extensions(), cmdclass={"build_ext": OptionalBuildExt})
