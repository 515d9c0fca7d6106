"""Build router/data/instances.csv and router/data/snapshot.csv from the transcribed source rows."""
import csv, io, statistics, sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from catalog_rows import all_rows, N1_COMBOS

OUT = str(HERE.parent.parent / "router" / "data")
OBSERVED = "2025-05-01T00:00:00Z"

# ---------------- catalog ----------------
cat = all_rows()
names = [(r[0], r[1]) for r in cat]
assert len(names) == len(set(names)), "duplicate catalog key"
with open(f"{OUT}/instances.csv", "w", newline="") as f:
    f.write("# GPU instance types spotroute can place jobs on; one row per (cloud, instance_type).\n")
    f.write("# Specs (vCPUs, memory GiB, GPU count and memory per GPU) from each row's `source` page.\n")
    f.write("# date: 2026-11-29. GCP n1 + attached GPU rows are named <machine-type>+<GPU>:<count>.\n")
    f.write("# Columns, units and how to add a type: docs/catalog.md\n")
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["cloud", "instance_type", "family", "gpu", "gpu_count", "gpu_memory_gb", "vcpus",
                "memory_gb", "interconnect", "accelerator_type", "source"])
    for r in cat:
        w.writerow(r)
catalog = {(r[0], r[1]): r for r in cat}

rows = []  # (cloud, region, zone, type, market, price, bucket, basis)


def emit(cloud, region, zone, itype, market, price, basis):
    assert (cloud, itype) in catalog, (cloud, itype)
    rows.append((cloud, region, zone, itype, market, round(price, 5), "", basis))


# ---------------- AWS ----------------
aws_od = {}
for line in open(HERE / "aws_raw.txt"):
    line = line.strip()
    if not line or line.startswith("#"):
        continue
    itype, region, od, zones = line.split("|")
    assert "PARTIAL" not in zones, line
    od = float(od)
    assert (itype, region) not in aws_od, line
    aws_od[(itype, region)] = od
    emit("aws", region, "", itype, "on-demand", od, "catalog")
    for part in zones.split():
        zone, spot = part.split("=")
        emit("aws", region, zone, itype, "spot", float(spot), "catalog")

# ---------------- GCP ----------------
hosts = {}
for line in open(HERE / "gcp_raw.txt"):
    line = line.strip()
    if not line or line.startswith("#"):
        continue
    t, region, zones, od, spot = line.split("|")
    hosts[(t, region)] = (set(zones.split(",")), float(od), float(spot))
gpus = {}
for line in open(HERE / "gcp_gpu_raw.txt"):
    line = line.strip()
    if not line or line.startswith("#"):
        continue
    g, n, region, zones, od, spot = line.split("|")
    if int(n) != 1:
        continue
    gpus[(g, region)] = (set(zones.split(",")), float(od), float(spot))

# On-demand GPU unit prices the source lists in every region (for the artifact rule).
SOURCE_OD = {
    "A100-40GB": [1.70586, 1.70586, 1.70586, 1.61365, 3.2273, 2.93391, 2.93391, 2.93391, 3.43686, 3.10156],
    "A100-80GB": [4.84607, 2.03285, 1.8462, 2.07937, 4.4242],
    "H100-80GB": [11.34343, 4.20076, 12.58073, 10.18841, 4.20076, 4.20076, 10.78698, 10.78698, 11.16807,
                  11.55993, 12.73552, 4.20076, 4.20076, 9.79655, 11.03385, 4.20076, 4.20076],
    "L4": [0.64847, 0.7192, 0.7192, 0.58298, 0.69092, 0.61666, 0.63765, 0.66085, 0.58804, 0.78344,
           0.89606, 0.61666, 0.61666, 0.56004, 0.56004, 0.55821, 0.56004, 0.63077],
    "T4": [0.35, 0.44, 0.37, 0.37, 0.41, 0.37, 0.4033, 0.44, 0.41, 0.35, 0.399, 0.41, 0.3675, 0.385,
           0.38538, 0.48, 0.35, 0.35, 0.37, 0.35, 0.42074, 0.42074, 0.37],
    "V100": [2.48, 2.604, 2.48, 2.48, 2.48],
}
# Reference (GPU unit OD, host family, reference region, reference 1-GPU host OD) per GPU.
REFERENCE = {
    "A100-40GB": (2.93391, "a2-highgpu-1g", "us-central1", 0.73948),
    "A100-80GB": (4.4242, "a2-ultragpu-1g", "us-east5", 1.09962),
    "H100-80GB": (9.79655, "a3-highgpu-1g", "us-east4", 1.18251),
}
SRC_GPU = {"A100-40GB": "A100", "A100-80GB": "A100-80GB", "H100-80GB": "H100", "L4": "L4", "T4": "T4", "V100": "V100"}
SPOT_ONLY = {"a3-highgpu-1g", "a3-highgpu-2g", "a3-highgpu-4g"}
GCP_REGIONS = ["us-central1", "us-east4", "us-west1", "europe-west4", "asia-northeast1"]
derived_gpu = {}


