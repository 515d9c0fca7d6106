"""Preview review summaries and project discovery."""

from __future__ import annotations

from pathlib import Path

import pytest

from router.config.project import find_project, require_project
from router.core.errors import BadInput
from router.core.review import Change, review, review_json, review_markdown
from router.flows.init import init_project


def test_security_relevant_changes_come_first_by_category() -> None:
    changes = [
        Change("create", "aws:ec2/fleet:Fleet", "train-group-fleet", "urn:x::train-group-fleet"),
        Change("create", "aws:iam/role:Role", "train-identity-role", "urn:x::role"),
        Change("create", "aws:iam/rolePolicy:RolePolicy", "train-identity-policy", "urn:x::pol"),
        Change("create", "aws:ec2/securityGroup:SecurityGroup", "train-net-sg", "urn:x::sg"),
        Change("create", "aws:s3/bucketV2:BucketV2", "train-bucket", "urn:x::bucket"),
        Change("same", "aws:ec2/vpc:Vpc", "train-net-vpc", "urn:x::vpc"),
    ]
    r = review("train", changes, ["+ spotroute:cloud: 'aws'"])
    assert r.counts == {"create": 5}
    names = {k: [c.name for c in v] for k, v in r.by_category.items()}
    assert names["identities"] == ["train-identity-role"]
    assert names["access"] == ["train-identity-policy"]
    assert names["network exposure"] == ["train-net-sg"]
    assert names["storage"] == ["train-bucket"]
    assert names["compute and other"] == ["train-group-fleet"]

    markdown = review_markdown(r)
    assert markdown.startswith("## spotroute preview: `train`")
    assert markdown.index("Identities") < markdown.index("Access") < markdown.index("Storage")
    assert "+ spotroute:cloud: 'aws'" in markdown
    assert review_json(r)["categories"]["identities"][0]["type"] == "aws:iam/role:Role"


def test_project_is_found_by_walking_up_like_git(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.yaml").write_text("name: x\nruntime: python\n")
    deep = tmp_path / "jobs" / "team"
    deep.mkdir(parents=True)
    project = find_project(deep)
    assert project is not None and project.root == tmp_path.resolve()
    assert project.stack_config_path("train") == tmp_path.resolve() / "stacks" / "Pulumi.train.yaml"


def test_missing_project_and_bad_override_are_one_line_errors(tmp_path: Path) -> None:
    assert find_project(tmp_path) is None
    with pytest.raises(BadInput, match="route init"):
        require_project(tmp_path)
    with pytest.raises(BadInput, match="--project-dir"):
        find_project(override=tmp_path / "nope")


def test_init_scaffolds_a_project_and_never_overwrites(tmp_path: Path) -> None:
    created = init_project(tmp_path / "infra")
    assert {p.name for p in created} == {
        "Pulumi.yaml",
        "spotroute.yaml",
        "hello-gpu.yaml",
        ".gitkeep",
    }
    assert "stackConfigDir: stacks" in (tmp_path / "infra" / "Pulumi.yaml").read_text()
    project = find_project(tmp_path / "infra" / "jobs")
    assert project is not None
    with pytest.raises(BadInput, match="already exists"):
        init_project(tmp_path / "infra")


def test_scaffolded_job_and_org_config_are_valid(tmp_path: Path) -> None:
    from router.config.job_file import load_job
    from router.config.org_file import load_org_config

    init_project(tmp_path)
    assert load_job(tmp_path / "jobs" / "hello-gpu.yaml").name == "hello-gpu"
    assert load_org_config(tmp_path / "spotroute.yaml").budgets.max_price_per_hour == 60
