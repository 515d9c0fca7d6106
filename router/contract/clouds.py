"""The clouds spotroute knows: one `Cloud` type and the tuples every layer checks against."""

from __future__ import annotations

from typing import Literal, get_args

Cloud = Literal["aws", "gcp", "azure", "local"]
# The public clouds: the ones with price APIs, catalog rows, reservations and bootstrap identities.
PublicCloud = Literal["aws", "gcp", "azure"]

# Every placement target, the local one last (it stands in for any accelerator shape at $0).
CLOUDS: tuple[Cloud, ...] = get_args(Cloud)
PUBLIC_CLOUDS: tuple[PublicCloud, ...] = get_args(PublicCloud)

# A node powers itself off this many minutes after its job exits (components/startup.py's
# start-up script: `shutdown -h +5`; on AWS the instance terminates, instance-initiated shutdown
# behaviour; GCP stops the VM; an Azure node deletes itself), so a finished job stops billing
# then, however long the router takes to destroy its stack. A local node exits with its job.
SHUTDOWN_GRACE_MIN = 5


def powered_off_after_s(cloud: str) -> float:
    """Seconds from a job's finish until its nodes stop billing on `cloud` (0: the local
    target's nodes exit with the job)."""
    return 0.0 if cloud == "local" else SHUTDOWN_GRACE_MIN * 60.0
