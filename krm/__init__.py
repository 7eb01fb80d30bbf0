"""kafka-replication-monitor: CLI, configuration and the local test cluster."""
