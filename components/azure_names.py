"""Pure Azure rules the components apply: physical names, blob URLs, resource ids, ABAC
conditions, zones and the locked SSH key. No resources here; components/azure.py uses them."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping

from components.args import (
    standard_labels,
)

# Job identities live in one resource group the bootstrap creates (components/bootstrap/azure.py);
# the deployer may create, delete and attach user-assigned identities there and nowhere else.
AZURE_JOB_IDENTITY_RESOURCE_GROUP = "spotroute-job-identities"
# The jobs' stores — created checkpoint storage accounts and the secret env's Key Vaults — live in
# one more: the deployer may write vaults, secrets and storage accounts, and grant the job roles on
# them, there only (a role assignment's scope is the one limit Azure's grant conditions lack).
AZURE_JOB_STORES_RESOURCE_GROUP = "spotroute-job-stores"
BLOB_HOST_SUFFIX = ".blob.core.windows.net"
_BLOBS = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs"
_ACCOUNT = re.compile(r"[a-z0-9]{3,24}")
_CONTAINER = re.compile(r"[a-z0-9](?!.*--)[a-z0-9-]{1,61}[a-z0-9]")
# Characters a blob prefix may have here; anything else (quotes above all) could break out of
# the role assignment condition's string literal.
_PREFIX = re.compile(r"[A-Za-z0-9._/-]+")
_ZONE = re.compile(r"(?:([a-z0-9]+)-)?([1-3])")


# --- pure helpers -------------------------------------------------------------------------------


def azure_tags(job_name: str, labels: dict[str, str]) -> dict[str, str]:
    return standard_labels(job_name, labels)


def physical_name(job_name: str, part: str, limit: int) -> str:
    """`<job>-<part>` cut to Azure's `limit` characters without a trailing dash."""
    return f"{job_name[: limit - len(part) - 1].rstrip('-')}-{part}"


def storage_account_name(job_name: str, salt: str) -> str:
    """Globally unique storage account name: 'sr' + job letters/digits + 8 hex of a stable hash.

    3–24 lowercase letters and digits, as Azure requires; `salt` (subscription and resource
    group) makes the name differ between subscriptions and between deployments of one job.
    """
    letters = re.sub(r"[^a-z0-9]", "", job_name.lower())
    digest = hashlib.sha256(f"{job_name}\0{salt}".encode()).hexdigest()[:8]
    return f"sr{letters}"[:16] + digest


def role_definition_id(subscription_id: str, role_guid: str) -> str:
    """Subscription-scoped resource id of a built-in role definition."""
    return (
        f"/subscriptions/{subscription_id}/providers/Microsoft.Authorization/roleDefinitions/"
        f"{role_guid}"
    )


def parse_blob_url(url: str, field: str) -> tuple[str, str, str]:
    """(account, container, prefix) of https://<account>.blob.core.windows.net/<container>/<prefix>.

    The prefix is "" or ends with "/".
    """
    example = f"https://<account>{BLOB_HOST_SUFFIX}/<container>/<prefix>/"
    if not url.startswith("https://"):
        raise ValueError(f"{field}: {url!r} is not an https:// blob URL — use {example}")
    host, _, path = url[len("https://") :].partition("/")
    account = host.lower().removesuffix(BLOB_HOST_SUFFIX)
    if account == host.lower() or not _ACCOUNT.fullmatch(account):
        raise ValueError(f"{field}: {url!r} names no Azure storage account — use {example}")
    container, _, prefix = path.partition("/")
    if not _CONTAINER.fullmatch(container):
        raise ValueError(
            f"{field}: {url!r} names no valid container (3–63 lowercase letters, digits, dashes)"
            f" — use {example}"
        )
    prefix = prefix.strip("/")
    if prefix and not _PREFIX.fullmatch(prefix):
        raise ValueError(
            f"{field}: {url!r} has a path with characters spotroute cannot grant safely — "
            "use letters, digits, '.', '_', '-' and '/'"
        )
    return account, container, (prefix + "/" if prefix else "")


def is_blob_url(url: str) -> bool:
    """True for https URLs on the Azure Blob Storage endpoint."""
    host = url.removeprefix("https://").partition("/")[0].lower()
    return url.startswith("https://") and host.endswith(BLOB_HOST_SUFFIX)


