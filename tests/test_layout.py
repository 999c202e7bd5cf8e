"""The layout rules `lint-imports` cannot check: every package is under its contracts, and no folder
grows past 20 modules (a folder that does holds more than one concept)."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MAX_MODULES_PER_FOLDER = 20


def _config() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def _installed_packages() -> set[str]:
    include = _config()["tool"]["setuptools"]["packages"]["find"]["include"]
    return {pattern.rstrip("*") for pattern in include}


def test_every_installed_package_is_under_the_import_contracts() -> None:
    linter = _config()["tool"]["importlinter"]
    assert set(linter["root_packages"]) == _installed_packages()
    acyclic = next(c for c in linter["contracts"] if c["type"] == "acyclic_siblings")
    assert set(acyclic["ancestors"]) == _installed_packages()
    layers = next(c for c in linter["contracts"] if c["id"] == "layers")
    layered = {name.strip() for layer in layers["layers"] for name in layer.split("|")}
    assert layered == _installed_packages()


def test_every_folder_of_cluster_is_a_layer_of_its_contract() -> None:
    rooms = next(c for c in _config()["tool"]["importlinter"]["contracts"] if c["id"] == "cluster-rooms")
    layered = {name.strip() for layer in rooms["layers"] for name in layer.split("|")}
    folders = {p.parent.name for p in (REPO / "cluster").glob("*/__init__.py")}
    assert layered == folders
    assert not [p.name for p in (REPO / "cluster").glob("*.py") if p.name != "__init__.py"], (
        "cluster/ holds folders only: a module belongs in the room of its concept"
    )


def test_no_folder_holds_more_than_20_modules() -> None:
    crowded = {}
    for package in _installed_packages():
        for init in (REPO / package).rglob("__init__.py"):
            modules = [p for p in init.parent.glob("*.py") if p.name != "__init__.py"]
            if len(modules) > MAX_MODULES_PER_FOLDER:
                crowded[str(init.parent.relative_to(REPO))] = len(modules)
    assert not crowded, crowded
