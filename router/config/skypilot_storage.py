"""SkyPilot's bucket mounts, read as SkyPilot documents them: `file_mounts` → checkpoint and data.

The storage forms (docs.skypilot.co/en/latest/reference/storage.html, "Cloud Buckets"; the code
is sky/data/storage.py `Storage.from_yaml_config` and the task loader's `_fill_in_env_vars`):

- a string: a local path (SkyPilot copies it from the launching machine) or a bucket URL
  (`s3://`, `gs://`, `https://<account>.blob.core.windows.net/<container>`, `r2://`, `cos://`, …);
- a mapping: `source` (a bucket URL, or local path(s) SkyPilot uploads into `name`), `name` (the
  bucket SkyPilot creates, or reuses when it exists), `store` (`s3`, `gcs`, `azure`, `r2`, `ibm`,
  `oci`, …; omitted: the cloud the task runs on), `mode` (`MOUNT` by default, `COPY`,
  `MOUNT_CACHED`), `persistent`; `store: volume` is a volume, not a bucket;
- `$NAME` and `${NAME}` in mount paths, names and sources are the task's `envs`; a name the envs
  do not set stays as written.

A mount whose path or bucket name says checkpoint (or ckpt) is the checkpoint bucket; else an empty
bucket SkyPilot would create for outputs (`name` without `source`) is, because that is where the
task writes. Buckets with content are data. Pure: data in, data out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

SECTIONS = ("file_mounts", "storage_mounts")
STORE_SCHEMES = {"s3": "s3://", "gcs": "gs://", "azure": "az://"}
CLOUD_STORES = {"aws": "s3", "gcp": "gcs", "azure": "azure"}
# Object stores SkyPilot also mounts, which are not in aws, gcp or azure.
OTHER_STORES = frozenset({"r2", "ibm", "cos", "oci", "nebius", "coreweave", "cw"})
MODES = ("MOUNT", "COPY", "MOUNT_CACHED")
_BUCKET_URL = re.compile(r"^(s3|gs|gcs|az|abfs|abfss|r2|cos|oci|nebius|cw)://", re.IGNORECASE)
_AZURE_HTTPS = re.compile(r"^https://[a-z0-9]+\.(blob|dfs)\.core\.windows\.net/", re.IGNORECASE)
_OURS = re.compile(r"^(s3|gs|az|abfs|abfss)://", re.IGNORECASE)
# SkyPilot's pattern for env-var names in file_mounts (sky/task.py _fill_in_env_vars).
_ENV_REF = re.compile(r"\$\{?\b([a-zA-Z_][a-zA-Z0-9_]*)\b\}?")
_CHECKPOINT_WORDS = re.compile(r"checkpoint|ckpt", re.IGNORECASE)


class SkyPilotProblem(ValueError):
    """A SkyPilot task spotroute cannot place; `where` is the field path (router.config.skypilot
    raises it too)."""

    def __init__(self, where: str, text: str) -> None:
        super().__init__(text)
        self.where = where
        self.text = text


class Notes(Protocol):
    """Where the mapping says what it did (router.config.skypilot._Notes)."""

    def map(self, src: str, dst: str, value: object) -> None: ...

    def ignore(self, src: str, why: str) -> None: ...


@dataclass(frozen=True)
class BucketMount:
    """One bucket a task mounts: where, which bucket, and whether it holds data or takes output.

    `url` is None for a named bucket whose store is "the cloud the task runs on" when the task
    may run on several clouds: no single URL names it.
    """

    where: str  # the field, e.g. "file_mounts./output"
    path: str  # the mount path on the node
    url: str | None
    name: str  # the bucket's name as written (env vars filled in)
    kind: Literal["data", "output"]  # data: has content to read; output: an empty new bucket
    mode: str  # MOUNT, COPY or MOUNT_CACHED
    how: str  # how the fields were read, for the mapping line
    upload: str = ""  # local source SkyPilot would upload into the bucket (spotroute does not)

    @property
    def says_checkpoint(self) -> bool:
        return bool(_CHECKPOINT_WORDS.search(self.path) or _CHECKPOINT_WORDS.search(self.how))


def fill_envs(text: str, envs: Mapping[str, str | None]) -> tuple[str, list[str]]:
    """`text` with `$NAME` / `${NAME}` of `envs` filled in, and the names that have no value yet
    (SkyPilot asks for those with --env at launch)."""
    waiting: list[str] = []

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in envs:
            return match.group(0)
        found = envs[name]
        if found is None:
            waiting.append(name)
            return match.group(0)
        return found

    return _ENV_REF.sub(value, text), waiting


def bucket_mounts(
    data: Mapping[str, object],
    envs: Mapping[str, str | None],
    clouds: tuple[str, ...],
    notes: Notes,
) -> list[BucketMount]:
    """Every bucket the task mounts, in file order; local paths and volumes said and skipped.

    `clouds` are the clouds the task may run on (a `name` without `store` lives in that cloud).
    """
    out: list[BucketMount] = []
    for section in SECTIONS:
        mounts = data.get(section) or {}
        if not isinstance(mounts, Mapping):
            raise SkyPilotProblem(section, "expected a mapping of remote path → source")
        for raw_path, spec in mounts.items():
            path, _ = fill_envs(str(raw_path), envs)
            where = f"{section}.{raw_path}"
            mount = _mount(where, path, spec, envs, clouds, notes)
            if mount is not None:
                out.append(mount)
    return out


def _mount(
    where: str,
    path: str,
    spec: object,
    envs: Mapping[str, str | None],
    clouds: tuple[str, ...],
    notes: Notes,
) -> BucketMount | None:
    if isinstance(spec, str):
        source, waiting = fill_envs(spec, envs)
        if waiting:
            notes.ignore(where, _waiting_text(waiting))
            return None
        if not _is_bucket(source):
            notes.ignore(where, _LOCAL)
            return None
        # A bucket URL as a plain file mount: SkyPilot copies its contents onto the node.
        return _checked(where, BucketMount(where, path, _url(source), source, "data", "COPY",
                                           "bucket URL"), notes)  # fmt: skip
    if not isinstance(spec, Mapping):
        notes.ignore(where, "not a path, a bucket URL or a storage mapping")
        return None
    store = str(spec.get("store") or "").strip().lower()
    if store == "volume":
        notes.ignore(where, "a volume — spotroute does not create or attach volumes")
        return None
    mode = str(spec.get("mode") or "MOUNT").strip().upper()
    if mode not in MODES:
        raise SkyPilotProblem(f"{where}.mode", f"'{mode}' is not one of {', '.join(MODES)}")
    name, waiting = fill_envs(str(spec.get("name") or ""), envs)
    raw_source = spec.get("source")
    sources = raw_source if isinstance(raw_source, list) else [raw_source] if raw_source else []
    filled = [fill_envs(str(s), envs) for s in sources]
    waiting += [w for _text, names in filled for w in names]
    if waiting:
        notes.ignore(where, _waiting_text(waiting))
        return None
    source_texts = [text for text, _names in filled]
    how = _how(spec, name, store)
    if len(source_texts) == 1 and _is_bucket(source_texts[0]):
        # An existing bucket; SkyPilot takes the name from the URL.
        url = _url(source_texts[0])
        return _checked(where, BucketMount(where, path, url, url, "data", mode, how), notes)
    if not name:
        notes.ignore(where, _LOCAL)
        return None
    if "$" in name:
        notes.ignore(where, f"bucket name {name} names an env var the task's envs do not set")
        return None
    if store in OTHER_STORES:
        notes.ignore(where, f"store {store}: not a bucket of aws, gcp or azure")
        return None
    if store and store not in STORE_SCHEMES:
        raise SkyPilotProblem(f"{where}.store", f"'{store}' is not a SkyPilot store name")
    if not store and len(clouds) == 1 and clouds[0] in CLOUD_STORES:
        store = CLOUD_STORES[clouds[0]]
        how += f", store {store} (the task's cloud)"
    named = f"{STORE_SCHEMES[store]}{name}" if store else None
    upload = ", ".join(source_texts)
    kind: Literal["data", "output"] = "data" if upload else "output"
    return BucketMount(where, path, named, name, kind, mode, how, upload)


_LOCAL = (
    "a path on this machine — spotroute does not copy local files; put them in the image or "
    "a bucket"
)


def _waiting_text(names: list[str]) -> str:
    shown = ", ".join(dict.fromkeys(names))
    return (
        f"the bucket is named by {shown}, which the task leaves to `sky launch --env` — set it "
        "in envs to map this mount"
    )


def _how(spec: Mapping[str, object], name: str, store: str) -> str:
    parts = []
    raw_name = str(spec.get("name") or "")
    if raw_name:
        parts.append(f"name {raw_name}" + (f" = {name}" if raw_name != name else ""))
    if spec.get("source"):
        parts.append(f"source {spec['source']}")
    if store:
        parts.append(f"store {store}")
    parts.append(f"mode {str(spec.get('mode') or 'MOUNT').upper()}")
    return ", ".join(parts)


def _is_bucket(text: str) -> bool:
    return bool(_BUCKET_URL.match(text) or _AZURE_HTTPS.match(text))


def _url(text: str) -> str:
    return re.sub(r"^gcs://", "gs://", text.strip(), flags=re.IGNORECASE)


def _checked(where: str, mount: BucketMount, notes: Notes) -> BucketMount | None:
    """The mount, unless its bucket is outside aws, gcp and azure (said)."""
    assert mount.url is not None
    if _OURS.match(mount.url) or _AZURE_HTTPS.match(mount.url):
        return mount
    notes.ignore(where, f"{mount.url}: not a bucket of aws, gcp or azure")
    return None


@dataclass(frozen=True)
class Storage:
    """What the mounts become: the checkpoint URL ("auto" = the stack's bucket) and data URLs."""

    checkpoint_url: str | None
    data: tuple[BucketMount, ...]


def map_mounts(mounts: list[BucketMount], notes: Notes) -> Storage:
    """Choose the checkpoint bucket (said checkpoint, else the first output bucket) and the data
    buckets; say, one line each, which mount became which field."""
    checkpoint = next((m for m in mounts if m.says_checkpoint), None) or next(
        (m for m in mounts if m.kind == "output"), None
    )
    checkpoint_url = None
    if checkpoint is not None:
        if checkpoint.url is None:
            checkpoint_url = "auto"
            notes.map(
                f"{checkpoint.where} ({checkpoint.how})",
                "checkpoint.url",
                f"auto — SkyPilot creates {checkpoint.name} in the cloud the task lands on; the "
                "job's stack creates its checkpoint bucket there (add store: s3|gcs|azure to use "
                "that bucket)",
            )
        else:
            checkpoint_url = checkpoint.url
            why = "" if checkpoint.says_checkpoint else " (the task's output bucket)"
            notes.map(f"{checkpoint.where} ({checkpoint.how})", "checkpoint.url",
                      checkpoint.url + why)  # fmt: skip
        if checkpoint.mode == "COPY":
            notes.ignore(
                f"{checkpoint.where} (mode COPY)",
                "SkyPilot does not write a COPY mount back to the bucket; spotroute's "
                "checkpoints go to the bucket itself",
            )
        if checkpoint.upload:
            notes.ignore(f"{checkpoint.where} (source)", _upload_text(checkpoint))
    data = []
    for m in mounts:
        if m is checkpoint:
            continue
        if m.kind == "output":
            notes.ignore(
                f"{m.where} ({m.how})",
                "a second output bucket — spotroute gives the job one bucket to write "
                "(checkpoint.url)",
            )
        elif m.url is None:
            notes.ignore(
                f"{m.where} ({m.how})",
                "no store, and the task may run on several clouds — add store: s3|gcs|azure",
            )
        else:
            data.append(m)
    return Storage(checkpoint_url, tuple(data))


def _upload_text(m: BucketMount) -> str:
    return (
        f"SkyPilot uploads {m.upload} into the bucket at launch; spotroute does not — upload it "
        f"to {m.url or m.name} before `route deploy`"
    )


def data_line(m: BucketMount, notes: Notes) -> None:
    """The mapping line of the data bucket that became data.url."""
    notes.map(f"{m.where} ({m.how})", "data.url", m.url)
    if m.upload:
        notes.ignore(f"{m.where} (source)", _upload_text(m))