def container_resource_id(
    account: str, container: str, storage_account_ids: Mapping[str, str], field: str
) -> str:
    """Resource id of `container` in `account`, from the account ids the program passes."""
    by_name = {name.lower(): value for name, value in storage_account_ids.items()}
    account_id = by_name.get(account, "")
    if not account_id:
        raise ValueError(
            f"{field}: Azure grants access by resource id, which the URL lacks — pass "
            f"storage_account_ids={{{account!r}: '/subscriptions/<id>/resourceGroups/<rg>/"
            f"providers/Microsoft.Storage/storageAccounts/{account}'}}"
        )
    pattern = (
        r"/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Storage/"
        rf"storageAccounts/{re.escape(account)}"
    )
    if not re.fullmatch(pattern, account_id, flags=re.IGNORECASE):
        raise ValueError(
            f"storage_account_ids: {account_id!r} is not the resource id of account "
            f"{account!r} — use /subscriptions/<id>/resourceGroups/<rg>/providers/"
            f"Microsoft.Storage/storageAccounts/{account}"
        )
    return f"{account_id}/blobServices/default/containers/{container}"


def blob_prefix_condition(prefix: str, *, write: bool) -> str:
    """ABAC condition (version 2.0) limiting blob reads, lists and, with `write`, writes, adds,
    renames and deletes to blobs whose path starts with `prefix`.

    Azure RBAC scopes stop at the container; the condition narrows the grant to the prefix.
    """
    if not prefix or prefix == "/" or not _PREFIX.fullmatch(prefix):
        raise ValueError(
            f"checkpoint_prefix: {prefix!r} would grant the whole container or cannot be quoted "
            "safely — use e.g. 'job-name/'"
        )
    guarded = [f"!(ActionMatches{{'{_BLOBS}/read'}} AND NOT SubOperationMatches{{'Blob.List'}})"]
    if write:
        guarded += [
            f"!(ActionMatches{{'{_BLOBS}/{action}'}})"
            for action in ("write", "add/action", "delete", "move/action")
        ]
    objects = (
        "(\n (\n  "
        + "\n  AND\n  ".join(guarded)
        + "\n )\n OR\n (\n  "
        + f"@Resource[{_BLOBS}:path] StringStartsWith '{prefix}'"
        + "\n )\n)"
    )
    listing = (
        "(\n (\n  "
        + f"!(ActionMatches{{'{_BLOBS}/read'}} AND SubOperationMatches{{'Blob.List'}})"
        + "\n )\n OR\n (\n  "
        + f"@Request[{_BLOBS}:prefix] StringStartsWith '{prefix}'"
        + "\n )\n)"
    )
    return f"{objects}\nAND\n{listing}"


def zone_number(zone: str, region: str) -> str:
    """Azure's zone number ("1".."3") from "2" or "<region>-2"; "" when no zone is pinned."""
    if not zone:
        return ""
    match = _ZONE.fullmatch(zone.strip().lower())
    if match is None or match.group(1) not in (None, region.lower()):
        raise ValueError(f"zone: {zone!r} is not an Azure zone of {region} — use 1, 2 or 3")
    return match.group(2)


def locked_ssh_public_key() -> str:
    """An ssh-rsa public key (2048 bits) that nobody holds the private key for.

    Azure refuses Linux VMs with password login off and no SSH key. The modulus is a hash output,
    whose factors nobody knows, so the key satisfies the API while allowing no login. Operators
    who need a shell add their own key per VM (`az vm user update --ssh-key-value`), which Azure
    RBAC governs.
    """
    seed = hashlib.shake_256(b"spotroute: no private key exists for this modulus").digest(256)
    modulus = int.from_bytes(seed, "big") | (1 << 2047) | 1

    def field(data: bytes) -> bytes:
        return len(data).to_bytes(4, "big") + data

    def mpint(value: int) -> bytes:
        return field(value.to_bytes((value.bit_length() + 8) // 8, "big"))

    blob = field(b"ssh-rsa") + mpint(65537) + mpint(modulus)
    return f"ssh-rsa {base64.b64encode(blob).decode()} spotroute-no-login"
