"""The Azure job identity's checkpoint role (issue 15 item 13): the bootstrap defines it with blob
data actions only, the placement assigns it under the job's path condition, and the condition
guards every action the role holds — so no part of the grant escapes the job's prefix.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from test_azure import BLOBS, SUBSCRIPTION, assignments, azure_config, placement
from test_bootstrap import AZ_ROLE_DEFINITION, args, deploy

from components.bootstrap.azure_permissions import (
    AZURE_JOB_DATA_ACTIONS,
    AZURE_STORAGE_BLOB_DATA_CONTRIBUTOR,
    AZURE_STORAGE_BLOB_DATA_READER,
    azure_job_role_guid,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:pulumi_gcp.*")
__all__ = ["azure_config"]  # the fixture, shared with test_azure.py

# What Storage Blob Data Contributor holds beyond blob data actions: not path-conditionable.
CONTROL_PLANE = {
    "Microsoft.Storage/storageAccounts/blobServices/containers/delete",
    "Microsoft.Storage/storageAccounts/blobServices/containers/write",
    "Microsoft.Storage/storageAccounts/blobServices/generateUserDelegationKey/action",
}


def job_role() -> dict[str, Any]:
    stack = deploy(args(clouds=("azure",)))
    (role,) = [
        r.inputs
        for r in stack.of_type(AZ_ROLE_DEFINITION)
        if r.inputs["roleName"] == "spotroute-job-checkpoints"
    ]
    assert stack.outputs["azure_job_role_definition_id"] == (
        f"/subscriptions/{SUBSCRIPTION}/providers/Microsoft.Authorization/roleDefinitions/"
        f"{role['roleDefinitionId']}"
    )
    return role


def test_bootstrap_defines_the_job_checkpoint_role_with_blob_data_actions_only() -> None:
    role = job_role()

    assert role["roleDefinitionId"] == azure_job_role_guid(SUBSCRIPTION)
    assert role["roleType"] == "CustomRole"
    assert role["assignableScopes"] == [f"/subscriptions/{SUBSCRIPTION}"]
    assert role["permissions"] == [
        {
            "actions": [],
            "dataActions": [
                f"{BLOBS}/read",
                f"{BLOBS}/write",
                f"{BLOBS}/delete",
                f"{BLOBS}/add/action",
                f"{BLOBS}/move/action",
            ],
        }
    ]
    held = set(role["permissions"][0]["actions"]) | set(role["permissions"][0]["dataActions"])
    assert not held & CONTROL_PLANE


def test_job_identity_is_granted_the_checkpoint_role_not_blob_data_contributor(
    azure_config: dict[str, Any],
) -> None:
    roles = assignments(placement(azure_config))

    assert set(roles) == {azure_job_role_guid(SUBSCRIPTION)}
    assert AZURE_STORAGE_BLOB_DATA_CONTRIBUTOR not in roles
    assert AZURE_STORAGE_BLOB_DATA_READER not in roles  # no data URL here


def test_the_path_condition_guards_every_action_the_checkpoint_role_holds(
    azure_config: dict[str, Any],
) -> None:
    role = job_role()
    condition = assignments(placement(azure_config))[role["roleDefinitionId"]]["condition"]
    guarded = set(re.findall(r"ActionMatches\{'([A-Za-z./]+)'\}", condition))

    assert set(role["permissions"][0]["dataActions"]) == set(AZURE_JOB_DATA_ACTIONS) == guarded
    assert role["permissions"][0]["actions"] == []  # nothing the condition could not see
