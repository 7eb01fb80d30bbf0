"""Detectors: one replication failure mode per module, pure functions of observations and thresholds.

Each module ends with the `Rule` of every incident type it raises (rule.py; registry.py lists them
all). Where a rule is needed in both places it is held twice: as plain Python (the CLI's predictions,
e.g. `krm check shutdown`, and golden-case tests without a JVM) and as Spark Columns (the alert
projection). One golden-case table in tests drives both, so they cannot drift apart.
"""
