"""`route init DIR`: a spotroute project for teams that install spotroute into their own repo.

The templates are YAML text, kept verbatim (some lines are long).
"""
# ruff: noqa: E501

from __future__ import annotations

from pathlib import Path

from router.core.errors import BadInput

PULUMI_YAML = """\
name: spotroute
description: GPU job placements managed by spotroute (one stack per job)
runtime: python
stackConfigDir: stacks
"""

ORG_CONFIG = """\
# spotroute org config (docs/org-config.md). Never put secrets here.
clouds: [aws, gcp, azure, local]
regions:
  # "local" is the local target (examples and smoke tests on this machine).
  allow: ["us-*", "europe-*", "eu-*", "eastus*", "westus*", "westeurope", "northeurope", "local"]
max_quote_age_s: 86400
budgets:
  max_price_per_hour: 60
# discounts:
#   - {cloud: aws, family: "p4*", percent: 12}
# reservations:
#   - {cloud: aws, region: us-east-1, zone: us-east-1a, instance_type: p4d.24xlarge, count: 2, price_per_hour: 19.22}
"""

EXAMPLE_JOB = """\
name: hello-gpu
resources:
  accelerators: "T4:1"
  clouds: [local]
market: on-demand
duration_hours: 0.1
checkpoint: {interval: 1m}
run:
  command: ["/bin/sh", "-c", "i=0; while true; do i=$((i+1)); echo step $i; echo $i > \\"$SPOTROUTE_CHECKPOINT_DIR/step\\"; sleep 2; done"]
labels: {team: platform}
"""


def init_project(directory: Path) -> list[Path]:
    """Create the project files; refuses to overwrite any existing one. Returns what it created."""
    files = {
        directory / "Pulumi.yaml": PULUMI_YAML,
        directory / "spotroute.yaml": ORG_CONFIG,
        directory / "jobs" / "hello-gpu.yaml": EXAMPLE_JOB,
        directory / "stacks" / ".gitkeep": "",
    }
    existing = [p for p in files if p.exists()]
    if existing:
        raise BadInput(f"DIRECTORY: {existing[0]} already exists — choose an empty directory")
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return list(files)
