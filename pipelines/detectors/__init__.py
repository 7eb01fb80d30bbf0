"""Detectors: one replication failure mode per module, pure functions of observations and thresholds.

Each module holds the rule twice when it is needed in both places: as plain Python (for the CLI's
predictions and for golden-case tests without a JVM) and as Spark Columns (for the pipeline). One
golden-case table in tests drives both, so they cannot drift apart.
"""
