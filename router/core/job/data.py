"""The job's training data: where a data set is (cloud inferred from the URL), its replicas,
its size and how the job reads it (stream, copy or auto).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, ValidationInfo, field_validator

from router.contract.clouds import Cloud
from router.core.job.validation import Strict, not_bool, problem
from router.core.user_values import show_value


def cloud_of_url(url: str) -> str | None:
    """The cloud a storage URL lives in, from its scheme or host; None when it cannot tell."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    by_scheme = {
        "s3": "aws",
        "gs": "gcp",
        "gcs": "gcp",
        "az": "azure",
        "abfs": "azure",
        "abfss": "azure",
        "file": "local",
    }
    if scheme in by_scheme:
        return by_scheme[scheme]
    if scheme in ("https", "http"):
        if host.endswith((".blob.core.windows.net", ".dfs.core.windows.net")):
            return "azure"
        if host == "storage.googleapis.com":
            return "gcp"
        if host.endswith(".amazonaws.com") and "s3" in host.split("."):
            return "aws"
    return None


DEFAULT_COPY_GBPS = 1.0  # sustained cross-cloud copy rate, gigabits per second (docs/job-spec.md)
# The sane ranges (docs/job-spec.md): staging hours = size ÷ rate and egress = size × passes must
# stay finite — a denormal rate (1.0e-320) made the staging time inf hours.
MAX_SIZE_GB = 1e9  # an exabyte
MIN_PASSES, MAX_PASSES = 0.01, 10_000.0
MIN_COPY_GBPS, MAX_COPY_GBPS = 0.001, 10_000.0  # 1 Mbit/s to 10 Tbit/s


class DataLocation(Strict):
    """A storage location: URL, the cloud it is in (inferred from the URL) and its region."""

    url: str = Field(description="where the training data is: s3://, gs://, az://, file://, ...")
    cloud: Cloud | None = Field(
        default=None, validate_default=True, description="inferred from the URL scheme"
    )
    region: str = Field(description="region the data is in, e.g. us-east-1")

    @field_validator("cloud")
    @classmethod
    def _infer_cloud(cls, value: str | None, info: ValidationInfo) -> str | None:
        url = info.data.get("url")
        if not isinstance(url, str):  # url itself is wrong: that is the error to report
            return value
        inferred = cloud_of_url(url)
        if value is None:
            if inferred is None:
                raise problem(
                    f"cannot tell which cloud {show_value(url)} is in — use an s3://, gs://,"
                    " az://, abfs:// or file:// URL, or add cloud: aws|gcp|azure|local next to it",
                    field="url",
                )
            return inferred
        if inferred is not None and inferred != value:
            raise problem(
                f"cloud is {value} but {show_value(url)} is in {inferred} — fix one of them"
            )
        return value


class DataReplica(DataLocation):
    """Another copy of the same data set (another cloud or region); the nearest one is read."""


class Data(DataLocation):
    """One training data set: where it is, how big, and how the job reads it."""

    size_gb: float = Field(
        ge=0, le=MAX_SIZE_GB, description="data size in GB (priced as egress when moved)"
    )
    access: Literal["auto", "stream", "copy"] = Field(
        default="auto",
        description="stream = read from where it is on every pass; copy = copy it next to the"
        " GPUs first; auto = the cheaper of the two for each placement",
    )
    passes: float = Field(
        default=1.0,
        ge=MIN_PASSES,
        le=MAX_PASSES,
        description="passes (epochs) over the data; streaming pays each one",
    )
    replicas: tuple[DataReplica, ...] = Field(
        default=(), description="further copies of the same data: [{url, region}, ...]"
    )
    copy_gbps: float = Field(
        default=DEFAULT_COPY_GBPS,
        ge=MIN_COPY_GBPS,
        le=MAX_COPY_GBPS,
        description="copy throughput in gigabits per second (staging time = size ÷ rate)",
    )
    start_while_copying: bool = Field(
        default=False,
        description="true = the job can start on partial data, so the GPUs do not wait for"
        " the copy",
    )

    @field_validator("size_gb", "passes", "copy_gbps", mode="before")
    @classmethod
    def _numbers_not_bool(cls, value: object) -> object:
        return not_bool(value)

    @field_validator(
        "replicas", mode="before", json_schema_input_type=DataReplica | list[DataReplica]
    )
    @classmethod
    def _replica_list(cls, value: object) -> object:
        return [value] if isinstance(value, Mapping) else value

    @property
    def locations(self) -> tuple[DataLocation, ...]:
        """Where the data can be read from: the main URL first, then the replicas."""
        return (self, *self.replicas)
