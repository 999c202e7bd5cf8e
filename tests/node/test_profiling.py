"""JETRAFT_PROFILE_DIR: a node process's CPU profile, written when it stops (cluster/node/process_setup.py)."""

from __future__ import annotations

import pstats
from pathlib import Path

import pytest

from cluster.node.process_setup import PROFILE_DIR_ENV, profiled


def _busy() -> int:
    return sum(i * i for i in range(200_000))


def test_a_profile_is_written_per_member_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROFILE_DIR_ENV, str(tmp_path / "prof"))
    with profiled("n1/w0"):
        _busy()
    [written] = (tmp_path / "prof").glob("n1-w0-*.prof")
    functions = {name for _, _, name in pstats.Stats(str(written)).stats}  # type: ignore[attr-defined]
    assert "_busy" in functions


def test_nothing_is_written_unless_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PROFILE_DIR_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    with profiled("n1"):
        _busy()
    assert list(tmp_path.rglob("*.prof")) == []
