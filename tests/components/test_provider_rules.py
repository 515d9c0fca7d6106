"""The placement program against mock clouds that know the providers' rules (cloud_account.py,
components/provider_rules/<cloud>.toml): names, their uniqueness across every stack alive at one
moment, default quotas, size limits and labels.

Every cloud's program runs into a fresh account for every cell of the matrix; a job's old and
new stacks live side by side through each kind of move; twenty jobs share one account. A move's
new stack is what the router writes (spotroute:nameScope "stack"); a stack from before per-stack
names (no nameScope) keeps its names.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from cloud_account import CloudAccount, ProviderRefusal
from harness import CapturedStack, run_program
from test_policy_pack_over_stacks import CLOUDS, MATRIX, stack_config
from test_secret_env import STATES

from components.provider_rules import ScriptTooLarge, rules_for
from router.core.failover import block_after, classify_launch_error

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:pulumi_gcp.*")

JOB = "llm-finetune"
SECRETS = {"secretEnvNames": ["HF_TOKEN"], "secretEnv": {"HF_TOKEN": "hf_not_a_real_token"}}
# Another zone of the same region, and another region with one of its zones, per cloud.
OTHER_ZONE = {"aws": "us-east-1b", "gcp": "us-central1-b", "azure": "2"}
OTHER_REGION = {
    "aws": ("us-west-2", "us-west-2a"),
    "gcp": ("europe-west4", "europe-west4-a"),
    "azure": ("westus2", "1"),
}
MOVES = ("same-zone", "other-zone", "other-region", "switch-market", "re-placement")


def config(cloud: str, job_name: str = JOB, **changes: Any) -> dict[str, Any]:
    """A 2-node spot placement with secret env, as the router writes a new stack file."""
    base = stack_config(cloud, "spot", "new-bucket", "no-ssh")
    return {**base, "jobName": job_name, "nodeCount": 2, "nameScope": "stack", **SECRETS,
            **changes}  # fmt: skip


def mocks(cloud: str) -> dict[str, Any]:
    """The cloud's invoke answers and computed outputs, the secret stores' included."""
    return {**CLOUDS[cloud].get("mocks", {}), "states": STATES[cloud]}


def up(account: CloudAccount, stack: str, values: dict[str, Any]) -> CapturedStack:
    return account.up(stack, values, **mocks(str(values["cloud"])))


def moved(cloud: str, kind: str) -> dict[str, Any]:
    """The new placement of each kind of move, from config(cloud)."""
    if kind == "other-zone":
        return config(cloud, zone=OTHER_ZONE[cloud])
    if kind == "other-region":
        region, zone = OTHER_REGION[cloud]
        return config(cloud, region=region, zone=zone)
    if kind == "switch-market":
        return config(cloud, market="on-demand")
    return config(cloud)  # same zone: a cheaper type, or the same place after a preemption


def names_of(stack: CapturedStack) -> dict[str, Any]:
    """Every custom resource's inputs by logical name (what `pulumi up` would diff)."""
    return {r.name: r.inputs for r in stack.custom_resources()}


# --- every program, every cell ------------------------------------------------------------------


@pytest.mark.parametrize(("cloud", "market", "bucket", "ssh"), MATRIX)
def test_every_cell_of_every_cloud_is_admitted_by_a_fresh_account(
    cloud: str, market: str, bucket: str, ssh: str
) -> None:
    values = {**stack_config(cloud, market, bucket, ssh), **SECRETS, "nameScope": "stack"}

    stack = up(CloudAccount(cloud), JOB, values)

    assert stack.custom_resources()


def test_the_account_refuses_a_name_its_scope_already_holds() -> None:
    # The defect of issue 29 item 1, as a real project answers it: a move whose new stack asks
    # for the old one's project-scoped names (spotroute:nameScope "job", the names of before).
    account = CloudAccount("gcp")
    up(account, JOB, config("gcp", nameScope="job"))

    with pytest.raises(ProviderRefusal, match=r"Error 409: .*already exists, alreadyExists"):
        up(account, f"{JOB}.2", config("gcp", nameScope="job"))
    assert account.stacks() == [JOB]  # the refused stack holds nothing


# --- a job's two stacks during each kind of move ------------------------------------------------


@pytest.mark.parametrize("kind", MOVES)
@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
def test_a_moves_old_and_new_stacks_live_side_by_side_in_one_account(cloud: str, kind: str) -> None:
    account = CloudAccount(cloud)
    old = JOB
    up(account, old, config(cloud))
    if kind == "re-placement":
        # A re-placement after a preemption moves the job's current stack (<job>.2) on.
        up(account, f"{JOB}.2", moved(cloud, "other-zone"))
        account.destroy(old)
        old = f"{JOB}.2"
    new = f"{JOB}.{3 if kind == 're-placement' else 2}"

    up(account, new, moved(cloud, kind))  # new-stack-up while the old stack still runs
    account.destroy(old)  # old-stack-down
    up(account, new, moved(cloud, kind))  # a later `route deploy` of the new stack

    assert set(account.stacks()) >= {new}


