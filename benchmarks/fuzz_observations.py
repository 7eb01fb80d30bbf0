"""Hostile input at scale: N hypothesis cases (lab/fuzz_records.py) through the Python schema check,
then a sample of them through Spark's ingest (parse -> valid / quarantine) with the counts checked.

    .venv/bin/python benchmarks/fuzz_observations.py --cases 100000 --spark-sample 5000

Prints one JSON line: cases, crashes (exceptions other than the check's SchemaError), accepted /
rejected counts per strategy, and for the Spark sample: valid, quarantined, missing (must be 0),
reasons absent (must be 0), oracle refusals kept by Spark (only mistyped optional fields).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--spark-sample", type=int, default=5_000, help="0: Python side only")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dump", type=Path, help="write the records Spark kept that the oracle refuses and that no "
                                              "lenient reading explains (JSON lines), to investigate")
    args = ap.parse_args()

    from foundation.errors import SchemaError
    from schemas.observation import check
    from lab.fuzz_records import NOT_JSON, collect, expected_rejection, hostile_records

    t0 = time.perf_counter()
    records = collect(hostile_records(), args.cases, seed=args.seed)
    generated_s = time.perf_counter() - t0
    crashes: collections.Counter[str] = collections.Counter()
    outcome: collections.Counter[str] = collections.Counter()
    t0 = time.perf_counter()
    for r in records:
        try:
            check(r)
            outcome["accepted"] += 1
        except SchemaError:
            outcome["rejected"] += 1
        except TypeError:
            outcome["not an object"] += 1 if not isinstance(r, dict) else 0
            if isinstance(r, dict):
                crashes["TypeError on an object"] += 1
        except Exception as e:  # noqa: BLE001 - what this run counts
            crashes[type(e).__name__] += 1
    check_s = time.perf_counter() - t0
    out = {"cases": len(records), "generate_s": round(generated_s, 1), "check_s": round(check_s, 2),
           "python": dict(outcome), "crashes": dict(crashes),
           "oracle_refuses": sum(1 for r in records if expected_rejection(r))}
    if args.spark_sample:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        from pipelines.ingest import parse, rejected
        from pipelines.session import build_session
        from lab.fuzz_records import as_spark_reads

        sample = records[:args.spark_sample]
        texts = [json.dumps(r) for r in sample] + NOT_JSON
        spark = build_session("local[2]", log_dir=Path("/tmp/krm-bench-logs"))
        rows = [(v.encode("utf-8", "surrogatepass"), "krm.observations", 0, i) for i, v in enumerate(texts)]
        df = spark.createDataFrame(rows, "value binary, topic string, partition int, offset long").selectExpr(
            "*", "current_timestamp() as timestamp")
        parsed = parse(df).persist()
        good = {r["kafka_offset"] for r in parsed.where("reject_reason IS NULL").select("kafka_offset").collect()}
        bad = {r["kafka_offset"]: r["reason"] for r in rejected(parsed).select("kafka_offset", "reason").collect()}
        refused = {i for i, r in enumerate(sample) if expected_rejection(r)}
        kept = refused & good
        unexplained = [i for i in sorted(kept) if as_spark_reads(sample[i]) is None]
        if args.dump:
            args.dump.write_text("".join(json.dumps({"why": expected_rejection(sample[i]), "record": sample[i]}) + "\n"
                                         for i in unexplained))
        out["spark"] = {"records": len(texts), "valid": len(good), "quarantined": len(bad),
                        "missing": len(texts) - len(good | set(bad)), "both": len(good & set(bad)),
                        "without_reason": sum(1 for v in bad.values() if not v),
                        "oracle_refused_but_kept": len(kept),
                        "of_which_read_leniently": sum(1 for i in kept if as_spark_reads(sample[i]) is not None),
                        "unexplained": len(unexplained),
                        "oracle_accepted_but_quarantined": len({i for i in range(len(sample)) if i not in refused} & set(bad))}
        spark.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
