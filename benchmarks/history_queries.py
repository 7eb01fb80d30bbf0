"""A week of history at 50k partitions: `krm timeline --since 7d` and 7-day `krm sql` questions.

Writes the history tables as the history path leaves them (pipelines/history.py): `partition_state`
with a row per partition at each change and per keyframe interval, `replica_lag` with the polls of
lagging followers (the three replica rows at each change are left out: a rounding error here), for
`--partitions` partitions (topics of 100 partitions, RF 3 over 6 brokers) over `--days` days, plus
a week of incidents, and compacts them with `krm maintain` as a daily cron would. Each day a share
of the partitions (`--troubled`) loses a follower from the ISR for 20 minutes at 2 s polls (rows at
the shrink and the return; the follower's lag at every poll between), and a share changes leader
(`--moved`, e.g. a rolling restart).

Then, as a user runs them (a new process each time: Python start, Delta log, scan, output), `--runs`
times each: the 7-day timeline of one troubled partition (`--json`), and 7-day SQL questions from
docs/queries.md's kind.

Usage: .venv/bin/python benchmarks/history_queries.py [--partitions 50000] [--days 7] [--keyframe 300]
       [--runs 5] [--keep DIR] [--reuse DIR] [--json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


KRM = str(Path(sys.executable).parent / "krm")
BROKERS = 6
PER_TOPIC = 100
POLL_S = 2

QUESTIONS = {
    "leader changes per partition this week (partition_state)": """
        SELECT cluster, topic, partition, count(DISTINCT leader_epoch) - 1 AS leader_changes
        FROM partition_state
        WHERE date >= current_date - 7 AND changed = true
        GROUP BY ALL HAVING count(DISTINCT leader_epoch) > 1
        ORDER BY leader_changes DESC LIMIT 20""",
    "which follower lagged most this week (replica_lag)": """
        SELECT cluster, topic, partition, broker, max(lag_messages) AS max_lag_messages,
               count(*) FILTER (WHERE NOT in_isr) AS polls_out_of_isr
        FROM replica_lag
        WHERE date >= current_date - 7 AND NOT is_leader
        GROUP BY ALL ORDER BY max_lag_messages DESC LIMIT 20""",
    "partitions that went under-replicated this week, how often (partition_state)": """
        SELECT cluster, topic, partition, count(*) AS shrinks
        FROM partition_state
        WHERE date >= current_date - 7 AND changed = true AND len(isr) < len(replicas)
        GROUP BY ALL ORDER BY shrinks DESC LIMIT 20""",
    "incidents per broker per day this week (incidents)": """
        SELECT cluster, broker, CAST(opened_at AS DATE) AS day, count(*) AS incidents
        FROM incidents WHERE opened_at >= now() - INTERVAL 7 DAY AND broker IS NOT NULL
        GROUP BY ALL ORDER BY day, incidents DESC""",
}


def _replicas(p: "object") -> "object":
    import numpy as np

    first = np.asarray(p) % BROKERS + 1
    return np.stack([first, (first % BROKERS) + 1, ((first + 1) % BROKERS) + 1], axis=1).astype(np.int32)


def _lists(matrix: "object", lengths: "object | None" = None) -> "object":
    """list<int32> column from an (n, 3) matrix, each row cut to its length (default 3)."""
    import numpy as np
    import pyarrow as pa

    m = np.asarray(matrix)
    n = m.shape[0]
    if lengths is None:
        offsets = np.arange(0, 3 * n + 1, 3, dtype=np.int32)
        return pa.ListArray.from_arrays(pa.array(offsets), pa.array(m.reshape(-1)))
    lengths = np.asarray(lengths, dtype=np.int32)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    mask = np.arange(3)[None, :] < lengths[:, None]
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(m[mask]))


def _state_table(cluster: str, names: "object", part: "object", t_us: "object", leader: "object",
                 epoch: "object", isr_len: "object", changed: "object", day: dt.date) -> "object":
    import numpy as np
    import pyarrow as pa

    n = len(part)
    reps = _replicas(part)
    hw = (t_us // 1_000_000 - 1_700_000_000) * 10 + (part % 97)
    return pa.table({
        "cluster": pa.array(np.full(n, cluster)), "topic": pa.array(names[part // PER_TOPIC]),
        "partition": pa.array((part % PER_TOPIC).astype(np.int32)),
        "observed_at": pa.array(t_us, type=pa.timestamp("us", tz="UTC")),
        "source": pa.array(np.full(n, "admin")), "poll_id": pa.array(t_us // (POLL_S * 1_000_000)),
        "leader": pa.array(leader.astype(np.int32)), "leader_epoch": pa.array(epoch.astype(np.int32)),
        "replicas": _lists(reps), "isr": _lists(reps, isr_len), "high_watermark": pa.array(hw.astype(np.int64)),
        "leader_leo": pa.array(hw.astype(np.int64) + 3), "write_rate": pa.array(np.full(n, 5.0)),
        "hw_stalled_since_ms": pa.nulls(n, pa.int64()), "changed": pa.array(changed),
        "date": pa.array(np.full(n, np.datetime64(day, "D"))),
    })


def generate(root: Path, partitions: int, days: int, keyframe_s: int, troubled: float, moved: float,
             now: dt.datetime, seed: int = 1) -> dict[str, int]:
    """24 appends a day to partition_state, one to replica_lag; `krm maintain` below then leaves the
    layout it leaves after a daily run (past days sorted, today compacted)."""
    import numpy as np
    import pyarrow as pa
    from deltalake import write_deltalake

    from pipelines.incident_store import IncidentStore
    from pipelines.incidents import Incident

    rng = np.random.default_rng(seed)
    tables = root / "data" / "tables"
    names = np.array([f"topic-{i:04d}" for i in range((partitions + PER_TOPIC - 1) // PER_TOPIC)])
    counts = {"partition_state": 0, "replica_lag": 0, "incidents": 0}
    incidents: list[Incident] = []
    all_p = np.arange(partitions)
    epoch = np.zeros(partitions, dtype=np.int64)
    start_day = (now - dt.timedelta(days=days - 1)).date()
    for d in range(days):
        day = start_day + dt.timedelta(days=d)
        t_day = int(dt.datetime.combine(day, dt.time(), dt.timezone.utc).timestamp())
        end_s = min(86400, int(now.timestamp()) - t_day) if day == now.date() else 86400
        leader = _replicas(all_p)[:, 0].copy()
        # keyframes: every partition at the first poll of each keyframe interval
        frames = np.arange(0, end_s, keyframe_s)
        part = np.tile(all_p, len(frames))
        t_us = (t_day + np.repeat(frames, partitions)).astype(np.int64) * 1_000_000
        isr_len = np.full(len(part), 3)
        changed = np.zeros(len(part), dtype=bool)
        # troubled: a follower out of the ISR for 20 minutes from a random poll (rows at the shrink and return)
        bad = rng.choice(partitions, int(partitions * troubled), replace=False)
        at = rng.integers(0, max(1, end_s - 1200) // POLL_S, len(bad)) * POLL_S
        shrink_t = (t_day + at).astype(np.int64) * 1_000_000
        back_t = shrink_t + 1200 * 1_000_000
        in_window = ((t_us[None, :] >= shrink_t[:, None]) & (t_us[None, :] < back_t[:, None])
                     & (part[None, :] == bad[:, None])) if len(bad) * len(part) < 2e8 else None
        if in_window is not None:
            isr_len[in_window.any(axis=0)] = 2
        else:  # too large to broadcast: per troubled partition
            for b, s, e in zip(bad, shrink_t, back_t):
                sel = np.flatnonzero(part == b)
                sel = sel[(t_us[sel] >= s) & (t_us[sel] < e)]
                isr_len[sel] = 2
        # leader moves (a rolling restart): epoch + 1, the leader the second replica from then on
        mv = rng.choice(partitions, int(partitions * moved), replace=False)
        mv_t = (t_day + rng.integers(0, max(1, end_s) // POLL_S, len(mv)) * POLL_S).astype(np.int64) * 1_000_000
        part = np.concatenate([part, bad, bad, mv])
        t_us = np.concatenate([t_us, shrink_t, back_t, mv_t])
        isr_len = np.concatenate([isr_len, np.full(len(bad), 2), np.full(len(bad), 3), np.full(len(mv), 3)])
        changed = np.concatenate([changed, np.ones(2 * len(bad) + len(mv), dtype=bool)])
        keep = t_us < (t_day + end_s) * 1_000_000
        part, t_us, isr_len, changed = part[keep], t_us[keep], isr_len[keep], changed[keep]
        ep = epoch[part].copy()
        lead = leader[part].copy()
        moved_mask = np.zeros(partitions, dtype=bool)
        moved_mask[mv] = True
        mv_at = np.zeros(partitions, dtype=np.int64)
        mv_at[mv] = mv_t
        after = moved_mask[part] & (t_us >= mv_at[part])
        ep[after] += 1
        lead[after] = _replicas(part[after])[:, 1]
        epoch[mv] += 1
        order = np.argsort(t_us, kind="stable")
        state = _state_table("bench", names, part[order], t_us[order], lead[order], ep[order], isr_len[order],
                             changed[order], day)
        for chunk in range(0, state.num_rows, -(-state.num_rows // 24)):  # a day arrives in many appends
            write_deltalake(str(tables / "partition_state"), state.slice(chunk, -(-state.num_rows // 24)),
                            mode="append", partition_by=["date", "cluster"])
        counts["partition_state"] += state.num_rows
        # replica_lag: the out-of-ISR follower (the third replica) at every poll of its 20 minutes, and
        # every replica at the shrink and the return
        polls = 1200 // POLL_S
        bp = np.repeat(bad, polls)
        bt = np.repeat(shrink_t, polls) + np.tile(np.arange(polls) * POLL_S * 1_000_000, len(bad))
        lag_msgs = np.tile(np.arange(polls) * 10, len(bad))
        keep = bt < (t_day + end_s) * 1_000_000
        bp, bt, lag_msgs = bp[keep], bt[keep], lag_msgs[keep]
        reps = _replicas(bp)
        n = len(bp)
        lag = pa.table({
            "cluster": pa.array(np.full(n, "bench")), "topic": pa.array(names[bp // PER_TOPIC]),
            "partition": pa.array((bp % PER_TOPIC).astype(np.int32)), "broker": pa.array(reps[:, 2]),
            "observed_at": pa.array(bt, type=pa.timestamp("us", tz="UTC")), "leader": pa.array(reps[:, 0]),
            "is_leader": pa.array(np.zeros(n, dtype=bool)), "in_isr": pa.array(np.zeros(n, dtype=bool)),
            "log_end_offset": pa.array(np.full(n, 1000, dtype=np.int64)),
            "leader_leo": pa.array(1000 + lag_msgs.astype(np.int64)), "lag_messages": pa.array(lag_msgs.astype(np.int64)),
            "lag_seconds": pa.array(lag_msgs / 5.0), "date": pa.array(np.full(n, np.datetime64(day, "D"))),
        })
        write_deltalake(str(tables / "replica_lag"), lag, mode="append", partition_by=["date", "cluster"])
        counts["replica_lag"] += n
        for b, s, e in zip(bad, shrink_t, back_t):
            opened, resolved = int(s // 1000), int(e // 1000)
            incidents.append(Incident(
                incident_id=f"bench-{day.isoformat()}-{b}", type="UNDER_REPLICATED", cluster="bench", scope="partition",
                topic=str(names[b // PER_TOPIC]), partition=int(b % PER_TOPIC), broker=int(_replicas([b])[0, 2]),
                cause=None, severity="warning", status="resolved" if resolved <= now.timestamp() * 1000 else "open",
                opened_at_ms=opened, last_seen_at_ms=min(resolved, int(now.timestamp() * 1000)),
                resolved_at_ms=resolved if resolved <= now.timestamp() * 1000 else None, details={}))
    IncidentStore(tables / "incidents").upsert(incidents)
    counts["incidents"] = len(incidents)
    return counts


def timed(cmd: list[str], runs: int) -> tuple[list[float], str]:
    walls, out = [], ""
    for _ in range(runs):
        t = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True)
        walls.append(time.perf_counter() - t)
        if p.returncode != 0:
            raise SystemExit(f"{' '.join(cmd[:3])} failed: {p.stderr[-2000:]}")
        out = p.stdout
    return walls, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=50_000)
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--keyframe", type=int, default=300, help="history_keyframe_s the tables are written with")
    ap.add_argument("--troubled", type=float, default=0.01, help="share of partitions with an ISR shrink per day")
    ap.add_argument("--moved", type=float, default=0.05, help="share of partitions whose leader moves per day")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", help="write the tables here and keep them (else a temporary folder)")
    ap.add_argument("--reuse", help="measure tables an earlier --keep wrote")
    ap.add_argument("--json", action="store_true", help="print every figure as one JSON object at the end")
    args = ap.parse_args()

    figures: dict[str, object] = {"partitions": args.partitions, "days": args.days, "keyframe_s": args.keyframe}
    if args.reuse:
        root = Path(args.reuse)
    else:
        root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="krm-history-bench-"))
        t0 = time.perf_counter()
        counts = generate(root, args.partitions, args.days, args.keyframe, args.troubled, args.moved,
                          dt.datetime.now(dt.timezone.utc))
        print(f"generated {counts} in {time.perf_counter() - t0:.0f}s", flush=True)
        t0 = time.perf_counter()
        config = root / "krm.toml"
        config.write_text('[[clusters]]\nname = "bench"\nbootstrap_servers = "127.0.0.1:1"\n\n'
                          f'[pipeline]\ndata_dir = "{root / "data"}"\n')
        p = subprocess.run([KRM, "maintain", "--config", str(config), "--retention-days", str(args.days + 1)],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"krm maintain failed: {p.stderr[-2000:]}")
        print(f"krm maintain (sorting, compaction) in {time.perf_counter() - t0:.0f}s", flush=True)
        figures["rows"] = counts
    config = root / "krm.toml"
    from deltalake import DeltaTable

    for name in ("partition_state", "replica_lag"):
        adds = DeltaTable(str(root / "data" / "tables" / name)).get_add_actions(flatten=True)
        figures[f"{name}_mb"] = round(sum(adds.column("size_bytes").to_pylist()) / 2**20)
    print(f"table sizes: {figures}", flush=True)

    # one partition that went under-replicated: its timeline has changes and an incident
    from pipelines.incident_store import IncidentStore

    some = next(i for i in IncidentStore(root / "data" / "tables" / "incidents").read())
    cmd = [KRM, "timeline", "--config", str(config), "--topic", some.topic, "--partition", str(some.partition),
           "--since", f"{args.days}d", "--json"]
    walls, out = timed(cmd, args.runs)
    events = json.loads(out)
    print(f"krm timeline --since {args.days}d --json ({some.topic}-{some.partition}, {len(events)} events): "
          f"wall p50 {statistics.median(walls):.2f}s max {max(walls):.2f}s over {args.runs} runs", flush=True)
    figures["timeline"] = {"p50_s": round(statistics.median(walls), 3), "max_s": round(max(walls), 3),
                           "events": len(events)}
    for label, q in QUESTIONS.items():
        walls, out = timed([KRM, "sql", "--config", str(config), " ".join(q.split()), "--json"], args.runs)
        print(f"krm sql: {label}: {len(json.loads(out))} rows, wall p50 {statistics.median(walls):.2f}s "
              f"max {max(walls):.2f}s", flush=True)
        figures[label] = {"p50_s": round(statistics.median(walls), 3), "max_s": round(max(walls), 3)}
    if args.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
