"""kafka-replication-monitor: the product's top floor — the `krm` CLI, the runner that joins the
collectors and the pipeline, the console and the operators' commands. The lab (local clusters, the
simulator, the demo) is a package of its own above it (lab/), which this one never imports."""
