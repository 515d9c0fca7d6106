"""SkyPilot task files accepted as they are: validate, plan and deploy's proposal, --explain."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from router.config.datafiles import load_catalog
from router.config.project import Project
from router.config.skypilot import is_skypilot_task, translate
from router.flows.plan import plan_job
from router.flows.proposals import propose
from tests.unit.cli_harness import isolate, route

TASKS = Path(__file__).resolve().parents[1] / "data" / "skypilot_tasks"
NOW = datetime(2025, 6, 1, tzinfo=UTC)

# What SkyPilot itself would ask the clouds for, per task (its GPU names in spotroute's words:
# SkyPilot's "A100" is the 40 GB part): accelerators, nodes, market, clouds, regions.
SKYPILOT_ASKS = {
    "hello_sky": ({("A100-40GB", 8)}, 1, "on-demand", {"aws"}, None),
    "managed_spot_storage": ({("V100", 1)}, 1, "spot", {"aws"}, None),
    "any_of_clouds": ({("H100-80GB", 8)}, 1, "spot", {"aws", "gcp"}, {"us-west-2", "us-central1"}),
    "ordered_small_gpus": ({("L4", 1), ("A10G", 1), ("T4", 1)}, 1, "on-demand", None, None),
    "distributed_docker": ({("A100-80GB", 8)}, 2, "on-demand", None, None),
    "set_of_gpus": ({("A100-40GB", 1), ("V100", 1)}, 1, "on-demand", {"gcp"}, None),
    "zone_spot_gcp": ({("L4", 1)}, 1, "spot", {"gcp"}, {"us-central1"}),
    "ordered_regions": ({("A100-40GB", 8)}, 1, "on-demand", {"aws"}, {"us-east-1", "us-west-2"}),
    "lora_checkpoint_bucket": ({("A100-40GB", 8)}, 1, "spot", None, None),
    "managed_job_checkpoint": ({("L4", 1)}, 1, "spot", {"gcp"}, None),
    "azure_blob_storage": ({("A100-80GB", 1)}, 1, "on-demand", {"azure"}, None),
    "reference_all_fields": (
        {("H100-80GB", 8)}, 4, "on-demand", {"aws", "gcp"}, {"us-west-2", "us-central1"}
    ),
}

# Tasks whose every offer the clouds' machine images cannot drive (router/data/images.csv):
# spotroute must plan nothing for them rather than boot nodes whose driver never loads. None
# today: AWS V100 (p3) nodes boot the proprietary-driver image (components/aws.py GPU_IMAGES).
IMAGE_REFUSED: dict[str, tuple[str, str, str]] = {}


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPOTROUTE_HOME", str(tmp_path / "home"))


def test_every_example_task_file_is_covered() -> None:
    assert sorted(p.stem for p in TASKS.glob("*.yaml")) == sorted(SKYPILOT_ASKS)


@pytest.mark.parametrize("task", sorted(SKYPILOT_ASKS))
def test_a_skypilot_task_plans_unchanged_with_what_skypilot_would_ask_for(task: str) -> None:
    accelerators, nodes, market, clouds, regions = SKYPILOT_ASKS[task]
    report = plan_job(TASKS / f"{task}.yaml", project=None, now=NOW)
    placements = report.result.placements
    if task in IMAGE_REFUSED:
        cloud, gpu, why = IMAGE_REFUSED[task]
        assert not placements, f"{task}: planned what {cloud}'s image cannot drive"
        catalog = load_catalog()
        types = [it for it in catalog.for_cloud(cloud) if it.gpu == gpu]
        assert types and all(why in catalog.refused[it.key] for it in types)
    else:
        assert placements, f"{task}: nothing planned"
    for p in placements:
        assert (p.gpu, p.gpu_count) in accelerators, p
        assert p.node_count == nodes, p
        assert p.market == market, p
        assert clouds is None or p.cloud in clouds, p
        assert regions is None or p.region in regions, p
    job = report.job
    assert {(a.gpu, a.count) for a in job.resources.accelerators} == accelerators
    assert job.node_count == nodes


def test_skypilot_v100_spot_task_on_aws_plans_on_p3() -> None:
    # The image p3 boots is tests/components/test_aws.py's to check.
    report = plan_job(TASKS / "managed_spot_storage.yaml", project=None, now=NOW)
    placements = report.result.placements
    assert placements and all(
        p.cloud == "aws" and p.market == "spot" and p.instance_type.startswith("p3")
        for p in placements
    )


def test_deploy_proposal_of_a_multi_node_docker_task_carries_image_env_and_nodes(
    tmp_path: Path,
) -> None:
    (tmp_path / "infra").mkdir()
    (tmp_path / "infra" / "Pulumi.yaml").write_text("name: spotroute\nruntime: python\n")
    proposal = propose(TASKS / "distributed_docker.yaml", project=Project(tmp_path / "infra"),
                       now=NOW, allow_stale=True)  # snapshot prices; freshness is tested elsewhere
    assert proposal.job.name == "llama-pretrain"
    assert proposal.chosen.node_count == 2
    run = proposal.job.run
    assert run.image == "nvcr.io/nvidia/pytorch:24.05-py3"
    assert run.command[:2] == ("/bin/bash", "-c") and "torchrun" in run.command[2]
    assert run.env == {"MODEL_SIZE": "7b", "NCCL_DEBUG": "INFO"}
    assert proposal.job.labels == {"team": "ml-platform"}


def test_spot_task_checkpoints_to_its_checkpoint_mount_and_data_is_its_bucket() -> None:
    import yaml

    data = yaml.safe_load((TASKS / "managed_spot_storage.yaml").read_text())
    t = translate(data, default_name="x")
    assert t.job["checkpoint"] == {"interval": "1h", "url": "s3://team-bert-checkpoints"}
    assert t.job["data"]["url"] == "s3://team-imagenet-data"
    assert t.job["run"]["command"][2].startswith("pip install -r requirements.txt\npython train.py")
    # SkyPilot's "no value = give it at launch": a secret read from the deploy's environment.
    assert t.job["run"]["env"] == {"EPOCHS": "3", "WANDB_PROJECT": None}
    assert any("run.secrets" in line and "WANDB_PROJECT" in line for line in t.mapped)
    ignored = "\n".join(t.ignored)
    for what in ("resources.job_recovery", "file_mounts.~/.netrc",
                 "(duration)", "(checkpointing)"):
        assert what in ignored, what
    assert all(" — " in line for line in t.ignored), "each ignored field says why"


def test_every_field_of_the_reference_is_mapped_or_said_ignored_with_a_reason() -> None:
    import yaml

    data = yaml.safe_load((TASKS / "reference_all_fields.yaml").read_text())
    t = translate(data, default_name="x")
    said = "\n".join(t.mapped + t.ignored)
    for field in (*data, *data["resources"], *data["file_mounts"]):
        if field not in ("name", "resources", "run", "file_mounts", "any_of", "infra"):
            assert field in said, field
    assert t.job["run"]["secrets"] == ["MY_HF_TOKEN"], "SkyPilot secrets stay secrets"


def test_set_form_and_mapping_form_of_accelerators_read_as_skypilot_means_them() -> None:
    set_form = translate({"resources": {"accelerators": {"A100:1": None, "V100:1": None}},
                          "run": "x"}, default_name="t")
    assert set_form.job["resources"]["accelerators"] == ["A100-40GB:1", "V100:1"]
    mapping = translate({"resources": {"accelerators": {"A100-80GB": 8}}, "run": "x"},
                        default_name="t")
    assert mapping.job["resources"]["accelerators"] == ["A100-80GB:8"]


def test_infra_with_zone_keeps_the_region_and_says_the_zone_is_not_kept() -> None:
    t = translate({"resources": {"infra": "aws/us-east-1/us-east-1a", "accelerators": "T4"},
                   "run": "x"}, default_name="t")
    assert t.job["resources"]["clouds"] == ["aws"]
    assert t.job["resources"]["regions"] == ["us-east-1"]
    assert any(line.startswith("resources zone us-east-1a") for line in t.ignored)


def test_candidates_on_clouds_spotroute_does_not_place_on_are_dropped_and_said() -> None:
    t = translate({"resources": {"accelerators": "H100:8", "any_of": [
        {"infra": "k8s/my-context"}, {"infra": "gcp"}]}, "run": "x"}, default_name="t")
    assert t.job["resources"]["clouds"] == ["gcp"]
    assert any("kubernetes" in line and "aws, gcp and azure" in line for line in t.ignored)


def test_a_spotroute_job_file_is_not_mistaken_for_a_skypilot_task() -> None:
    import yaml

    job = yaml.safe_load((TASKS.parents[2] / "examples" / "quickstart.yaml").read_text())
    assert not is_skypilot_task(job)
    assert not is_skypilot_task({**job, "duration_hours": None, "setup": "x"})


def test_cli_validate_explain_shows_the_mapping_and_what_was_ignored(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    isolate(monkeypatch, tmp_path)
    run = route(monkeypatch, capsys, "validate", "--explain", TASKS / "distributed_docker.yaml")
    assert run.code == 0, run
    lines = run.out.splitlines()
    assert lines[0] == "SkyPilot task mapped onto a spotroute job:"
    assert "  num_nodes → node_count: 2" in lines
    assert "  resources.image_id → run.image: nvcr.io/nvidia/pytorch:24.05-py3" in lines
    assert any(ln.startswith("  resources.disk_size: ignored — ") for ln in lines)
    assert lines[-1] == f"OK {TASKS / 'distributed_docker.yaml'}"


@pytest.mark.parametrize(
    ("task", "message"),
    [
        ("resources:\n  infra: k8s\n  accelerators: H100:8\nrun: x\n",
         "resources: no candidate spotroute can place (GPUs on aws, gcp or azure)"),
        ("resources:\n  accelerators: tpu-v4-8\nrun: x\n",
         "resources: no candidate spotroute can place"),
        ("resources:\n  accelerators: L4:1\nsetup: pip install x\n",
         "run: the task runs nothing"),
        ("resources:\n  cpus: 4+\nrun: python x.py\n",
         "resources.accelerators: no accelerators — spotroute places GPU jobs"),
    ],
)
def test_tasks_spotroute_cannot_place_are_one_line_errors_with_exit_2(
    task: str, message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    isolate(monkeypatch, tmp_path)
    path = tmp_path / "task.yaml"
    path.write_text(task)
    run = route(monkeypatch, capsys, "plan", path)
    assert run.code == 2, run
    assert run.err_lines == [run.err_lines[0]] and message in run.err_lines[0], run
    assert run.err_lines[0].startswith(f"error: {path}: ")
