"""The clouds spotroute knows: one `Cloud` type and the tuples every layer checks against."""

from __future__ import annotations

from typing import Literal, get_args

Cloud = Literal["aws", "gcp", "azure", "local"]
# The public clouds: the ones with price APIs, catalog rows, reservations and bootstrap identities.
PublicCloud = Literal["aws", "gcp", "azure"]

# Every placement target, the local one last (it stands in for any accelerator shape at $0).
CLOUDS: tuple[Cloud, ...] = get_args(Cloud)
PUBLIC_CLOUDS: tuple[PublicCloud, ...] = get_args(PublicCloud)
