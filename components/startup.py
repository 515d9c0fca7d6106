"""The start-up script every cloud's SpotGpuGroup nodes run (user data / startup-script).

Pure: no Pulumi, no cloud SDKs, so every cloud module (and the local target) renders the same script
and tests read it as plain text.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from components.args import JobCommand
from router.contract.stack_config import RESERVED_ENV as RESERVED_ENV

# POSIX shell variable names; anything else could not be exported and would break the script.
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Set by spotroute itself: a job env entry with one of these names would silently win otherwise
# (the one list, shared with validation: router.contract.stack_config.RESERVED_ENV).
LOG_PATH = "/var/log/spotroute-job.log"
SHUTDOWN_GRACE_MIN = 5  # minutes between job exit and power-off, to read logs or cancel
# Power off after the grace period. What power-off means for the bill is the cloud's: AWS
# terminates (instance-initiated shutdown behaviour), GCP stops the VM; Azure passes its own lines.
POWER_OFF: tuple[str, ...] = (f"shutdown -h +{SHUTDOWN_GRACE_MIN} 'spotroute: job finished'",)
# PyTorch data-loader workers and NCCL use /dev/shm; Docker's default is 64 MB.
DOCKER_RUN = "docker run --rm --gpus all --network host --ipc=host"


def checkpoint_interval_text(interval_s: float) -> str:
    """SPOTROUTE_CHECKPOINT_INTERVAL's value: plain seconds, as router.checkpoint parses them."""
    return f"{interval_s:g}"


def render_startup_script(
    job_name: str,
    checkpoint_url: str,
    job: JobCommand,
    *,
    shutdown_when_done: bool = True,
    finish: Sequence[str] = POWER_OFF,
    node_count: int = 1,
    notice_source: str | None = None,
) -> str:
    """Bash start-up script that runs the job (its container with all GPUs, or its bare command).

    Every value from the job (env, image, command) is shell-quoted with shlex.quote, so a value
    can never end the quoted word and run a command of its own. With `shutdown_when_done` the
    `finish` lines run from an EXIT trap, so they run whatever ends the script: the job's exit, or
    `set -e` stopping at an early failure (docker missing, pull failed). The default powers the
    node off SHUTDOWN_GRACE_MIN minutes later (`shutdown -c` on the node cancels it).
    `notice_source` (aws, gcp, azure) becomes SPOTROUTE_NOTICE_SOURCE, which router.checkpoint
    reads to watch the cloud's preemption notices.
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

    env = {
        "SPOTROUTE_JOB_ID": job_name,
        "SPOTROUTE_CHECKPOINT_URL": checkpoint_url,
        # Rendezvous (SkyPilot's names, which torchrun wrappers already read). The group size is
        # known at boot; peers' addresses are not (every cloud assigns them as nodes launch), so
        # rank and address list are set only for a single node. See docs/components.md.
        "SPOTROUTE_NODE_COUNT": str(node_count),
        "SKYPILOT_NUM_NODES": str(node_count),
        **({"SKYPILOT_NODE_RANK": "0"} if node_count == 1 else {}),
    }
    if notice_source:
        env["SPOTROUTE_NOTICE_SOURCE"] = notice_source
    if job.checkpoint_interval_s:
        env["SPOTROUTE_CHECKPOINT_INTERVAL"] = checkpoint_interval_text(job.checkpoint_interval_s)
    env.update(job.env)
    command = " ".join(shlex.quote(part) for part in job.command)
    lines = [
        "#!/bin/bash",
        f"# spotroute start-up script for job {shlex.quote(job_name)}",
        "set -euo pipefail",
        f"exec >>{LOG_PATH} 2>&1",
    ]
    if shutdown_when_done:
        lines += [
            # Runs on every exit, including `set -e` aborts before the job starts.
            "spotroute_finish() {",
            "  code=$?",
            "  set +e",
            '  echo "spotroute: job exited with status $code"',
            *(f"  {line}" for line in finish),
            '  exit "$code"',
            "}",
            "trap spotroute_finish EXIT",
        ]
    lines += [
        *(f"export {key}={shlex.quote(value)}" for key, value in env.items()),
        "status=0",
    ]
    passthrough_names = list(env)
    if node_count == 1:
        lines.append('export SKYPILOT_NODE_IPS="$(hostname -I | cut -d" " -f1)"')
        passthrough_names.append("SKYPILOT_NODE_IPS")
    if job.image:
        image = shlex.quote(job.image)
        # `-e NAME` without a value copies the variable from this shell, so values are quoted once.
        passthrough = " ".join(f"-e {key}" for key in passthrough_names)
        lines += [
            "command -v docker >/dev/null || "
            "{ echo 'spotroute: docker is not installed on this image'; exit 1; }",
            # Registries throttle and networks blip at boot; a few retries beat a dead node.
            f"for attempt in 1 2 3 4 5; do docker pull {image} && break; "
            "[ $attempt = 5 ] && exit 1; sleep $((attempt * 10)); done",
            # Host networking keeps the instance metadata service (preemption notices) reachable
            # from the container with the default IMDSv2 hop limit of 1, and lets NCCL use the
            # node's interfaces; host IPC gives data-loader workers and NCCL a real /dev/shm.
            f"{DOCKER_RUN} --name spotroute-job {passthrough} "
            f"{image}{' ' + command if command else ''} || status=$?",
        ]
    else:
        lines += [
            "mkdir -p /opt/spotroute && cd /opt/spotroute",
            f"{command} || status=$?",
        ]
    if not shutdown_when_done:
        lines.append('echo "spotroute: job exited with status $status"')
    lines.append('exit "$status"')
    return "\n".join(lines) + "\n"
