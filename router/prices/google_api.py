"""Google API calls as the GCP price and quota sources make them: REST clients on Application
Default Credentials, our own retry per call, and every failure one line naming the API.

router/prices/gcp.py (Cloud Billing Catalog, machine and accelerator types) and
router/prices/quotas/gcp.py (`regions.get`) differ only in what a failure costs the user,
which they pass in (`GoogleFailures`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import requests
from google.api_core import exceptions as api_exceptions
from google.auth import exceptions as auth_exceptions
from google.protobuf import json_format

from router.core.errors import CredentialsMissing, RouteError
from router.prices.retry import retry_call

RETRYABLE: tuple[type[BaseException], ...] = (
    api_exceptions.TooManyRequests,
    api_exceptions.InternalServerError,
    api_exceptions.BadGateway,
    api_exceptions.ServiceUnavailable,
    api_exceptions.GatewayTimeout,  # DeadlineExceeded is its subclass
    requests.exceptions.Timeout,
    requests.exceptions.ConnectionError,
    auth_exceptions.TransportError,
)
BASE_DELAY_S = 0.5
MAX_DELAY_S = 8.0
SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class GoogleFailures:
    """What a source tells the user when its Google API calls fail.

    `failure` is the error class of transient failures (PriceSourceError for prices: the
    snapshot still works); `fallback` the last clause of their fix ("" for none).
    """

    no_credentials: str
    rejected_credentials: str
    failure: type[RouteError]
    fallback: str
    forbidden: Callable[[api_exceptions.Forbidden], RouteError]
    not_found: Callable[[api_exceptions.NotFound], RouteError]


def default_credentials(no_credentials: str) -> tuple[Any, str | None]:
    """Application Default Credentials and their project; CredentialsMissing if there are none."""
    import google.auth

    try:
        credentials, project = google.auth.default(scopes=SCOPES)
    except auth_exceptions.DefaultCredentialsError as exc:
        raise CredentialsMissing(no_credentials) from exc
    return credentials, project


def rest_client(client_class: type[_T], credentials: Any, endpoint: str | None) -> _T:
    """A google-cloud client over REST; `endpoint` (with scheme) overrides where it connects."""
    from google.api_core.client_options import ClientOptions

    options = ClientOptions(api_endpoint=endpoint) if endpoint else None
    return client_class(transport="rest", credentials=credentials, client_options=options)  # type: ignore[call-arg]


def retried(call: Callable[[], _T], *, max_attempts: int, sleep: Callable[[float], None]) -> _T:
    """`call` with our backoff on throttling, 5xx, timeouts and resets (the client's is off)."""
    return retry_call(
        call,
        is_retryable=lambda exc: isinstance(exc, RETRYABLE),
        max_attempts=max_attempts,
        base_delay_s=BASE_DELAY_S,
        max_delay_s=MAX_DELAY_S,
        sleep=sleep,
        retry_after=retry_after_s,
    )


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds from a throttled answer's Retry-After header; None when absent or a date."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP-date: fall back to jittered backoff


@contextmanager
def translated(
    where: str, failures: GoogleFailures, *, max_attempts: int, timeout_s: float
) -> Iterator[None]:
    """Turn client failures into one-line RouteErrors starting with `where` (the API, regions)."""
    fail = failures.failure

    def fix(*clauses: str) -> str:
        shown = [*clauses, failures.fallback] if failures.fallback else list(clauses)
        return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + ", or " + shown[-1]

    try:
        yield
    except auth_exceptions.DefaultCredentialsError as exc:
        raise CredentialsMissing(failures.no_credentials) from exc
    except (auth_exceptions.RefreshError, api_exceptions.Unauthorized) as exc:
        raise CredentialsMissing(failures.rejected_credentials) from exc
    except api_exceptions.Forbidden as exc:
        raise failures.forbidden(exc) from exc
    except api_exceptions.NotFound as exc:
        raise failures.not_found(exc) from exc
    except api_exceptions.TooManyRequests as exc:
        raise fail(
            f"{where} still throttled (HTTP 429) after {max_attempts} attempts — "
            + fix("retry later")
        ) from exc
    except (requests.exceptions.Timeout, api_exceptions.GatewayTimeout) as exc:
        raise fail(
            f"{where} timed out ({max_attempts} attempts, {timeout_s:g} s each) — "
            + fix("check network access to Google APIs", "raise the timeout")
        ) from exc
    except (requests.exceptions.ConnectionError, auth_exceptions.TransportError) as exc:
        raise fail(
            f"{where} could not connect ({max_attempts} attempts) — "
            + fix("check network access to Google APIs")
        ) from exc
    except api_exceptions.GoogleAPICallError as exc:
        raise fail(
            f"{where} failed (HTTP {exc.code}) after {max_attempts} attempts — "
            + fix("retry later")
        ) from exc
    except (json_format.ParseError, ValueError, TypeError) as exc:
        raise fail(
            f"{where} returned a malformed answer ({one_line(exc)}) — " + fix("retry later")
        ) from exc


def one_line(exc: BaseException) -> str:
    """An exception as one short line: its class and at most 120 characters of its text."""
    text = " ".join(str(exc).split())
    text = text if len(text) <= 120 else text[:117] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
