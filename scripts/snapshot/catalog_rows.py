"""Hand-entered catalog rows (specs from provider docs); used by build.py to write instances.csv."""

AWS_DOCS = "https://aws.amazon.com/ec2/instance-types/{}/"
AWS_ACCEL = "https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html"


def aws():
    rows = []
    # p-family
    rows.append(("p5.48xlarge", "p5", "H100-80GB", 8, 80, 192, 2048, "NVSwitch 900GB/s; EFA 3200Gbps", AWS_DOCS.format("p5")))
    rows.append(("p4d.24xlarge", "p4d", "A100-40GB", 8, 40, 96, 1152, "NVSwitch 600GB/s; EFA 400Gbps", AWS_DOCS.format("p4")))
    rows.append(("p4de.24xlarge", "p4de", "A100-80GB", 8, 80, 96, 1152, "NVSwitch 600GB/s; EFA 400Gbps", AWS_DOCS.format("p4")))
    rows.append(("p3.2xlarge", "p3", "V100", 1, 16, 8, 61, "PCIe", AWS_DOCS.format("p3")))
    rows.append(("p3.8xlarge", "p3", "V100", 4, 16, 32, 244, "NVLink", AWS_DOCS.format("p3")))
    rows.append(("p3.16xlarge", "p3", "V100", 8, 16, 64, 488, "NVLink", AWS_DOCS.format("p3")))
    rows.append(("p3dn.24xlarge", "p3dn", "V100", 8, 32, 96, 768, "NVLink; EFA 100Gbps", AWS_DOCS.format("p3")))
    # g-family: (size, gpus, vcpus, mem)
    g4dn = [("xlarge", 1, 4, 16), ("2xlarge", 1, 8, 32), ("4xlarge", 1, 16, 64), ("8xlarge", 1, 32, 128),
            ("16xlarge", 1, 64, 256), ("12xlarge", 4, 48, 192), ("metal", 8, 96, 384)]
    for size, n, v, m in g4dn:
        rows.append((f"g4dn.{size}", "g4dn", "T4", n, 16, v, m, "PCIe", AWS_DOCS.format("g4")))
    g5 = [("xlarge", 1, 4, 16), ("2xlarge", 1, 8, 32), ("4xlarge", 1, 16, 64), ("8xlarge", 1, 32, 128),
          ("16xlarge", 1, 64, 256), ("12xlarge", 4, 48, 192), ("24xlarge", 4, 96, 384), ("48xlarge", 8, 192, 768)]
    for size, n, v, m in g5:
        rows.append((f"g5.{size}", "g5", "A10G", n, 24, v, m, "PCIe", AWS_DOCS.format("g5")))
    for size, n, v, m in g5:  # g6 has the same shapes as g5
        rows.append((f"g6.{size}", "g6", "L4", n, 24, v, m, "PCIe", AWS_DOCS.format("g6")))
    g6e = [("xlarge", 1, 4, 32), ("2xlarge", 1, 8, 64), ("4xlarge", 1, 16, 128), ("8xlarge", 1, 32, 256),
           ("16xlarge", 1, 64, 512), ("12xlarge", 4, 48, 384), ("24xlarge", 4, 96, 768), ("48xlarge", 8, 192, 1536)]
    for size, n, v, m in g6e:
        rows.append((f"g6e.{size}", "g6e", "L40S", n, 48, v, m, "PCIe", AWS_DOCS.format("g6e")))
    return [("aws", name, fam, gpu, n, gm, v, m, ic, "", src) for name, fam, gpu, n, gm, v, m, ic, src in rows]


GCP_A3 = "https://cloud.google.com/compute/docs/accelerator-optimized-machines#a3-vms"
GCP_A3_MEGA = "https://cloud.google.com/compute/docs/accelerator-optimized-machines#a3-mega-vms"
GCP_A2 = "https://cloud.google.com/compute/docs/accelerator-optimized-machines#a2-vms"
GCP_G2 = "https://cloud.google.com/compute/docs/accelerator-optimized-machines#g2-vms"
GCP_N1 = "https://cloud.google.com/compute/docs/gpus#n1-gpus"

N1_SHAPES = {"n1-standard-4": (4, 15), "n1-standard-8": (8, 30), "n1-standard-16": (16, 60),
             "n1-standard-32": (32, 120), "n1-standard-64": (64, 240), "n1-highmem-8": (8, 52)}
N1_COMBOS = [  # (machine, gpu, count): GPU counts and vCPU/memory limits per cloud.google.com/compute/docs/gpus
    ("n1-standard-4", "T4", 1), ("n1-standard-8", "T4", 1), ("n1-standard-16", "T4", 1),
    ("n1-highmem-8", "T4", 1), ("n1-standard-16", "T4", 2), ("n1-standard-32", "T4", 4),
    ("n1-standard-64", "T4", 4),
    ("n1-standard-8", "V100", 1), ("n1-highmem-8", "V100", 1), ("n1-standard-16", "V100", 2),
    ("n1-standard-32", "V100", 4), ("n1-standard-64", "V100", 8),
]
ACCEL = {"T4": "nvidia-tesla-t4", "V100": "nvidia-tesla-v100"}


