"""no-long-lived-keys: identities are federated or attached, never given a key that can leak.

AWS access keys, GCP service-account keys, Azure AD application and service-principal
passwords (and certificates), and Azure storage account keys (shared-key access) are static
credentials: anyone holding the secret is the identity
until someone rotates it. spotroute's jobs use instance profiles, attached service accounts and
managed identities; its deployers use OIDC federation (route bootstrap).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.rules.model import UNKNOWN, Settings, is_false
from policies.rules.resource_types import AZURE_STORAGE_ACCOUNT

LONG_LIVED_KEY_TYPES: Mapping[str, str] = {
    "aws:iam/accessKey:AccessKey": "an AWS access key",
    "aws:iam/userLoginProfile:UserLoginProfile": "an AWS console password",
    "aws:iam/serviceSpecificCredential:ServiceSpecificCredential": "an AWS service credential",
    "gcp:serviceaccount/key:Key": "a GCP service-account key",
    "gcp:serviceAccount/key:Key": "a GCP service-account key",
    "gcp:apikeys/key:Key": "a GCP API key",
    "azuread:index/applicationPassword:ApplicationPassword": "an Azure AD application secret",
    "azuread:index/servicePrincipalPassword:ServicePrincipalPassword": "an Azure AD client secret",
    "azuread:index/applicationCertificate:ApplicationCertificate": "an Azure AD certificate",
    "azuread:index/servicePrincipalCertificate:ServicePrincipalCertificate": (
        "an Azure AD certificate"
    ),
    "azure-native:storage:listStorageAccountKeys": "Azure storage account keys",
}


def long_lived_key_violations(
    resource_type: str, props: Mapping[str, Any], settings: Settings
) -> list[str]:
    """No static credential of any cloud is created by a stack."""
    if resource_type == AZURE_STORAGE_ACCOUNT:
        # Account keys are long-lived, all-powerful secrets that exist unless turned off.
        shared_key = props.get("allowSharedKeyAccess")
        if shared_key is not UNKNOWN and not is_false(shared_key):
            return [
                "storage account allows shared-key access (account keys) — set "
                "allowSharedKeyAccess: false; the job identity gets a data role instead"
            ]
        return []
    what = LONG_LIVED_KEY_TYPES.get(resource_type)
    if what is None:
        return []
    return [
        f"creates {what}, a long-lived secret — use the node's identity (instance profile, "
        "attached service account, managed identity) or OIDC federation (`route bootstrap`)"
    ]
