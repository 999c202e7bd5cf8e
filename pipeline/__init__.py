"""PySpark data source and sink for JetStream streams (`spark.dataSource.register(JetStreamDataSource)`)."""

try:
    from pipeline.source import JetStreamDataSource
except ModuleNotFoundError as exc:  # pyspark, pyarrow and nats-py come with the extra, not with nodes
    if exc.name is None or exc.name.split(".")[0] == "pipeline":
        raise
    raise ModuleNotFoundError(
        f"jetraft's Spark pipeline needs the 'spark' extra ({exc.name} is not installed): "
        "pip install 'jetraft[spark]'",
        name=exc.name,
    ) from exc

__all__ = ["JetStreamDataSource"]
