"""Errors a user sees: each carries one line of text and the process exit code."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


class RouteError(Exception):
    """Base of every error the CLI renders as `error: <message>` without a traceback."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadInput(RouteError):
    """The user's input (job file, flags, org config, import file) is wrong; exit 2."""

    exit_code = EXIT_BAD_INPUT


class OperationFailed(RouteError):
    """An operation the input asked for could not be done (API down, engine failed); exit 1."""

    exit_code = EXIT_FAILED


class Interrupted(RouteError):
    """The user pressed Ctrl-C; the engine cancelled cleanly. Exit 130, as shells expect."""

    exit_code = 130


class CredentialsMissing(OperationFailed):
    """A cloud API was asked for but no credentials for it were found."""


class PriceSourceError(OperationFailed):
    """A price API failed after retries (throttled, timed out, malformed answer)."""
