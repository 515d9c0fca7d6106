"""The bootstrap's least-privilege deployers may read what `route quotas refresh` reads, and only
with the permissions the quota sources name in their error messages (docs/quotas.md)."""

from __future__ import annotations

from test_bootstrap import (
    AZ_ROLE_DEFINITION,
    GCP_CUSTOM_ROLE,
    ROLE_POLICY,
    allowed_actions,
    args,
    deploy,
    document,
)

from router.prices.quotas import aws, azure, gcp


def test_aws_deployer_reads_gpu_quotas_and_their_usage() -> None:
    policy = document(deploy(args(clouds=("aws",))), ROLE_POLICY, "policy")

    assert {aws.GET_SERVICE_QUOTA, aws.GET_DEFAULT_QUOTA, aws.GET_METRIC_DATA} <= (
        allowed_actions(policy)
    )
    # Reads only: nothing that requests an increase or writes metrics.
    granted = allowed_actions(policy)
    assert not [a for a in granted if a.startswith("servicequotas:Request")]
    assert not [a for a in granted if a.startswith("cloudwatch:Put")]


def test_gcp_deployer_reads_region_quotas() -> None:
    roles = deploy(args(clouds=("gcp",))).of_type(GCP_CUSTOM_ROLE)
    (role,) = [r.inputs for r in roles if r.inputs["roleId"] == "spotrouteDeployer"]

    assert gcp.PERMISSION in role["permissions"]


def test_azure_deployer_reads_compute_usage() -> None:
    stack = deploy(args(clouds=("azure",)))
    definitions = {r.inputs["roleName"]: r.inputs for r in stack.of_type(AZ_ROLE_DEFINITION)}

    actions = definitions["spotroute-deployer"]["permissions"][0]["actions"]
    assert azure.PERMISSION in actions