def test_gcp_names_of_a_moved_stack_are_its_own_and_within_gcps_limits() -> None:
    first = run_program(config("gcp"), **mocks("gcp"))
    second = run_program(config("gcp"), stack=f"{JOB}.2", **mocks("gcp"))

    def physical(stack: CapturedStack) -> dict[str, str]:
        """Every name the rules say the project holds, by resource and property."""
        found = {}
        for r in stack.custom_resources():
            for rule in rules_for("gcp").names_of(r.type):
                for key in (rule.property, rule.prefix_property):
                    if key and isinstance(r.inputs.get(key), str):
                        found[f"{r.name}.{key}"] = r.inputs[key]
        return found

    before, after = physical(first), physical(second)
    assert before[f"{JOB}-vpc.name"] == "spotroute-llm-finetune-vpc"  # the first keeps its names
    assert before[f"{JOB}-sa.accountId"] == "sr-llm-finetune"
    assert after[f"{JOB}-vpc.name"] == "spotroute-2-llm-finetune-vpc"
    assert after[f"{JOB}-sa.accountId"] == "sr-2-llm-finetune"
    # Nothing the project holds by name is the same in both (the bucket is salted per stack).
    assert {k for k in before if before[k] == after.get(k)} == set()


# --- stacks from before per-stack names ---------------------------------------------------------


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
def test_a_stack_from_before_per_stack_names_keeps_every_name_so_up_changes_nothing(
    cloud: str,
) -> None:
    legacy = {k: v for k, v in config(cloud).items() if k != "nameScope"}
    answers = mocks(cloud)

    for stack in (JOB, f"{JOB}.2"):  # a first stack, and one a cross-cloud move created
        before = run_program(legacy, stack=stack, **answers)
        after = run_program({**legacy, "nameScope": "job"}, stack=stack, **answers)
        assert names_of(after) == names_of(before)
    # The router writes "stack" into a new file; the first stack's names stay the same with it.
    first = run_program(config(cloud), stack=JOB, **answers)
    assert names_of(first) == names_of(run_program(legacy, stack=JOB, **answers))


def test_a_job_moved_onto_gcp_before_per_stack_names_moves_on_within_gcp() -> None:
    account = CloudAccount("gcp")
    legacy = {k: v for k, v in config("gcp").items() if k != "nameScope"}
    up(account, f"{JOB}.2", legacy)  # spotroute-llm-finetune-vpc, sr-llm-finetune

    up(account, f"{JOB}.3", config("gcp", zone=OTHER_ZONE["gcp"]))

    assert set(account.stacks()) == {f"{JOB}.2", f"{JOB}.3"}


# --- twenty jobs in one account -----------------------------------------------------------------

# 39-character names that share their first 36: long names are cut and hashed (GCP service
# account ids, AWS name prefixes), and the cut must never make two jobs' names the same.
TWENTY = [f"team-a-llama-finetune-experiment-run-{i:02d}" for i in range(20)]
RAISED = {"aws": {}, "gcp": {"NETWORKS": 64, "FIREWALLS": 200}, "azure": {}}


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
def test_twenty_jobs_and_a_move_each_share_one_account_without_a_name_clash(cloud: str) -> None:
    # Quotas raised where one region cannot hold twenty networks; AWS and Azure spread the jobs
    # over regions (their quotas are per region), their account-wide names stay in one account.
    regions = {"aws": ["us-east-1", "us-east-2", "us-west-2", "eu-west-1", "eu-central-1"] * 4,
               "azure": ["eastus", "westus2", "northeurope", "westeurope"] * 5}  # fmt: skip
    account = CloudAccount(cloud, quotas={**RAISED[cloud], "VPCs per Region (L-F678F1CE)": 9,
                                          "Internet gateways per Region (L-A4707A72)": 9,
                                          "EC2-VPC Elastic IPs (L-0263D0A3)": 9})  # fmt: skip
    for i, job in enumerate(TWENTY):
        place: dict[str, Any] = {}
        if cloud in regions:
            place = {"region": regions[cloud][i], "zone": "" if cloud == "aws" else "1"}
        up(account, job, config(cloud, job_name=job, **place))
    for i, job in enumerate(TWENTY[:4]):  # and a move of some of them, both stacks alive
        place = {"region": regions[cloud][i], "zone": ""} if cloud == "aws" else {}
        up(account, f"{job}.2", config(cloud, job_name=job, **place))

    assert len(account.stacks()) == 24


# --- default quotas of a fresh account ----------------------------------------------------------

