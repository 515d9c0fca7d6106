"""How a job reads its data at a placement, priced: stream from the nearest copy, or copy first.

Pure: the egress and storage tables are parameters. docs/planner.md has the model and a worked
example in dollars. For one data set of size S GB read `passes` times, at a placement whose GPUs
cost W $/h (price_per_hour × node_count) while they wait:

  source  = the location (main URL or a replica) with the cheapest one-time egress to the
            placement; listed order breaks ties (the main URL first)
  stream  = egress(S, source → placement) × passes        (each pass priced from tier zero)
  copy    = egress(S, source → placement)                 (once)
          + storage(S, placement region, storage_hours)   (standard object storage, pro rata)
          + staging_hours × W                             (0 when start_while_copying)
  staging_hours = S × 8 / copy_gbps / 3600
  storage_hours = hours + staging_hours                   (hours alone when start_while_copying)
  chosen  = the job's `access`, or for `auto` copy only when strictly cheaper than stream

Moving a checkpoint between clouds is the same transfer: `move_cost` prices it, and the copy
mode above is `move_cost` plus storage, so the migration decision and the planner agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from router.core.egress import EgressCost, EgressTable
from router.core.job.data import DEFAULT_COPY_GBPS, Data, DataLocation
from router.core.storage_prices import StorageCost, StoragePrices

Access = Literal["stream", "copy"]
STREAM: Access = "stream"
COPY: Access = "copy"
_BITS_PER_BYTE = 8.0
_SECONDS_PER_HOUR = 3600.0


def transfer_hours(size_gb: float, rate_gbps: float) -> float:
    """Hours to move size_gb (gigabytes) at rate_gbps (gigabits per second)."""
    if rate_gbps <= 0:
        raise ValueError(f"transfer rate must be above 0 Gbps, got {rate_gbps}")
    return max(0.0, size_gb) * _BITS_PER_BYTE / rate_gbps / _SECONDS_PER_HOUR


@dataclass(frozen=True, slots=True)
class MoveCost:
    """Moving size_gb once: egress USD, transfer hours, and the USD of GPUs waiting for it."""

    size_gb: float
    egress: EgressCost
    hours: float
    wait_usd: float  # hours × the waiting placement's $/h; 0 when nothing waits

    @property
    def usd(self) -> float:
        """egress + waiting, USD."""
        return self.egress.usd + self.wait_usd


def move_cost(
    size_gb: float,
    src_cloud: str,
    src_region: str,
    dst_cloud: str,
    dst_region: str,
    *,
    egress: EgressTable,
    rate_gbps: float = DEFAULT_COPY_GBPS,
    wait_usd_per_hour: float = 0.0,
) -> MoveCost:
    """USD and hours to move size_gb once between two locations (data copies, checkpoints).

    `wait_usd_per_hour` is what the destination bills per hour while it waits for the bytes
    (price_per_hour × node_count of the new placement; 0 when the transfer overlaps work).
    """
    moved = egress.cost(size_gb, src_cloud, src_region, dst_cloud, dst_region)
    hours = transfer_hours(size_gb, rate_gbps)
    return MoveCost(size_gb, moved, hours, hours * wait_usd_per_hour)


@dataclass(frozen=True, slots=True)
class DataRoute:
    """The parts of a data set's cost at one (cloud, region) that do not depend on its $/h."""

    data: Data
    source: DataLocation  # the nearest copy: data itself or one of its replicas
    source_index: int  # 0 = the main URL, i = replicas[i - 1]
    farthest_usd: float  # one-time egress from the dearest copy (explains the replica choice)
    once: EgressCost  # one move of the data set from `source`
    staging_hours: float
    storage: StorageCost
    storage_hours: float
    overlapped: bool  # start_while_copying: the GPUs do not wait for the copy

    @property
    def stream_usd(self) -> float:
        """Streaming: one move per pass, USD."""
        return self.once.usd * self.data.passes


