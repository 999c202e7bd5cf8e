"""A local SparkSession set up for the jetstream data source (shared by the examples and the benchmark)."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from pipeline.source import JetStreamDataSource


def local_spark_session(master: str = "local[2]", app_name: str = "jetraft-pipeline") -> SparkSession:
    """A SparkSession on 127.0.0.1 whose Python workers run this interpreter, with `jetstream` registered."""
    # Workers must import pipeline/ and pyspark, which live in this interpreter's environment.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Spark otherwise binds to the machine's first non-loopback address.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(JetStreamDataSource)
    return session
