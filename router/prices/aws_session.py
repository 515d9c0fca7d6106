"""The boto3 session of the AWS price and quota sources, with credentials checked up front.

router/prices/aws.py and router/prices/quotas/aws.py differ only in what missing credentials
cost the user, which they pass in (the end of each message); `client_config` applies a
request's timeout and attempts to every client they build.
"""

from __future__ import annotations

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    NoCredentialsError,
    PartialCredentialsError,
    ProfileNotFound,
)

from router.core.errors import CredentialsMissing


def default_session(without: str) -> boto3.Session:
    """boto3's default session; CredentialsMissing naming the profile if it does not exist.

    `without` ends the message: what happens until the login is fixed ("; until then …").
    """
    try:
        return boto3.Session()
    except ProfileNotFound as exc:
        raise CredentialsMissing(
            f"AWS profile {exc.kwargs.get('profile')!r} not found — run `aws configure sso` "
            f"or fix AWS_PROFILE{without}"
        ) from exc


def require_credentials(session: boto3.Session, *, missing: str, unloadable: str) -> None:
    """Resolve credentials once, here, so a missing or expired login fails before any call.

    `missing` is the message when there are none, `unloadable` (with `{kind}`, the botocore
    error's class) when they cannot be loaded.
    """
    try:
        credentials = session.get_credentials()
        if credentials is None:
            raise CredentialsMissing(missing)
        # SSO and assume-role credentials are deferred: load them now, not in eight threads.
        credentials.get_frozen_credentials()
    except (NoCredentialsError, PartialCredentialsError) as exc:
        raise CredentialsMissing(missing) from exc
    except BotoCoreError as exc:
        # Only the class name: the text may hold file paths or profile details.
        raise CredentialsMissing(unloadable.format(kind=type(exc).__name__)) from exc


def client_config(timeout_s: float, max_attempts: int, *, pool: int | None = None) -> Config:
    """botocore client options for one request's limits: seconds per call, attempts in all."""
    return Config(
        connect_timeout=timeout_s,
        read_timeout=timeout_s,
        # botocore's "max_attempts" counts retries only; "total_max_attempts" includes the
        # first call, which is what the requests' max_attempts mean.
        retries={"mode": "standard", "total_max_attempts": max_attempts},
        **({"max_pool_connections": pool} if pool is not None else {}),
    )
