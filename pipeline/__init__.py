"""PySpark data source and sink for JetStream streams (`spark.dataSource.register(JetStreamDataSource)`)."""

from pipeline.source import JetStreamDataSource

__all__ = ["JetStreamDataSource"]
