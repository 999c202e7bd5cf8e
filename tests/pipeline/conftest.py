"""Fixtures for the pipeline tests: JetStream targets (server factory) and one local Spark session.

Every test talks to the target through its `servers` URLs only, so the same
tests run against nats-server (default) or jetraft:
JETRAFT_PIPELINE_TARGET=jetraft .venv/bin/python -m pytest tests/pipeline
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pipeline.servers import TARGET_ENV, JetStreamTarget, NatsServerProcesses, start_target


@pytest.fixture(scope="session")
def target_kind() -> str:
    # jetraft by default: the data source is tested against what we ship; set
    # JETRAFT_PIPELINE_TARGET=nats-server to check it against the reference server.
    return os.environ.get(TARGET_ENV, "jetraft")


@pytest.fixture(scope="session")
def single_target(target_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JetStreamTarget]:
    target = start_target(target_kind, 1, tmp_path_factory.mktemp("single"))
    try:
        yield target
    finally:
        target.stop()


@pytest.fixture(scope="session")
def cluster_target(target_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JetStreamTarget]:
    target = start_target(target_kind, 3, tmp_path_factory.mktemp("cluster"))
    try:
        yield target
    finally:
        target.stop()


@pytest.fixture
def core_nats(tmp_path: Path) -> Iterator[str]:
    """A nats-server without JetStream, for fake responders that play an old or odd JetStream server."""
    processes = NatsServerProcesses(1, tmp_path / "core")
    processes.start(jetstream=False)
    try:
        yield processes.target().urls[0]
    finally:
        processes.stop()


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("PySpark needs a Java 17 runtime: install openjdk-17-jre-headless or set JAVA_HOME")
    # Spark's Python workers must import the project and pyspark, so they run this same interpreter.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # Keep Spark's driver, block manager and workers on loopback (it otherwise picks the machine's address).
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    from pipeline import JetStreamDataSource

    session = (
        SparkSession.builder.master("local[2]")
        .appName("jetraft-pipeline-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(JetStreamDataSource)
    try:
        yield session
    finally:
        session.stop()
