"""What `route watch` has seen of each spot pool: the evidence of the one interruption model.

Reads the record store (router/engine/records.py): spot placements that ran — live ones
(`placements/<job>`), their `history`, and ended ones (`ended/<job>/<start>`) — for the hours
each pool was up, and each job's watch state (`jobs/<job>/state`, `lost_zones`) for the
preemptions seen, over the last week. router.core.interruption.evidence_from_history turns them
into Evidence per (cloud, region, zone, instance type); the planner (`route plan`, and the
candidates `route watch` gives decide()) prices spot with it. Unreadable records are skipped:
evidence is a refinement of the advisor buckets, never a reason to fail.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from router.core.errors import RouteError
from router.core.interruption import Evidence, EvidenceKey, evidence_from_history, evidence_key

if TYPE_CHECKING:
    from router.config.project import Project
    from router.engine.records import RecordStore

Stint = tuple[EvidenceKey, datetime, datetime, int]


def observed_evidence(records: RecordStore, now: datetime) -> dict[EvidenceKey, Evidence]:
    """Spot hours up and preemptions seen per pool over the lookback, from the records."""
    stints = list(_stints(records, now))
    types: dict[tuple[str, str, str], set[str]] = {}
    for key, *_ in stints:
        types.setdefault(key[:3], set()).add(key[3])
    return evidence_from_history(stints, _preemptions(records, types), now=now)


def _time(raw: Any) -> datetime | None:
    if raw is None:
        return None
    try:
        at = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError:
        return None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def _stint(item: Mapping[str, Any], start_key: str, end: datetime | None) -> Stint | None:
    if item.get("market") != "spot" or not item.get("cloud") or not item.get("instance_type"):
        return None
    start = _time(item.get(start_key))
    stop = end or _time(item.get("ended_at"))
    if start is None or stop is None:
        return None
    key = evidence_key(
        str(item["cloud"]), str(item.get("region") or ""), item.get("zone"),
        str(item["instance_type"]),
    )  # fmt: skip
    try:
        nodes = int(item.get("node_count") or 1)
    except (TypeError, ValueError):
        nodes = 1
    return key, start, stop, nodes


def _stints(records: RecordStore, now: datetime) -> Iterator[Stint]:
    for prefix, start_key, live in (
        ("placements/", "deployed_at", True),
        ("ended/", "started_at", False),
    ):
        for record in records.list(prefix).values():
            if not isinstance(record, dict):
                continue
            for item in record.get("history") or []:
                if isinstance(item, dict) and (found := _stint(item, "started_at", None)):
                    yield found
            if found := _stint(record, start_key, now if live else None):
                yield found


def _preemptions(
    records: RecordStore, types: Mapping[tuple[str, str, str], set[str]]
) -> Iterator[tuple[EvidenceKey, datetime]]:
    """Zones lost, from each job's watch state: [[cloud, region, zone], at, instance_type]; an
    entry written before the type was kept counts for the zone's only type, if it had one."""
    for key in records.keys("jobs/"):
        if not key.endswith("/state"):
            continue
        state = records.get(key) or {}
        for entry in state.get("lost_zones") or []:
            try:
                zone, at = entry[0], _time(entry[1])
                pool = (str(zone[0]), str(zone[1]), str(zone[2]))
            except (IndexError, TypeError, KeyError):
                continue
            itype = str(entry[2]) if len(entry) > 2 and entry[2] else None
            known = types.get(pool, set())
            if itype is None and len(known) == 1:
                itype = next(iter(known))
            if at is not None and itype is not None:
                yield (*pool, itype), at


def recorded_evidence(project: Project | None, now: datetime) -> dict[EvidenceKey, Evidence]:
    """The evidence of the project's records when they are on this machine (the default store or
    a file:// backend): `route plan` stays offline; `route watch` reads any backend each pass."""
    if project is None:
        return {}
    from router.config.home import spotroute_home
    from router.config.org_file import org_config_for
    from router.engine.records import records_for

    try:
        url = org_config_for(project).backend_url or os.environ.get("PULUMI_BACKEND_URL")
        if url and not url.startswith("file://"):
            return {}
        home = spotroute_home()
        store = records_for(url or f"file://{home / 'state'}", home, is_default=not url)
        return observed_evidence(store, now)
    except (RouteError, OSError, ValueError):
        return {}
