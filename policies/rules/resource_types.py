"""Resource type tokens the rules inspect, and the values that mean "public" in each cloud."""

from __future__ import annotations

from collections.abc import Mapping

# --- resource types ------------------------------------------------------------------------------

AWS_PROVIDER = "pulumi:providers:aws"
GCP_PROVIDER = "pulumi:providers:gcp"
AZURE_PROVIDER = "pulumi:providers:azure-native"

AWS_BUCKETS = ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2")
AWS_PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
AWS_BUCKET_ACLS = ("aws:s3/bucketAcl:BucketAcl", "aws:s3/bucketAclV2:BucketAclV2")
AWS_BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
AWS_VERSIONING = (
    "aws:s3/bucketVersioning:BucketVersioning",
    "aws:s3/bucketVersioningV2:BucketVersioningV2",
)
AWS_ENCRYPTION = (
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2",
)
AWS_POLICY_DOCUMENTS = (  # types whose `policy` input is an identity policy document
    "aws:iam/rolePolicy:RolePolicy",
    "aws:iam/policy:Policy",
    "aws:iam/userPolicy:UserPolicy",
    "aws:iam/groupPolicy:GroupPolicy",
)
AWS_ROLE = "aws:iam/role:Role"
AWS_POLICY_ATTACHMENTS = (
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
    "aws:iam/policyAttachment:PolicyAttachment",
    "aws:iam/userPolicyAttachment:UserPolicyAttachment",
    "aws:iam/groupPolicyAttachment:GroupPolicyAttachment",
)
AWS_SECURITY_GROUPS = (
    "aws:ec2/securityGroup:SecurityGroup",
    "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup",
)
AWS_SECURITY_GROUP_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
AWS_INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
AWS_NETWORK_ACLS = (  # `ingress` blocks: action, protocol, fromPort/toPort, cidrBlock
    "aws:ec2/networkAcl:NetworkAcl",
    "aws:ec2/defaultNetworkAcl:DefaultNetworkAcl",
)
AWS_NETWORK_ACL_RULE = "aws:ec2/networkAclRule:NetworkAclRule"  # egress, ruleAction, …
AWS_FLEET = "aws:ec2/fleet:Fleet"
LOCAL_PROCESS = "pulumi-python:dynamic/spotroute:LocalProcess"  # components/local.py
AWS_LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
AWS_INSTANCE = "aws:ec2/instance:Instance"
AWS_SPOT_INSTANCE_REQUEST = "aws:ec2/spotInstanceRequest:SpotInstanceRequest"
AWS_SPOT_FLEET_REQUEST = "aws:ec2/spotFleetRequest:SpotFleetRequest"
AWS_AUTOSCALING_GROUP = "aws:autoscaling/group:Group"

GCP_BUCKET = "gcp:storage/bucket:Bucket"
GCP_BUCKET_ACL = "gcp:storage/bucketACL:BucketACL"
GCP_BUCKET_ACCESS_CONTROLS = (
    "gcp:storage/bucketAccessControl:BucketAccessControl",
    "gcp:storage/defaultObjectAccessControl:DefaultObjectAccessControl",
)
GCP_BUCKET_IAM = (
    "gcp:storage/bucketIAMMember:BucketIAMMember",
    "gcp:storage/bucketIAMBinding:BucketIAMBinding",
    "gcp:storage/bucketIAMPolicy:BucketIAMPolicy",
)
GCP_FIREWALL = "gcp:compute/firewall:Firewall"
GCP_FIREWALL_POLICY_RULES = (
    "gcp:compute/firewallPolicyRule:FirewallPolicyRule",
    "gcp:compute/networkFirewallPolicyRule:NetworkFirewallPolicyRule",
    "gcp:compute/regionNetworkFirewallPolicyRule:RegionNetworkFirewallPolicyRule",
)
GCP_INSTANCE_LIKE = (  # carry `scheduling`, `labels` and `metadata`
    "gcp:compute/instanceTemplate:InstanceTemplate",
    "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate",
    "gcp:compute/instance:Instance",
)

