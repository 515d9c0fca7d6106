"""What in a job's plain environment looks like a credential: by its name (the common
conventions) or by its value (the shapes vendors document for their keys, a URL with a password,
a PEM private key). The answer names the kind, never the value: a warning must not echo it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Names that hold a credential by every common convention: AWS_SECRET_ACCESS_KEY,
# AWS_SESSION_TOKEN, HF_TOKEN, WANDB_API_KEY, AZURE_CLIENT_SECRET, AZURE_STORAGE_KEY, DB_PASSWORD,
# *_CONNECTION_STRING; MYSQL_PWD (MySQL's own "default password", documented as insecure:
# https://dev.mysql.com/doc/refman/8.4/en/environment-variables.html); SSH_KEY, KAGGLE_KEY (the
# Kaggle API's KAGGLE_USERNAME/KAGGLE_KEY pair, https://github.com/Kaggle/kaggle-api); a webhook
# URL (SLACK_WEBHOOK: whoever has it posts to the channel); *_CREDENTIALS_JSON; *_PAT (personal
# access tokens). Not *_KEY alone (SORT_KEY), *_ID (AWS_ACCESS_KEY_ID is not secret), PWD (the
# shell's working directory), or a path to one (*_FILE, GOOGLE_APPLICATION_CREDENTIALS).
_CREDENTIAL_NAME = re.compile(
    r"SECRET|PASSWORD|PASSWD|PASSPHRASE|PRIVATE_?KEY|CONNECTION_STRING|_PWD$|WEBHOOK(?:_URL)?$"
    r"|(?:^|_)(?:TOKEN|API_?KEY|ACCESS_KEY|ACCOUNT_KEY|STORAGE_KEY|AUTH_KEY|PAT)$"
    r"|(?:^|_)(?:SSH|KAGGLE|SIGNING|ENCRYPTION|MASTER|HMAC|JWT|DEPLOY)_?KEY$"
    r"|(?:^|_)CREDENTIALS?(?:_JSON)?$"
)
# Documented as the *path* of a key file (Application Default Credentials:
# https://cloud.google.com/docs/authentication/application-default-credentials).
_PATH_NAMES = frozenset({"GOOGLE_APPLICATION_CREDENTIALS"})
# A value that is a file path names where a key is, not the key (SSH_KEY=~/.ssh/id_ed25519).
_PATH_VALUE = re.compile(r"(?:/|~/|\./|\.\./)[^\s]*")


@dataclass(frozen=True)
class ValueShape:
    """A credential's documented shape: what to call it, how to find it, where it is written."""

    kind: str
    pattern: re.Pattern[str]
    source: str


def _shape(kind: str, pattern: str, source: str) -> ValueShape:
    return ValueShape(kind, re.compile(pattern), source)


VALUE_SHAPES: tuple[ValueShape, ...] = (
    # scheme://user:password@host — RFC 3986 3.2.1 (userinfo); a `${VAR}` placeholder is not one.
    _shape(
        "a URL with a password",
        r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@?#]*:(?!\$)[^/\s@?#]+@",
        "https://www.rfc-editor.org/rfc/rfc3986#section-3.2.1",
    ),
    # AKIA: long-term access key IDs, ASIA: temporary (STS) ones; 20 characters.
    _shape(
        "an AWS access key ID (AKIA…/ASIA…)",
        r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b",
        "https://docs.aws.amazon.com/STS/latest/APIReference/API_GetAccessKeyInfo.html",
    ),
    _shape(
        "a GitHub token (ghp_…, gho_…, ghu_…, ghs_…, ghr_…, github_pat_…)",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
        "https://github.blog/changelog/2021-03-31-authentication-token-format-updates-are-generally-available",
    ),
    _shape(
        "a GitLab personal access token (glpat-…)",
        r"\bglpat-[A-Za-z0-9_-]{20,}",
        "https://docs.gitlab.com/ee/administration/settings/account_and_limit_settings.html",
    ),
    _shape(
        "a Slack token (xoxb-, xoxp-, xoxa-, xoxs-, xapp-)",
        r"\b(?:xox[abpsr]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,})",
        "https://docs.slack.dev/authentication/tokens",
    ),
    _shape(
        "a Slack incoming-webhook URL",
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{10,}",
        "https://api.slack.com/messaging/webhooks",
    ),
    # OpenAI (sk-…, sk-proj-…) and Anthropic (sk-ant-…) keys: long, with digits (not sk-learn).
    _shape(
        "an API secret key (sk-…)",
        r"\bsk-(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{32,}",
        "https://platform.openai.com/docs/api-reference/authentication",
    ),
    _shape(
        "a Stripe secret or restricted key (sk_live_…, rk_live_…)",
        r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}",
        "https://docs.stripe.com/keys",
    ),
    _shape(
        "a Google API key (AIza…)",
        r"\bAIza[0-9A-Za-z_-]{35}\b",
        "https://cloud.google.com/docs/authentication/api-keys",
    ),
    _shape(
        "a Hugging Face token (hf_…)",
        r"\bhf_[A-Za-z0-9]{30,}\b",
        "https://huggingface.co/docs/hub/security-tokens",
    ),
    _shape(
        "an npm token (npm_…)",
        r"\bnpm_[A-Za-z0-9]{36}\b",
        "https://docs.npmjs.com/about-access-tokens",
    ),
    # RFC 7468 sections 10-11 (PRIVATE KEY, ENCRYPTED PRIVATE KEY), PKCS #1's RSA PRIVATE KEY,
    # OpenSSH's OPENSSH PRIVATE KEY: every label that ends in PRIVATE KEY.
    _shape(
        "a PEM private key",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----",
        "https://www.rfc-editor.org/rfc/rfc7468#section-10",
    ),
    # A service-account key file's JSON ("private_key", "client_email", …).
    _shape(
        "a Google service-account key (JSON with private_key)",
        r"\"private_key\"\s*:",
        "https://cloud.google.com/iam/docs/keys-create-delete",
    ),
    _shape(
        "an Azure storage account key or SAS signature (AccountKey=…, sig=…)",
        r"AccountKey=[A-Za-z0-9+/=]{20,}|[?&]sig=[A-Za-z0-9%+/=]{20,}",
        "https://learn.microsoft.com/en-us/azure/storage/common/storage-configure-connection-string",
    ),
    # header.payload.signature, both JSON parts base64url of "{" (RFC 7519): a bearer token.
    _shape(
        "a JSON Web Token (eyJ….eyJ….…)",
        r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}",
        "https://www.rfc-editor.org/rfc/rfc7519#section-3",
    ),
)


def named_like_a_credential(name: str, value: str = "") -> bool:
    """Whether an env name holds a credential by convention (a path to one does not count)."""
    upper = name.upper()
    if upper.endswith("_FILE") or upper in _PATH_NAMES:
        return False
    if not _CREDENTIAL_NAME.search(upper):
        return False
    key_file = upper.endswith(("KEY", "CREDENTIALS", "CREDENTIAL"))
    return not (key_file and _PATH_VALUE.fullmatch(value.strip()))


def credential_shape(value: str) -> ValueShape | None:
    """The documented credential shape the value holds, if any (the first found)."""
    return next((s for s in VALUE_SHAPES if s.pattern.search(value)), None)


def credential_reason(name: str, value: str) -> str | None:
    """Why an env entry looks like a credential — its value's shape or its name — or None.

    Names the kind of credential only: the value itself never appears in the answer."""
    shape = credential_shape(value)
    if shape is not None:
        return f"its value has the shape of {shape.kind}"
    if named_like_a_credential(name, value):
        return "its name says so"
    return None
