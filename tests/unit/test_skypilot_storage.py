"""SkyPilot bucket mounts read as SkyPilot documents them: `name`, `source`, `store`, `mode` and
env-var names, in task files shaped like SkyPilot's own examples (tests/data/skypilot_tasks/).

SkyPilot's storage forms: docs.skypilot.co/en/latest/reference/storage.html ("Cloud Buckets":
`source` mounts an existing bucket, `name` creates or reuses one, `store` is optional and one of
s3, gcs, azure, r2, ibm, oci; `mode` MOUNT (default), COPY, MOUNT_CACHED); `$VAR` / `${VAR}` of
the task's envs are filled into file_mounts (sky/task.py `_fill_in_env_vars`); `store: volume` is
a volume (the task loader builds a volume config for it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from router.config.skypilot import translate
from router.flows.plan import plan_job
from tests.unit.cli_harness import isolate, route

TASKS = Path(__file__).resolve().parents[1] / "data" / "skypilot_tasks"
NOW_ISO = "2025-06-01T00:00:00+00:00"


def _task(name: str) -> dict[str, Any]:
    data = yaml.safe_load((TASKS / f"{name}.yaml").read_text())
    assert isinstance(data, dict)
    return data


def _said(t: Any) -> str:
    return "\n".join((*t.mapped, *t.ignored))


# task → (checkpoint.url, data.url) the mounts become.
MOUNTS = {
    # /checkpoint {name, store: s3}; /imagenet {source: s3://…}
    "managed_spot_storage": ("s3://team-bert-checkpoints", "s3://team-imagenet-data"),
    # /checkpoint {name} without store on a gcp-only task: the bucket is in gcp; ${DATA_BUCKET}
    "managed_job_checkpoint": ("gs://team-bert-qa-ckpt", "gs://team-squad-data/squad"),
    # /output {name: $CHECKPOINT_BUCKET_NAME}, no store, any cloud: the stack's bucket there
    "lora_checkpoint_bucket": ("auto", None),
    # an output container (name + store azure) and an https:// container URL as the data
    "azure_blob_storage": ("az://vit-results", "https://teamdata.blob.core.windows.net/imagenet"),
    # /checkpoints {source: s3://existing-bucket}; /datasets-s3: s3://… as a plain string
    "reference_all_fields": ("s3://existing-bucket", "s3://my-awesome-dataset"),
}


@pytest.mark.parametrize("task", sorted(MOUNTS))
def test_bucket_mounts_become_the_checkpoint_and_data_urls_skypilot_would_mount(task: str) -> None:
    checkpoint, data = MOUNTS[task]
    t = translate(_task(task), default_name=task)
    assert t.job["checkpoint"]["url"] == checkpoint
    assert (t.job.get("data") or {}).get("url") == data
    said = _said(t)
    assert "→ checkpoint.url: " in said
    assert ("→ data.url: " in said) == (data is not None)
    assert "a path on this machine" not in "\n".join(
        line for line in t.ignored if "checkpoint" in line or "/output" in line
    ), "a bucket mount is never explained as a local path"


def test_a_checkpoint_bucket_named_by_an_env_var_is_filled_in_and_said() -> None:
    data = _task("lora_checkpoint_bucket")
    data["file_mounts"]["/output"]["store"] = "s3"
    t = translate(data, default_name="lora")
    assert t.job["checkpoint"]["url"] == "s3://team-lora-checkpoints"
    line = next(m for m in t.mapped if m.startswith("file_mounts./output"))
    assert "name $CHECKPOINT_BUCKET_NAME = team-lora-checkpoints" in line, line
    assert line.endswith(", store s3, mode MOUNT) → checkpoint.url: s3://team-lora-checkpoints")


def test_a_named_bucket_without_store_on_any_cloud_is_the_stacks_bucket_and_says_why() -> None:
    t = translate(_task("lora_checkpoint_bucket"), default_name="lora")
    line = next(m for m in t.mapped if "checkpoint.url" in m)
    assert "SkyPilot creates team-lora-checkpoints in the cloud the task lands on" in line
    assert "add store: s3|gcs|azure" in line


@pytest.mark.parametrize(
    ("spec", "envs", "why"),
    [
        ({"name": "$BUCKET"}, {"BUCKET": None}, "leaves to `sky launch --env`"),
        ({"name": "${NOT_SET}-ckpt"}, {}, "names an env var the task's envs do not set"),
        ({"name": "ckpt", "store": "r2"}, {}, "store r2: not a bucket of aws, gcp or azure"),
        ({"source": "cos://us-east/ckpt"}, {}, "not a bucket of aws, gcp or azure"),
        ({"name": "ckpt", "store": "volume"}, {}, "a volume"),
        ({"source": "./ckpt"}, {}, "a path on this machine"),
    ],
)
def test_mounts_spotroute_cannot_use_are_said_with_the_reason(
    spec: dict[str, Any], envs: dict[str, Any], why: str
) -> None:
    t = translate({"resources": {"accelerators": "L4:1", "use_spot": True}, "envs": envs,
                   "file_mounts": {"/checkpoint": spec}, "run": "x"}, default_name="t")
    assert t.job["checkpoint"]["url"] == "auto"
    line = next(ln for ln in t.ignored if ln.startswith("file_mounts./checkpoint"))
    assert why in line, line


def test_a_named_bucket_with_a_local_source_is_data_and_the_upload_is_left_to_the_user() -> None:
    t = translate({"resources": {"infra": "aws", "accelerators": "T4:1"},
                   "file_mounts": {"/data": {"name": "team-corpus", "source": "~/corpus",
                                             "mode": "COPY"}},
                   "run": "x"}, default_name="t")
    assert t.job["data"]["url"] == "s3://team-corpus"
    assert any("SkyPilot uploads ~/corpus into the bucket at launch; spotroute does not" in ln
               for ln in t.ignored)


def test_a_data_bucket_without_store_on_several_clouds_is_said_not_guessed() -> None:
    t = translate({"resources": {"accelerators": "T4:1"},
                   "file_mounts": {"/data": {"name": "team-corpus", "source": "~/corpus"}},
                   "run": "x"}, default_name="t")
    assert "data" not in t.job
    assert any("no store, and the task may run on several clouds" in ln for ln in t.ignored)


def test_a_bad_mode_is_a_one_line_error_naming_the_field(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    isolate(monkeypatch, tmp_path)
    path = tmp_path / "task.yaml"
    path.write_text("resources:\n  accelerators: L4:1\nfile_mounts:\n  /ckpt:\n"
                    "    name: b\n    mode: SYNC\nrun: x\n")
    run = route(monkeypatch, capsys, "validate", path)
    assert run.code == 2, run
    assert run.err_lines == [
        f"error: {path}: file_mounts./ckpt.mode: 'SYNC' is not one of MOUNT, COPY, MOUNT_CACHED"
    ]


def test_the_mapped_checkpoint_bucket_reaches_the_planned_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import datetime

    monkeypatch.setenv("SPOTROUTE_HOME", str(tmp_path / "home"))
    report = plan_job(TASKS / "managed_job_checkpoint.yaml", project=None,
                      now=datetime.fromisoformat(NOW_ISO))
    job = report.job
    assert job.checkpoint is not None and job.checkpoint.url == "gs://team-bert-qa-ckpt"
    assert [d.url for d in job.data] == ["gs://team-squad-data/squad"]
    assert report.result.placements and all(p.cloud == "gcp" for p in report.result.placements)


def test_cli_validate_explain_names_the_bucket_each_mount_became(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    isolate(monkeypatch, tmp_path)
    run = route(monkeypatch, capsys, "validate", "--explain", TASKS / "managed_spot_storage.yaml")
    assert run.code == 0, run
    lines = run.out.splitlines()
    assert ("  file_mounts./checkpoint (name team-bert-checkpoints, store s3, mode MOUNT) → "
            "checkpoint.url: s3://team-bert-checkpoints") in lines
    assert ("  file_mounts./imagenet (source s3://team-imagenet-data, mode MOUNT) → data.url: "
            "s3://team-imagenet-data") in lines
