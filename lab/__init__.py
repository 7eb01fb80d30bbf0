"""krm's lab: what it takes to try and test krm, apart from the product.

Real local Kafka clusters in every mode and security setting (local_cluster, local_security, local_kdc,
local_oauth, packet_filter), the cluster model that publishes observations at any size (simulate), the
demo, the clients' judge of harm (client_judge), and what the tests and the benchmarks share (harness:
driving a cluster and krm; fuzz_records: hostile observation records). The lab, the tests and the benchmarks import the
product; the product (krm, collectors, pipelines, schemas, foundation) never imports the lab, which
import-linter holds (pyproject.toml). Its commands reach `krm` through the `krm.commands` entry point
(lab/commands.py).
"""
