"""The start-up script every cloud's SpotGpuGroup nodes run (user data / startup-script).

Pure: no Pulumi, no cloud SDKs, so every cloud module (and the local target) renders the same script
and tests read it as plain text.
"""

from __future__ import annotations

import re
import shlex

from components.args import JobCommand
from router.contract.stack_config import RESERVED_ENV as RESERVED_ENV

# POSIX shell variable names; anything else could not be exported and would break the script.
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Set by spotroute itself: a job env entry with one of these names would silently win otherwise
# (the one list, shared with validation: router.contract.stack_config.RESERVED_ENV).
LOG_PATH = "/var/log/spotroute-job.log"
SHUTDOWN_GRACE_MIN = 5  # minutes between job exit and power-off, to read logs or cancel


def render_startup_script(
    job_name: str, checkpoint_url: str, job: JobCommand, *, shutdown_when_done: bool = True
) -> str:
    """Bash start-up script that runs the job (its container with all GPUs, or its bare command).

    Every value from the job (env, image, command) is shell-quoted with shlex.quote, so a value
    can never end the quoted word and run a command of its own. With `shutdown_when_done` the node
    powers off SHUTDOWN_GRACE_MIN minutes after the job exits, whatever its status, so a finished
    job stops billing GPU hours (`shutdown -c` on the node cancels it).
    """
    if not job.image and not job.command:
        raise ValueError("job: set run.image or run.command — there is nothing to start")
    for key in job.env:
        if not _ENV_NAME.fullmatch(key):
            raise ValueError(
                f"job.env: {key!r} is not a valid environment variable name — "
                "use letters, digits and underscores, not starting with a digit"
            )
        if key in RESERVED_ENV:
            raise ValueError(f"job.env: {key} is set by spotroute — remove it from run.env")

    env = {"SPOTROUTE_JOB_ID": job_name, "SPOTROUTE_CHECKPOINT_URL": checkpoint_url, **job.env}
    command = " ".join(shlex.quote(part) for part in job.command)
    lines = [
        "#!/bin/bash",
        f"# spotroute start-up script for job {shlex.quote(job_name)}",
        "set -euo pipefail",
        f"exec >>{LOG_PATH} 2>&1",
        *(f"export {key}={shlex.quote(value)}" for key, value in env.items()),
        "status=0",
    ]
    if job.image:
        image = shlex.quote(job.image)
        # `-e NAME` without a value copies the variable from this shell, so values are quoted once.
        passthrough = " ".join(f"-e {key}" for key in env)
        lines += [
            "command -v docker >/dev/null || "
            "{ echo 'spotroute: docker is not installed on this image'; exit 1; }",
            # Registries throttle and networks blip at boot; a few retries beat a dead node.
            f"for attempt in 1 2 3 4 5; do docker pull {image} && break; "
            "sleep $((attempt * 10)); done",
            # Host networking keeps the instance metadata service (preemption notices) reachable
            # from the container with the default IMDSv2 hop limit of 1.
            f"docker run --rm --gpus all --network host --name spotroute-job {passthrough} "
            f"{image}{' ' + command if command else ''} || status=$?",
        ]
    else:
        lines += [
            "mkdir -p /opt/spotroute && cd /opt/spotroute",
            f"{command} || status=$?",
        ]
    lines.append('echo "spotroute: job exited with status $status"')
    if shutdown_when_done:
        lines.append(f"shutdown -h +{SHUTDOWN_GRACE_MIN} 'spotroute: job finished'")
    lines.append('exit "$status"')
    return "\n".join(lines) + "\n"