AZURE_STORAGE_ACCOUNT = "azure-native:storage:StorageAccount"
AZURE_BLOB_CONTAINER = "azure-native:storage:BlobContainer"
AZURE_BLOB_SERVICE = "azure-native:storage:BlobServiceProperties"
AZURE_NSG = "azure-native:network:NetworkSecurityGroup"
AZURE_SECURITY_RULE = "azure-native:network:SecurityRule"
AZURE_ROLE_ASSIGNMENT = "azure-native:authorization:RoleAssignment"
AZURE_VMSS = "azure-native:compute:VirtualMachineScaleSet"
AZURE_VM = "azure-native:compute:VirtualMachine"

# Where each taggable type keeps its tags/labels. Types not listed cannot carry labels at all
# (AWS: bucket sub-resources, policies attached to roles, route-table associations; GCP: networks,
# subnetworks, firewalls, instance group managers, service accounts, IAM members; Azure: subnets,
# security rules, blob containers, blob service properties, role assignments).
TAGGABLE_TYPES: Mapping[str, str] = {
    **{
        token: "tags"
        for token in (
            "aws:ec2/vpc:Vpc",
            "aws:ec2/subnet:Subnet",
            "aws:ec2/securityGroup:SecurityGroup",
            "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup",
            "aws:ec2/internetGateway:InternetGateway",
            "aws:ec2/routeTable:RouteTable",
            "aws:ec2/vpcEndpoint:VpcEndpoint",
            "aws:ec2/natGateway:NatGateway",
            "aws:ec2/eip:Eip",
            "aws:ebs/volume:Volume",
            AWS_INSTANCE,
            AWS_LAUNCH_TEMPLATE,
            AWS_FLEET,
            AWS_SPOT_INSTANCE_REQUEST,
            AWS_SPOT_FLEET_REQUEST,
            *AWS_BUCKETS,
            AWS_ROLE,
            "aws:iam/instanceProfile:InstanceProfile",
            "aws:iam/policy:Policy",
            "aws:kms/key:Key",
        )
    },
    **{token: "labels" for token in (GCP_BUCKET, *GCP_INSTANCE_LIKE, "gcp:compute/disk:Disk")},
    **{
        token: "tags"
        for token in (
            "azure-native:resources:ResourceGroup",
            "azure-native:network:VirtualNetwork",
            AZURE_NSG,
            "azure-native:network:PublicIPAddress",
            "azure-native:network:NetworkInterface",
            AZURE_STORAGE_ACCOUNT,
            "azure-native:managedidentity:UserAssignedIdentity",
            AZURE_VMSS,
            AZURE_VM,
            "azure-native:compute:Disk",
        )
    },
    # The local target's job process carries the same labels (its spot marker included).
    LOCAL_PROCESS: "labels",
}

# Azure built-in roles that let a principal change anything, or grant itself anything.
AZURE_PRIVILEGED_ROLES: Mapping[str, str] = {
    "8e3af657-a8ff-443c-a75c-2fe8c4bcb635": "Owner",
    "b24988ac-6180-42a0-ab88-20f7382dd24c": "Contributor",
    "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9": "User Access Administrator",
}
# Every S3 canned ACL ("Canned ACL", https://docs.aws.amazon.com/AmazonS3/latest/userguide/
# acl-overview.html#canned-acl): one outside this list is a value the rule cannot read.
AWS_CANNED_ACLS = (
    "private",
    "public-read",
    "public-read-write",
    "aws-exec-read",
    "authenticated-read",
    "bucket-owner-read",
    "bucket-owner-full-control",
    "log-delivery-write",
)
AWS_PUBLIC_CANNED_ACLS = ("public-read", "public-read-write", "authenticated-read")
# IAM's Effect: "Valid values for Effect are Allow and Deny. The Effect value is case sensitive."
# (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_effect.html)
IAM_EFFECTS = ("Allow", "Deny")
AWS_PUBLIC_GRANTEE_URIS = (
    "http://acs.amazonaws.com/groups/global/AllUsers",
    "http://acs.amazonaws.com/groups/global/AuthenticatedUsers",
)
GCP_PUBLIC_MEMBERS = ("allUsers", "allAuthenticatedUsers")
GCP_PUBLIC_PREDEFINED_ACLS = ("publicRead", "publicReadWrite", "authenticatedRead")
AZURE_INTERNET_SOURCES = ("*", "internet", "any")
TLS_VERSIONS = ("TLS1_0", "TLS1_1", "TLS1_2", "TLS1_3")
MAX_PRICE_METADATA_KEY = "spotroute-max-price"  # GCP has no spot bid field; see docs/policies.md