# Where a fresh account stops taking placements in one region: (quota, the job that is refused).
FIRST_REFUSAL = {
    "aws": ("VpcLimitExceeded", 5),  # 5 VPCs per Region, the default VPC is one
    "gcp": ("QUOTA_EXCEEDED", 5),  # 5 networks per project, the default network is one
    "azure": ("PublicIPCountLimitReached", 11),  # 10 Standard public IPs per region
}


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
def test_a_fresh_accounts_default_quota_refuses_a_placement_the_router_fails_over_from(
    cloud: str,
) -> None:
    account = CloudAccount(cloud)
    code, nth = FIRST_REFUSAL[cloud]
    for job in TWENTY[: nth - 1]:
        up(account, job, config(cloud, job_name=job))

    with pytest.raises(ProviderRefusal) as refused:
        up(account, TWENTY[nth - 1], config(cloud, job_name=TWENTY[nth - 1]))

    failure = classify_launch_error(f"error: {refused.value}")
    assert failure is not None and (failure.code, failure.kind) == (code, "quota")
    place = config(cloud)
    now = datetime(2026, 12, 7, tzinfo=UTC)
    block = block_after(failure, cloud, place["region"], place["zone"], [], now)
    assert block.scope == "region"  # the next try goes to another region


def test_quota_rows_count_what_a_fresh_account_already_uses() -> None:
    vpcs = next(q for q in rules_for("aws").quotas if q.types == ("aws:ec2/vpc:Vpc",))
    networks = next(q for q in rules_for("gcp").quotas if q.name == "NETWORKS")

    assert (vpcs.limit, vpcs.in_use) == (5, 1)
    assert (networks.limit, networks.in_use) == (5, 1)


# --- sizes --------------------------------------------------------------------------------------

# An env that outgrows each cloud's script limit, and the limit's name in the refusal.
TOO_LARGE = {
    "aws": (20_000, "EC2 user data allows 16384"),
    "gcp": (270_000, r"startup-script\) allows 262144"),
    "azure": (70_000, "Azure custom data allows 65535"),
}


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
def test_a_start_up_script_the_cloud_would_refuse_fails_before_anything_is_created(
    cloud: str,
) -> None:
    size, limit = TOO_LARGE[cloud]
    job = {"image": "ghcr.io/acme/trainer:1.4", "command": ["python", "train.py"],
           "env": {"CONFIG_JSON": "x" * size}}  # fmt: skip
    account = CloudAccount(cloud)

    with pytest.raises(Exception, match=rf"run\.env: the start-up script would be .*{limit}"):
        up(account, JOB, config(cloud, job=job))
    assert account.holding() == []


def test_the_account_refuses_oversized_user_data_the_components_did_not_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The mocks refuse what the rules refuse, whatever the components check themselves.
    import components.startup

    monkeypatch.setattr(components.startup, "check_size", lambda *args: None)
    job = {"image": "ghcr.io/acme/t:1", "command": ["t"], "env": {"BIG": "x" * 20_000}}

    with pytest.raises(ProviderRefusal, match=r"EC2 user data is \d+ bytes, at most 16384"):
        up(CloudAccount("aws"), JOB, config("aws", job=job))


def test_script_too_large_names_the_field_that_grew() -> None:
    from components.provider_rules import check_size

    with pytest.raises(ScriptTooLarge, match=r"^run\.command: .* \(run\.command adds 9\)"):
        check_size(
            "aws", "aws:ec2/launchTemplate:LaunchTemplate", "userData", "x" * 16385,
            {"run.env": 3, "run.command": 9},
        )  # fmt: skip


# --- labels and tags ----------------------------------------------------------------------------


def test_the_account_refuses_labels_the_cloud_refuses() -> None:
    # 48 labels of the job's own plus the three spotroute adds, team and Name: 52 > AWS's 50.
    labels = {f"k{i:02d}": "v" for i in range(48)}

    with pytest.raises(ProviderRefusal, match=r"tags: \d+ labels, at most 50"):
        up(CloudAccount("aws"), JOB, config("aws", labels=labels))


def test_the_most_labels_job_yaml_accepts_fit_every_clouds_tag_limit() -> None:
    from router.core.job.model import ADDED_TAGS, MAX_TAGS

    # job.yaml's cap (core/job/model.py): without a team label spotroute adds it too.
    labels = {f"k{i:02d}": "v" for i in range(MAX_TAGS - len(ADDED_TAGS) - 1)}
    for cloud in ("aws", "azure"):
        up(CloudAccount(cloud), JOB, config(cloud, labels=labels))
    with pytest.raises(ProviderRefusal, match=r"tags: 51 labels, at most 50"):
        up(CloudAccount("aws"), JOB, config("aws", labels={**labels, "one-more": "v"}))