def gpu_unit(gpu, region):
    """(zones, od_unit, od_basis, spot_unit) for a GPU in a region, or None."""
    key = (SRC_GPU[gpu], region)
    if key not in gpus:
        return None
    zones, od, spot = gpus[key]
    limit = 0.55 * max(SOURCE_OD[gpu])
    if od < limit or spot >= od:
        ref_od, family, ref_region, ref_host = REFERENCE[gpu]
        host_od = hosts[(family, region)][1]
        new = ref_od * host_od / ref_host
        derived_gpu[(gpu, region)] = (od, new)
        return zones, new, "derived", spot
    return zones, od, "catalog", spot


for (cloud, itype), r in catalog.items():
    if cloud != "gcp":
        continue
    gpu, n = r[3], r[4]
    host_name = itype.partition("+")[0]
    for region in GCP_REGIONS:
        if (host_name, region) not in hosts:
            continue
        unit = gpu_unit(gpu, region)
        if unit is None:
            continue
        hz, hod, hspot = hosts[(host_name, region)]
        gz, uod, basis, uspot = unit
        zones = sorted(hz & gz)
        assert zones, (itype, region)
        if itype not in SPOT_ONLY:
            emit("gcp", region, "", itype, "on-demand", hod + n * uod, basis)
        for z in zones:
            emit("gcp", region, f"{region}-{z}", itype, "spot", hspot + n * uspot, "catalog")

# ---------------- Azure ----------------
az = {}
for line in open(HERE / "azure_raw.txt"):
    line = line.strip()
    if not line or line.startswith("#"):
        continue
    t, region, od, spot = line.split("|")
    az[(t, region)] = (float(od), float(spot))
    emit("azure", region, "", t, "on-demand", float(od), "catalog")
    if float(spot) < float(od):
        emit("azure", region, "", t, "spot", float(spot), "catalog")


def od_of(cloud, region, itype):
    for row in rows:
        if row[0] == cloud and row[1] == region and row[3] == itype and row[4] == "on-demand" and row[7] == "catalog":
            return row[5]
    return None


ratios_ne = [aws_od[(t, "eu-west-1")] / aws_od[(t, "us-east-1")]
             for (t, reg) in aws_od if reg == "eu-west-1" and (t, "us-east-1") in aws_od]
ratios_we = []
for (cloud, itype) in catalog:
    if cloud != "gcp":
        continue
    a, b = od_of("gcp", "europe-west4", itype), od_of("gcp", "us-central1", itype)
    if a and b:
        ratios_we.append(a / b)
MULT = {"northeurope": statistics.median(ratios_ne), "westeurope": statistics.median(ratios_we)}
us_regions = {}
for (t, region) in az:
    us_regions.setdefault(t, set()).add(region)
for t, regs in sorted(us_regions.items()):
    if regs != {"eastus", "eastus2", "westus2"}:
        continue  # only series the source lists in all three US regions get European rows
    od, spot = az[(t, "eastus")]
    for region, mult in MULT.items():
        emit("azure", region, "", t, "on-demand", od * mult, "derived")
        emit("azure", region, "", t, "spot", spot * mult, "derived")

# ---------------- write ----------------
rows.sort(key=lambda r: (r[0], r[1], r[3], r[4], r[2]))
keys = [(r[0], r[1], r[2], r[3], r[4]) for r in rows]
assert len(keys) == len(set(keys)), "duplicate snapshot key"
with open(f"{OUT}/snapshot.csv", "w", newline="") as f:
    f.write("# spotroute bundled price snapshot: USD per instance-hour, Linux, no reservations.\n")
    f.write("# source: skypilot-org/skypilot-catalog (AWS catalogs/v7/aws/vms.csv, GCP catalogs/v7/gcp/vms.csv,\n")
    f.write("# Azure catalogs/v6/azure/vms.csv); observed_at 2025-05-01 is estimated from the data (see doc).\n")
    f.write("# basis: catalog = as the source lists it; derived = computed by a rule in docs/price-snapshot.md.\n")
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["cloud", "region", "zone", "instance_type", "market", "price_per_hour", "observed_at",
                "interruption_bucket", "basis"])
    for c, reg, z, t, m, p, b, basis in rows:
        w.writerow([c, reg, z, t, m, f"{p:.5f}".rstrip("0").rstrip("."), OBSERVED, b, basis])

print("catalog rows", len(cat), "snapshot rows", len(rows))
print("multipliers", MULT, "n_ne", len(ratios_ne), "n_we", len(ratios_we))
print("derived gpu", derived_gpu)
# coverage
for key in catalog:
    mk = {r[4] for r in rows if (r[0], r[3]) == key}
    if mk != {"spot", "on-demand"}:
        print("coverage", key, mk)