def gcp():
    rows = []
    for n in (1, 2, 4, 8):
        ic = "NVSwitch 900GB/s; GPUDirect-TCPX 1000Gbps" if n == 8 else ("NVLink" if n > 1 else "PCIe")
        rows.append((f"a3-highgpu-{n}g", "a3-highgpu", "H100-80GB", n, 80, 26 * n, 234 * n, ic, GCP_A3))
    rows.append(("a3-megagpu-8g", "a3-megagpu", "H100-80GB", 8, 80, 208, 1872,
                 "NVSwitch 900GB/s; GPUDirect-TCPXO 1800Gbps", GCP_A3_MEGA))
    for n in (1, 2, 4, 8):
        ic = "NVSwitch 600GB/s" if n == 8 else ("NVLink" if n > 1 else "PCIe")
        rows.append((f"a2-ultragpu-{n}g", "a2-ultragpu", "A100-80GB", n, 80, 12 * n, 170 * n, ic, GCP_A2))
    a2_mem = {1: 85, 2: 170, 4: 340, 8: 680}
    for n in (1, 2, 4, 8):
        ic = "NVSwitch 600GB/s" if n == 8 else ("NVLink" if n > 1 else "PCIe")
        rows.append((f"a2-highgpu-{n}g", "a2-highgpu", "A100-40GB", n, 40, 12 * n, a2_mem[n], ic, GCP_A2))
    rows.append(("a2-megagpu-16g", "a2-megagpu", "A100-40GB", 16, 40, 96, 1360, "NVSwitch 600GB/s", GCP_A2))
    g2 = {4: 1, 8: 1, 12: 1, 16: 1, 24: 2, 32: 1, 48: 4, 96: 8}
    for v, n in g2.items():
        rows.append((f"g2-standard-{v}", "g2-standard", "L4", n, 24, v, 4 * v, "PCIe", GCP_G2))
    out = [("gcp", name, fam, gpu, n, gm, v, m, ic, "", src) for name, fam, gpu, n, gm, v, m, ic, src in rows]
    for machine, gpu, n in N1_COMBOS:
        v, m = N1_SHAPES[machine]
        gm = 16
        ic = "NVLink" if (gpu == "V100" and n > 1) else "PCIe"
        out.append(("gcp", f"{machine}+{gpu}:{n}", "n1", gpu, n, gm, v, m, ic, ACCEL[gpu], GCP_N1))
    return out


AZ = "https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/{}"


def azure():
    rows = [
        ("Standard_ND96isr_H100_v5", "NDisr_H100_v5", "H100-80GB", 8, 80, 96, 1900, "NVLink 900GB/s; InfiniBand 3200Gbps", AZ.format("ndh100v5-series")),
        ("Standard_ND96asr_v4", "NDasr_A100_v4", "A100-40GB", 8, 40, 96, 900, "NVLink 600GB/s; InfiniBand 1600Gbps", AZ.format("nda100v4-series")),
        ("Standard_ND96amsr_A100_v4", "NDamsr_A100_v4", "A100-80GB", 8, 80, 96, 1900, "NVLink 600GB/s; InfiniBand 1600Gbps", AZ.format("ndma100v4-series")),
        ("Standard_NC24ads_A100_v4", "NCads_A100_v4", "A100-80GB", 1, 80, 24, 220, "PCIe", AZ.format("nca100v4-series")),
        ("Standard_NC48ads_A100_v4", "NCads_A100_v4", "A100-80GB", 2, 80, 48, 440, "PCIe", AZ.format("nca100v4-series")),
        ("Standard_NC96ads_A100_v4", "NCads_A100_v4", "A100-80GB", 4, 80, 96, 880, "PCIe", AZ.format("nca100v4-series")),
        ("Standard_NC4as_T4_v3", "NCasT4_v3", "T4", 1, 16, 4, 28, "PCIe", AZ.format("ncast4v3-series")),
        ("Standard_NC8as_T4_v3", "NCasT4_v3", "T4", 1, 16, 8, 56, "PCIe", AZ.format("ncast4v3-series")),
        ("Standard_NC16as_T4_v3", "NCasT4_v3", "T4", 1, 16, 16, 110, "PCIe", AZ.format("ncast4v3-series")),
        ("Standard_NC64as_T4_v3", "NCasT4_v3", "T4", 4, 16, 64, 440, "PCIe", AZ.format("ncast4v3-series")),
        ("Standard_NV36ads_A10_v5", "NVadsA10_v5", "A10", 1, 24, 36, 440, "PCIe", AZ.format("nvadsa10v5-series")),
        ("Standard_NV36adms_A10_v5", "NVadsA10_v5", "A10", 1, 24, 36, 880, "PCIe", AZ.format("nvadsa10v5-series")),
        ("Standard_NV72ads_A10_v5", "NVadsA10_v5", "A10", 2, 24, 72, 880, "PCIe", AZ.format("nvadsa10v5-series")),
    ]
    return [("azure", name, fam, gpu, n, gm, v, m, ic, "", src) for name, fam, gpu, n, gm, v, m, ic, src in rows]


def all_rows():
    return aws() + gcp() + azure()
