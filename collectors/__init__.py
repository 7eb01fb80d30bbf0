"""Collectors: read replication state from monitored clusters and publish observation records."""
