"""kafka-replication-monitor: the `krm` CLI on top of the collectors and the pipeline, and its lab
(local clusters, their security, the simulator, the demo)."""
