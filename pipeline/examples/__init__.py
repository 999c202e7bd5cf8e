"""Example pipelines built on the jetstream data source (`python -m pipeline.examples.<name> --help`)."""
