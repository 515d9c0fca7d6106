"""Checkpointer.from_env: the settings a stack passes in SPOTROUTE_* variables.

The variables are documented in docs/checkpoints.md; DEFAULT_INTERVAL_S and DEFAULT_KEEP are
also the constructor's defaults.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any, Self

from router.checkpoint.interval import parse_interval_s
from router.checkpoint.notices import source_for
from router.checkpoint.results import CheckpointError
from router.checkpoint.state import CheckpointerState

log = logging.getLogger("spotroute.checkpoint")

DEFAULT_INTERVAL_S = 1800.0
DEFAULT_KEEP = 3


class FromEnvMixin(CheckpointerState):
    """Builds a Checkpointer from the environment a spotroute stack sets on the node."""

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None,
                 **overrides: Any) -> Self:
        """A Checkpointer set up from the SPOTROUTE_* variables of the stack (docs/checkpoints.md).

        SPOTROUTE_CHECKPOINT_URL (or SPOTROUTE_CHECKPOINT_DIR), SPOTROUTE_CHECKPOINT_INTERVAL
        ("30m", "1h", seconds; default 30m), SPOTROUTE_CHECKPOINT_KEEP (3), SPOTROUTE_JOB_ID,
        SPOTROUTE_NOTICE_SOURCE (aws | gcp | azure | local | none; default local = SIGTERM only),
        SPOTROUTE_METADATA_ENDPOINT (override the metadata base URL),
        SPOTROUTE_CHECKPOINT_STORAGE_OPTIONS (JSON object passed to fsspec),
        SPOTROUTE_CHECKPOINT_ASYNC (1 / 0), SPOTROUTE_CHECKPOINT_THREADS (files a rank writes
        at once; default one per CPU of the rank, at most 4), SPOTROUTE_PLACEMENT_ID (the stack
        this process runs as: the router's save requests name it), SPOTROUTE_RESTORE_STEP and
        SPOTROUTE_RESTORE_WAIT (a migration's new placement: wait this long for that step),
        SPOTROUTE_HOLD_TIMEOUT (a hold's bound; default 60m), SPOTROUTE_HANDOVER_ID and
        SPOTROUTE_HANDOVER_TIMEOUT (a new placement stops unless its move completes; 30m).
        """
        env = dict(os.environ if environ is None else environ)
        url = env.get("SPOTROUTE_CHECKPOINT_URL") or env.get("SPOTROUTE_CHECKPOINT_DIR")
        if not url:
            raise CheckpointError(
                "SPOTROUTE_CHECKPOINT_URL is not set — deploy the job with spotroute, or set it to "
                "a file://, s3://, gs:// or az:// URL"
            )
        _ensure_log_handler()
        interval_text = env.get("SPOTROUTE_CHECKPOINT_INTERVAL", "")
        try:
            interval_s = parse_interval_s(interval_text) if interval_text else DEFAULT_INTERVAL_S
        except ValueError as error:
            raise CheckpointError(f"SPOTROUTE_CHECKPOINT_INTERVAL: {error}") from error
        options_text = env.get("SPOTROUTE_CHECKPOINT_STORAGE_OPTIONS", "")
        try:
            storage_options = json.loads(options_text) if options_text else {}
        except json.JSONDecodeError as error:
            raise CheckpointError(
                f"SPOTROUTE_CHECKPOINT_STORAGE_OPTIONS is not a JSON object ({error})"
            ) from error
        source_name = env.get("SPOTROUTE_NOTICE_SOURCE", "local").strip().lower()
        try:
            source = source_for(source_name, env.get("SPOTROUTE_METADATA_ENDPOINT") or None)
        except ValueError as error:
            raise CheckpointError(str(error)) from error
        settings: dict[str, Any] = {
            "interval_s": interval_s,
            "keep": _count(env, "SPOTROUTE_CHECKPOINT_KEEP", DEFAULT_KEEP),
            "job_id": env.get("SPOTROUTE_JOB_ID", ""),
            "notice_sources": [source] if source else [],
            "handle_sigterm": source_name != "none",
            "asynchronous": env.get("SPOTROUTE_CHECKPOINT_ASYNC", "1") not in ("0", "false", "no"),
            "storage_options": storage_options,
            "placement": env.get("SPOTROUTE_PLACEMENT_ID", ""),
        }
        if env.get("SPOTROUTE_CHECKPOINT_THREADS"):
            settings["io_threads"] = _count(env, "SPOTROUTE_CHECKPOINT_THREADS", 1)
        try:
            if env.get("SPOTROUTE_RESTORE_STEP"):
                settings["restore_step"] = int(env["SPOTROUTE_RESTORE_STEP"])
            if env.get("SPOTROUTE_RESTORE_WAIT"):
                settings["restore_wait_s"] = parse_interval_s(env["SPOTROUTE_RESTORE_WAIT"])
        except ValueError as error:
            raise CheckpointError(
                f"SPOTROUTE_RESTORE_STEP / SPOTROUTE_RESTORE_WAIT: {error}"
            ) from error
        for name, key in (("SPOTROUTE_HOLD_TIMEOUT", "hold_timeout_s"),
                          ("SPOTROUTE_HANDOVER_TIMEOUT", "handover_timeout_s")):
            if env.get(name):
                try:
                    settings[key] = parse_interval_s(env[name])
                except ValueError as error:
                    raise CheckpointError(f"{name}: {error}") from error
                if not settings[key] > 0:
                    raise CheckpointError(f"{name}={env[name]!r} must be above 0 — e.g. 30m")
        settings["handover_id"] = env.get("SPOTROUTE_HANDOVER_ID", "")
        settings.update(overrides)
        return cls(url, **settings)


def _count(env: dict[str, str], name: str, default: int) -> int:
    """A whole number of at least 1 from variable `name`; CheckpointError names it if not."""
    text = env.get(name, "").strip()
    if not text:
        return default
    if not text.isdigit() or int(text) < 1:
        raise CheckpointError(f"{name}={text!r} is not a whole number of at least 1 — set it "
                              f"to e.g. {default}, or unset it for the default")
    return int(text)


def _ensure_log_handler() -> None:
    """Show the library's messages on stderr unless the application configured logging."""
    if not log.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
