"""`krm incidents` and `krm incidents show ID`: the incidents table. Each command's parser beside its handler."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from foundation.errors import KrmError
from krm.commands.common import Subparsers, resolve_config

if TYPE_CHECKING:
    from krm.timeline import Event
    from pipelines.detectors.rule import Rule
    from pipelines.incidents import Incident


def cmd_incidents(args: argparse.Namespace) -> int:
    from foundation.config import load_config
    from pipelines import incident_groups
    from pipelines.detectors.registry import INCIDENT_TYPES
    from pipelines.incident_store import IncidentStore, to_json_obj
    from pipelines.tables import Tables

    if args.action:
        if args.action[0] != "show" or len(args.action) != 2:
            raise KrmError(f"unknown incidents action {' '.join(args.action)!r}: use `krm incidents show INCIDENT_ID`")
        return cmd_incident_show(args, args.action[1])

    unknown = sorted(set(args.type or ()) - set(INCIDENT_TYPES))
    if unknown:
        raise KrmError(f"unknown incident type {', '.join(unknown)}; the types are {', '.join(INCIDENT_TYPES)}")
    config = load_config(resolve_config(args.config))
    incidents = IncidentStore(Tables(config.pipeline.data_dir).incidents).read(open_only=args.open, types=args.type)
    groups = incident_groups.group(incidents)
    if args.json:
        key = {m.incident_id: g.key for g in groups for m in g.members}
        print(json.dumps([{**to_json_obj(i), "group": key[i.incident_id]} for i in incidents], indent=2))
        return 0
    if not incidents:
        print("no incidents" + (" open" if args.open else ""))
        return 0
    from krm.output import print_table

    rows: list[list[str]] = []
    for g in groups:
        if args.ungrouped or g.key is None:
            rows.extend(_row(i) for i in g.members)
            continue
        head = g.head
        parts = g.partitions
        shown = ", ".join(parts[:GROUP_PARTITIONS]) + (f" +{len(parts) - GROUP_PARTITIONS}" if len(parts) > GROUP_PARTITIONS
                                                        else "")
        what = ", ".join(f"{n} {kind}" for kind, n in g.counts())
        rows.append([g.status, g.severity, f"{head.type} +{len(g.members) - 1}", head.cluster,
                     f"{g.title}: {len(parts)} partition(s) {shown}", what, iso_ms(g.opened_at_ms),
                     iso_ms(g.resolved_at_ms) if g.resolved_at_ms is not None else ""])
    print_table(["status", "severity", "type", "cluster", "subject", "cause", "opened", "resolved"], rows,
                styled=(0, 1))
    if not args.ungrouped and any(g.key is not None for g in groups):
        print(f"({len(incidents)} incidents in {len(groups)} rows; --ungrouped for one row each)")
    return 0


GROUP_PARTITIONS = 6  # partitions a grouped row names before "+N"


def _row(i: Incident) -> list[str]:
    from pipelines.incident_store import to_json_obj

    o = to_json_obj(i)
    subject = f"{i.topic}/{i.partition}" if i.topic is not None else (f"broker {i.broker}" if i.broker is not None else "-")
    if i.topic is not None and i.broker is not None:
        subject += f" broker {i.broker}"
    root = i.root_cause
    cause = (i.cause or "") + (f" (root: {root})" if root and root != i.cause else "")
    return [o["status"], i.severity, i.type, i.cluster, subject, cause, o["opened_at"], o["resolved_at"] or ""]


def iso_ms(ms: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat().replace("+00:00", "Z")  # as to_json_obj


SHOW_CHANGES = 10  # state changes of the partition `krm incidents show` prints, up to the incident's opening and after


def cmd_incident_show(args: argparse.Namespace, incident_id: str) -> int:
    import datetime as dt

    from foundation.config import load_config
    from krm.timeline import changes, read_states
    from pipelines.detectors.registry import BY_TYPE
    from pipelines.incident_store import IncidentStore, to_json_obj
    from pipelines.tables import Tables

    config = load_config(resolve_config(args.config))
    tables = Tables(config.pipeline.data_dir)
    found = [i for i in IncidentStore(tables.incidents).read() if i.incident_id == incident_id]
    if not found:
        raise KrmError(f"no incident {incident_id!r} in {tables.incidents} (`krm incidents --json` lists them)")
    inc = found[0]
    rule = BY_TYPE.get(inc.type)
    history: list[Event] = []
    if inc.topic is not None and inc.partition is not None and tables.partition_state.is_table():
        now = dt.datetime.now(dt.timezone.utc)
        opened = dt.datetime.fromtimestamp(inc.opened_at_ms / 1000, dt.timezone.utc)
        states = read_states(tables.partition_state, inc.topic, inc.partition, now - opened + dt.timedelta(hours=1),
                             now=now, cluster=inc.cluster)
        history = changes(states)
        before = [e for e in history if e.at <= opened][-SHOW_CHANGES:]
        history = before + [e for e in history if e.at > opened][:SHOW_CHANGES]
    obj = to_json_obj(inc) | {"summary": rule.summary if rule else None, "routine": rule.routine if rule else None,
                              "changes": [e.to_json() for e in history]}
    if args.json:
        print(json.dumps(obj, indent=2, default=str))
        return 0
    print("\n".join(describe(inc, rule, history)))
    return 0


def describe(inc: Incident, rule: Rule | None, history: list[Event]) -> list[str]:
    """`krm incidents show`'s text: the incident, what to act on, its evidence, every declared detail it has,
    what its type means, and its partition's changes around the opening."""
    out: list[str] = []
    opened, last, resolved = (iso_ms(ms) if ms is not None else "-"
                              for ms in (inc.opened_at_ms, inc.last_seen_at_ms, inc.resolved_at_ms))
    where = f"{inc.topic}-{inc.partition}" if inc.topic is not None else (f"broker {inc.broker}" if inc.broker is not None
                                                                         else "cluster")
    out.append(f"{inc.severity.upper()} {inc.type} ({inc.cause or '-'}) on {inc.cluster} {where}  [{inc.status}]")
    out.append(f"  id          {inc.incident_id}")
    out.append(f"  opened      {opened}   last seen {last}   resolved {resolved}")
    if inc.broker is not None:
        out.append(f"  broker      {inc.broker}")
    facts = inc.facts
    for name, brokers in facts.act_on():
        out.append(f"  {name:<11} {list(brokers)}")
    if (headline := facts.headline()) is not None:  # the cut link, the disks that filled, the uneven brokers
        out.append(f"  evidence    {headline}")
    acted = {name for name, _ in facts.act_on()}
    for name, text in facts.facts():
        if name not in acted:
            out.append(f"  {name:<11} {text}")
    if rule:
        out.append(f"  means       {rule.summary}")
        out.append(f"  routine     {rule.routine}")
    if facts.unreadable:
        out.append(f"  unreadable  {', '.join(facts.unreadable)} (not of the declared shape, left out)")
    out.append("  details     " + json.dumps(facts.raw(), default=str))
    if history:
        out.append(f"  the partition's changes around the opening (up to {SHOW_CHANGES} before and after):")
        for e in history:
            out.append(f"    {e.at.isoformat(timespec='seconds')}  {e.what}")
    return out


def add(sub: Subparsers) -> None:
    """Add these commands to `krm`'s subcommands."""
    i = sub.add_parser("incidents", help="incidents from the Delta table; `incidents show ID`: one incident whole",
                       description="List incidents, or `krm incidents show INCIDENT_ID` for one: its fields, what its "
                                   "type means, and its partition's state changes around its opening.")
    i.add_argument("action", nargs="*", metavar="show INCIDENT_ID", help="show one incident whole")
    i.add_argument("--config")
    i.add_argument("--open", action="store_true", help="only open incidents")
    i.add_argument("--type", action="append", help="only this incident type (repeatable)")
    i.add_argument("--json", action="store_true",
                   help="one object per incident, with `group`: the key of the incidents sharing its cause (or null)")
    i.add_argument("--ungrouped", action="store_true",
                   help="a row per incident (by default incidents that share one cause read as one row: a broker down "
                        "and the partitions it affects, a cut replication link, a failed log directory)")
    i.set_defaults(func=cmd_incidents, hard_exit=True)
