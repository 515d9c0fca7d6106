"""Azure CheckpointBucket component: the checkpoint storage account and blob container in the
bootstrap's stores group, kept on destroy, or an existing container by URL (one of the four
placement components; components/azure.py registers them).
"""

from __future__ import annotations

import pulumi
from pulumi_azure_native import (
    authorization,
    storage,
)

from components.args import (
    CheckpointBucketArgs,
    check_bucket_args,
)
from components.azure_names import (
    AZURE_JOB_STORES_RESOURCE_GROUP,
    BLOB_HOST_SUFFIX,
    azure_tags,
    container_resource_id,
    parse_blob_url,
    storage_account_name,
)

CONTAINER_NAME = "checkpoints"


class CheckpointBucket(pulumi.ComponentResource):
    """Versioned, private, identity-only blob container for checkpoints, or an existing one."""

    bucket_name: pulumi.Output[str]
    url: pulumi.Output[str]
    arn_or_id: pulumi.Output[str]
    key_prefix: str
    account_name: pulumi.Output[str]
    container_name: str

    def __init__(
        self,
        name: str,
        args: CheckpointBucketArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        check_bucket_args("azure.CheckpointBucket", args, staging="container")
        existing = parse_blob_url(args.existing_url, "existing_url") if args.existing_url else None
        existing_id = (
            container_resource_id(
                existing[0], existing[1], args.storage_account_ids, "existing_url"
            )
            if existing
            else ""
        )
        super().__init__("spotroute:azure:CheckpointBucket", name, None, opts)

        if existing is not None:
            # Reused container: its settings belong to whoever owns it; nothing is created.
            account, container, self.key_prefix = existing
            self.container_name = container
            self.account_name = pulumi.Output.from_input(account)
            self.bucket_name = pulumi.Output.from_input(f"{account}/{container}")
            self.url = pulumi.Output.from_input(
                f"https://{account}{BLOB_HOST_SUFFIX}/{container}/{self.key_prefix}"
            )
            self.arn_or_id = pulumi.Output.from_input(existing_id)
        else:
            self.key_prefix = ""
            self.container_name = CONTAINER_NAME
            self._create(name, args)

        self.register_outputs(
            {"bucket_name": self.bucket_name, "url": self.url, "arn_or_id": self.arn_or_id}
        )

    def _create(self, name: str, args: CheckpointBucketArgs) -> None:
        # In the bootstrap's stores group, the one place the deployer may write storage accounts
        # and grant the job role on them. `pulumi destroy` leaves account, container and policies
        # in place (AWS and GCP keep their buckets too); delete them by hand once the checkpoints
        # are no longer needed. A staging container (expire_days > 0) holds a copy of data, and a
        # discarded copy (keep_on_destroy false, set by the router on a stack whose checkpoints it
        # has verified elsewhere) is worth nothing either: destroying the stack deletes the
        # account, which Azure deletes with its blobs.
        staging = args.expire_days > 0
        retained = args.keep_on_destroy and not staging
        # Created once: a stack from before the stores group keeps its account where it is
        # (`<job>-checkpoints-rg`, under its old name), never replaced.
        fixed = ["resourceGroupName", "accountName"]
        keep = pulumi.ResourceOptions(parent=self, retain_on_delete=retained, ignore_changes=fixed)
        tags = azure_tags(args.job_name, args.labels)
        group_name = AZURE_JOB_STORES_RESOURCE_GROUP
        client = authorization.get_client_config_output(
            opts=pulumi.InvokeOutputOptions(parent=self)
        )
        # Global names: salted by subscription, stack and deployment, so a stack created again
        # after a destroy that kept its account gets a new one.
        where = f"{pulumi.get_stack()}/{name}/{args.name_salt}"
        account_name = client.subscription_id.apply(
            lambda sub: storage_account_name(args.job_name, f"{sub}/{where}")
        )
        account = storage.StorageAccount(
            f"{name}-storage",
            resource_group_name=group_name,
            account_name=account_name,
            location=args.region,
            kind="StorageV2",
            sku=storage.SkuArgs(name="Standard_LRS"),
            access_tier=storage.AccessTier.HOT,
            allow_blob_public_access=False,
            enable_https_traffic_only=True,
            minimum_tls_version="TLS1_2",
            # Identity-based access only: no account keys, no SAS signed with them.
            allow_shared_key_access=False,
            default_to_o_auth_authentication=True,
            allow_cross_tenant_replication=False,
            # Nodes reach it without public IPs; access is decided by Entra ID roles, not network.
            public_network_access="Enabled",
            tags=tags,
            opts=keep,
        )
        service = storage.BlobServiceProperties(
            f"{name}-blob-service",
            resource_group_name=group_name,
            account_name=account.name,
            blob_services_name="default",
            is_versioning_enabled=True,
            # Blob soft delete off, as on Cloud Storage (components/gcp.py): with versioning on,
            # every version the lifecycle rule below deletes would be soft-deleted and kept —
            # billed "at the same rate as active data" — for `days` more, so each pruned
            # checkpoint would bill for about twice noncurrent_version_days
            # (https://learn.microsoft.com/azure/storage/blobs/soft-delete-blob-overview). The
            # noncurrent versions already keep overwrites and deletes recoverable for that long
            # (https://learn.microsoft.com/azure/storage/blobs/versioning-overview).
            delete_retention_policy=storage.DeleteRetentionPolicyArgs(enabled=False),
            container_delete_retention_policy=storage.DeleteRetentionPolicyArgs(
                enabled=True, days=args.noncurrent_version_days
            ),
            opts=keep,
        )
        container = storage.BlobContainer(
            f"{name}-container",
            resource_group_name=group_name,
            account_name=account.name,
            container_name=CONTAINER_NAME,
            public_access=storage.PublicAccess.NONE,
            opts=keep,
        )
        storage.ManagementPolicy(
            f"{name}-lifecycle",
            resource_group_name=group_name,
            account_name=account.name,
            management_policy_name="default",
            policy=storage.ManagementPolicySchemaArgs(
                rules=[
                    storage.ManagementPolicyRuleArgs(
                        name="expire-old-checkpoint-versions",
                        type="Lifecycle",
                        enabled=True,
                        definition=storage.ManagementPolicyDefinitionArgs(
                            filters=storage.ManagementPolicyFilterArgs(blob_types=["blockBlob"]),
                            actions=storage.ManagementPolicyActionArgs(
                                # A version is created when its blob is overwritten, so this
                                # counts days since it stopped being current, like S3's
                                # noncurrent-version expiration.
                                version=storage.ManagementPolicyVersionArgs(
                                    delete=storage.DateAfterCreationArgs(
                                        days_after_creation_greater_than=args.noncurrent_version_days
                                    )
                                )
                            ),
                        ),
                    ),
                    *(
                        [
                            storage.ManagementPolicyRuleArgs(
                                name="delete-staged-data-after-the-job",
                                type="Lifecycle",
                                enabled=True,
                                definition=storage.ManagementPolicyDefinitionArgs(
                                    filters=storage.ManagementPolicyFilterArgs(
                                        blob_types=["blockBlob"]
                                    ),
                                    actions=storage.ManagementPolicyActionArgs(
                                        base_blob=storage.ManagementPolicyBaseBlobArgs(
                                            delete=storage.DateAfterModificationArgs(
                                                days_after_creation_greater_than=args.expire_days
                                            )
                                        )
                                    ),
                                ),
                            )
                        ]
                        if staging
                        else []
                    ),
                ]
            ),
            opts=pulumi.ResourceOptions.merge(keep, pulumi.ResourceOptions(depends_on=[service])),
        )
        self.account_name = account.name
        self.bucket_name = account.name.apply(lambda a: f"{a}/{CONTAINER_NAME}")
        self.url = account.name.apply(lambda a: f"https://{a}{BLOB_HOST_SUFFIX}/{CONTAINER_NAME}/")
        self.arn_or_id = container.id
