"""How hard a collector with a wrong password hits the brokers: refused SCRAM logins counted in the
brokers' own logs over a window, with krm's back-off after an access failure (collectors/access.py:
5, 10, 20, 40, then every 60 s) and, for comparison, with it disabled (a new attempt at every poll).

Runs the collector's own poll (collectors/admin.py), one poll a second, against a real local cluster
started with `--security sasl_ssl` and the wrong password.

Usage: .venv/bin/python benchmarks/access_backoff.py [--seconds 20] [--mode kraft|zk]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path


from collectors import access
from collectors.admin import AdminSource
from foundation.backoff import Backoff
from foundation.config import CollectorConfig, load_config
from lab.local_cluster import LocalCluster


def refused(cluster: LocalCluster) -> int:
    return sum((cluster.root / f"broker-{b}" / "logs" / "server.log").read_text(errors="replace")
               .count("invalid credentials with SASL mechanism") for b in cluster.broker_ids)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--mode", choices=["kraft", "zk"], default="kraft")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        cluster = LocalCluster(root=Path(tmp) / "c", mode=args.mode, brokers=3, security="sasl_ssl").up()
        try:
            wrong = Path(tmp) / "wrong.password"
            wrong.write_text("not-the-password\n")
            os.chmod(wrong, 0o600)
            good = load_config(cluster.config_path).clusters[0]
            bad = good.model_copy(update={"security": good.security.model_copy(
                update={"sasl_password_file": wrong, "sasl_password_env": None})})
            print(f"Kafka {cluster.kafka_version} {args.mode}, SASL_SSL, 3 brokers; one poll a second for "
                  f"{args.seconds:.0f}s with a wrong password")
            for label, policy in (("krm (back-off)", access.ACCESS_BACKOFF), ("retry at every poll", Backoff(0.0, 0.0))):
                access.ACCESS_BACKOFF = policy
                src = AdminSource(bad, CollectorConfig())
                before, t0 = refused(cluster), time.monotonic()
                polls = 0
                while time.monotonic() - t0 < args.seconds:
                    src.poll()
                    polls += 1
                    time.sleep(1.0)
                src.close()
                time.sleep(1.0)
                print(f"  {label:22s} {polls:3d} polls, {refused(cluster) - before:3d} refused logins on the brokers")
        finally:
            cluster.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