@dataclass(frozen=True, slots=True)
class DataAccess:
    """How one data set is read at one placement, what each mode costs, and which one won."""

    route: DataRoute
    access: Access
    chosen_by: Literal["job", "cheaper"]
    stream_usd: float
    copy_usd: float
    staging_usd: float  # of the copy mode (charged only when copy is chosen)
    egress_usd: float  # of the chosen mode
    storage_usd: float  # of the chosen mode
    wait_usd_per_hour: float

    @property
    def usd(self) -> float:
        """The chosen mode's cost, USD."""
        return self.stream_usd if self.access == STREAM else self.copy_usd

    @property
    def chosen_staging_usd(self) -> float:
        """Staging USD of the chosen mode (0 for streaming)."""
        return self.staging_usd if self.access == COPY else 0.0

    def summary(self) -> str:
        """One line: the data set, where it is read from, both modes in dollars, the winner."""
        r, d = self.route, self.route.data
        passes = f"{d.passes:g} pass{'es' if d.passes != 1 else ''}"
        src = r.source
        where = f"{src.cloud or 'outside the clouds'} {src.region}"
        if r.source_index:
            where += f" (replica {src.url}, nearer: ${r.once.usd:,.2f} vs ${r.farthest_usd:,.2f}"
            where += " per move)"
        stream = f"stream ${r.once.usd:,.2f}/pass × {d.passes:g} = ${self.stream_usd:,.2f}"
        rate = f"{r.staging_hours:.2f} h at {d.copy_gbps:g} Gbps"
        staging = (
            f"$0.00 staging ({rate}, overlapped: start_while_copying)"
            if r.overlapped
            else f"${self.staging_usd:,.2f} staging ({rate} × ${self.wait_usd_per_hour:,.2f}/h)"
        )
        copy = (
            f"copy ${r.once.usd:,.2f} egress + ${r.storage.usd:,.2f} storage"
            f" ({r.storage_hours:.1f} h) + {staging} = ${self.copy_usd:,.2f}"
        )
        if self.chosen_by == "job":
            other = self.copy_usd if self.access == STREAM else self.stream_usd
            verdict = f"{self.access} (data.access in job.yaml"
            verdict += (
                f"; the other mode would save ${self.usd - other:,.2f})"
                if other < self.usd
                else ")"
            )
        elif self.access == COPY:
            verdict = f"copy (cheaper by ${self.stream_usd - self.copy_usd:,.2f})"
        else:
            verdict = "stream (not dearer than copying)"
        return (
            f"data {d.url} ({d.size_gb:g} GB, {passes}) from {where}: {stream}; {copy} → {verdict}"
        )


def route_data(
    data: Data,
    dst_cloud: str,
    dst_region: str,
    *,
    hours: float,
    egress: EgressTable,
    storage: StoragePrices,
) -> DataRoute:
    """Pick the nearest copy of `data` for (dst_cloud, dst_region) and price what does not
    depend on the placement's $/h: the one-time egress, staging hours and storage."""
    priced = [
        (_one_move(data.size_gb, loc, dst_cloud, dst_region, egress), i, loc)
        for i, loc in enumerate(data.locations)
    ]
    once, index, source = min(priced, key=lambda p: (p[0].usd, p[1]))
    staging_h = transfer_hours(data.size_gb, data.copy_gbps)
    overlapped = data.start_while_copying
    storage_h = hours + (0.0 if overlapped else staging_h)
    return DataRoute(
        data=data,
        source=source,
        source_index=index,
        farthest_usd=max(p[0].usd for p in priced),
        once=once,
        staging_hours=staging_h,
        storage=storage.cost(data.size_gb, dst_cloud, dst_region, storage_h),
        storage_hours=storage_h,
        overlapped=overlapped,
    )


def choose_access(route: DataRoute, wait_usd_per_hour: float) -> DataAccess:
    """Price both modes at a placement billing wait_usd_per_hour while it waits; pick one."""
    data = route.data
    staging = 0.0 if route.overlapped else route.staging_hours * wait_usd_per_hour
    stream = route.stream_usd
    copy = route.once.usd + route.storage.usd + staging
    if data.access == "auto":
        access: Access = COPY if copy < stream else STREAM
        chosen_by: Literal["job", "cheaper"] = "cheaper"
    else:
        access, chosen_by = (COPY if data.access == "copy" else STREAM), "job"
    return DataAccess(
        route=route,
        access=access,
        chosen_by=chosen_by,
        stream_usd=stream,
        copy_usd=copy,
        staging_usd=staging,
        egress_usd=stream if access == STREAM else route.once.usd,
        storage_usd=route.storage.usd if access == COPY else 0.0,
        wait_usd_per_hour=wait_usd_per_hour,
    )


def data_access(
    data: Data,
    dst_cloud: str,
    dst_region: str,
    *,
    hours: float,
    wait_usd_per_hour: float,
    egress: EgressTable,
    storage: StoragePrices,
) -> DataAccess:
    """How `data` is best read at a placement in (dst_cloud, dst_region), priced (USD)."""
    route = route_data(data, dst_cloud, dst_region, hours=hours, egress=egress, storage=storage)
    return choose_access(route, wait_usd_per_hour)


def _one_move(
    size_gb: float, src: DataLocation, dst_cloud: str, dst_region: str, egress: EgressTable
) -> EgressCost:
    if src.cloud is None:  # cannot happen for a validated Data; kept for hand-built models
        return EgressCost(0.0, f"data at {src.url} is outside the clouds: transfer in is free")
    return egress.cost(size_gb, src.cloud, src.region, dst_cloud, dst_region)
