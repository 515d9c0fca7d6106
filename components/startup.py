"""The start-up script every cloud's SpotGpuGroup nodes run (user data / startup-script).

Pure: no Pulumi, no cloud SDKs, so every cloud module (and the local target) renders the same script
and tests read it as plain text.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from components.args import JobCommand
from components.fabric import DEFAULT_ROUTE_DEVICE
from components.node_exit import (
    NODE_DIR,
    ExitRecordChannel,
    boot_record_lines,
    exit_record_lines,
    fresh_node_dir,
)
from components.provider_rules import check_size
from components.rendezvous import (
    EXIT_GROUP_NOT_FORMED,
    GROUP_ENV,
    MASTER_PORT,
    GroupRendezvous,
    rendezvous_lines,
)
from router.contract.clouds import SHUTDOWN_GRACE_MIN as SHUTDOWN_GRACE_MIN
from router.contract.stack_config import RESERVED_ENV as RESERVED_ENV

# POSIX shell variable names; anything else could not be exported and would break the script.
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Set by spotroute itself: a job env entry with one of these names would silently win otherwise
# (the one list, shared with validation: router.contract.stack_config.RESERVED_ENV).
LOG_PATH = "/var/log/spotroute-job.log"
# SHUTDOWN_GRACE_MIN (router.contract.clouds): minutes between job exit and power-off, to read
# logs or cancel; route report ends a finished job's bill there.
# Power off after the grace period. What power-off means for the bill is the cloud's: AWS
# terminates (instance-initiated shutdown behaviour), GCP stops the VM; Azure passes its own lines.
POWER_OFF: tuple[str, ...] = (f"shutdown -h +{SHUTDOWN_GRACE_MIN} 'spotroute: job finished'",)
# PyTorch data-loader workers and NCCL use /dev/shm; Docker's default is 64 MB.
DOCKER_RUN = "docker run --rm --gpus all --network host --ipc=host"


SECRET_FETCH_TRIES = 8  # a fresh grant can take a minute or two to reach the secret store


@dataclass(frozen=True, slots=True)
class SecretChannel:
    """How a node reads its job's secret env at boot, with its own identity.

    `command` prints the secret env as a JSON object (name → value) on stdout and nothing else;
    `where` names the store for the log. The values never touch the disk, the user data or the
    log: the script keeps them in its environment and passes them to the job by name only.
    """

    command: str
    where: str


# Stdin: the JSON map; argv: the names. Prints one `export NAME='value'` line per name.
_EXPORTS = """import json, shlex, sys
env = json.loads(sys.stdin.read())
for name in sys.argv[1:]:
    value = env.get(name) if isinstance(env, dict) else None
    if not isinstance(value, str):
        sys.exit("spotroute: the secret store holds no value for " + name)
    print("export " + name + "=" + shlex.quote(value))
"""
# GCP Secret Manager: the service account's token from the metadata server, then
# versions.access (payload.data is base64). argv[1]: projects/<p>/secrets/<s>/versions/<v>.
_GCP_FETCH = """import base64, json, sys, urllib.request as rq
md = "http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token"
token = json.load(rq.urlopen(rq.Request(md, headers={"Metadata-Flavor": "Google"}), timeout=10))
url = "https://secretmanager.googleapis.com/v1/" + sys.argv[1] + ":access"
auth = {"Authorization": "Bearer " + token["access_token"]}
reply = json.load(rq.urlopen(rq.Request(url, headers=auth), timeout=30))
sys.stdout.write(base64.b64decode(reply["payload"]["data"]).decode())
"""
# Azure Key Vault: the managed identity's token from IMDS (for vault.azure.net), then GET the
# secret. argv[1]: the secret's versioned URL; argv[2]: the identity's client id.
_AZURE_FETCH = """import json, sys, urllib.request as rq
md = ("http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01"
      "&resource=https%3A%2F%2Fvault.azure.net&client_id=" + sys.argv[2])
token = json.load(rq.urlopen(rq.Request(md, headers={"Metadata": "true"}), timeout=10))
auth = {"Authorization": "Bearer " + token["access_token"]}
url = sys.argv[1] + "?api-version=7.4"
sys.stdout.write(json.load(rq.urlopen(rq.Request(url, headers=auth), timeout=30))["value"])
"""


def _python(code: str, *args: str) -> str:
    assert "'" not in code  # the code is one single-quoted shell word
    return " ".join(["python3", "-c", f"'{code}'", *(shlex.quote(a) for a in args)])


def aws_secret_channel(parameter_name: str, region: str) -> SecretChannel:
    """An SSM SecureString parameter, read by the AWS CLI with the instance role (IMDSv2)."""
    return SecretChannel(
        "aws ssm get-parameter --with-decryption --output text --query Parameter.Value"
        f" --region {shlex.quote(region)} --name {shlex.quote(parameter_name)}",
        f"SSM parameter {parameter_name}",
    )


def gcp_secret_channel(version_name: str) -> SecretChannel:
    """A Secret Manager secret version, read with the VM service account's metadata token."""
    return SecretChannel(_python(_GCP_FETCH, version_name), f"Secret Manager {version_name}")


def azure_secret_channel(secret_url: str, client_id: str) -> SecretChannel:
    """A Key Vault secret, read with the VM's user-assigned managed identity (IMDS token)."""
    return SecretChannel(_python(_AZURE_FETCH, secret_url, client_id), f"Key Vault {secret_url}")


# For validating Args before anything exists: renders the script without a store to read.
NO_SECRET_STORE_YET = SecretChannel("false", "(validation only)")


def _secret_lines(names: Sequence[str], channel: SecretChannel) -> list[str]:
    tries = SECRET_FETCH_TRIES
    where = shlex.quote(channel.where)
    return [
        # Values stay in this shell's memory: never in user data, on disk or in this log.
        "spotroute_secrets=''",
        f"for attempt in {' '.join(str(i) for i in range(1, tries + 1))}; do",
        f'  spotroute_secrets="$({channel.command} | {_python(_EXPORTS, *names)})" && break',
        f"  [ $attempt = {tries} ] && {{ echo spotroute: could not read the job secrets from"
        f" {where}; exit 1; }}",
        "  sleep $((attempt * 15))",
        "done",
        'eval "$spotroute_secrets"',
        "unset spotroute_secrets",
    ]


def _default_route_device(name: str) -> list[str]:
    """Export `name` as the interface of the node's default route, or leave it unset (NCCL then
    picks an interface itself) when there is none to read."""
    # `ip -o route show default`: "default via 10.128.0.1 dev enp0s12 proto dhcp src … metric 100".
    route = r"ip -o route show default 2>/dev/null | sed -n 's/.* dev \([^ ]*\).*/\1/p' | head -n1"
    return [
        f'spotroute_dev="$({route} || true)"',
        f'if [ -n "$spotroute_dev" ]; then export {name}="$spotroute_dev"; fi',
        "unset spotroute_dev",
    ]


def _group_rounds(run: list[str], reform_rounds: int) -> list[str]:
    """The job run as one group: form it, run, and form it again after a peer's notice."""
    return [
        "spotroute_round=0",
        "while :; do",
        # Not formed: its own status, an infrastructure failure for the router. Stopped by a
        # signal (the node going away while it waited): that signal's status, as for a job.
        "  spotroute_rendezvous || { status=$?; [ $status -ge 128 ] || { echo 'spotroute: the"
        f" group did not form'; status={EXIT_GROUP_NOT_FORMED}; }}; break; }}",
        # date, not $EPOCHSECONDS: that is bash 5.0's, and Amazon Linux 2 (the V100 image) has
        # bash 4.2, where `set -u` stops the script at it (components/provider_rules/bash.toml).
        "  spotroute_started=$(date +%s)",
        "  status=0",
        *(f"  {line}" for line in run),
        '  [ "$status" = 0 ] && break',
        # The library saved the group on one node's notice and every node stopped; this node
        # waits for the lost one's replacement only where the cloud replaces single nodes.
        f'  [ "$spotroute_round" -lt {reform_rounds} ] && spotroute_peer_lost "$spotroute_started"'
        " || break",
        "  spotroute_round=$((spotroute_round + 1))",
        '  echo "spotroute: a peer node was preempted (status $status); forming the group again"',
        "done",
    ]


def job_field_bytes(job: JobCommand) -> dict[str, int]:
    """Bytes each of the job's own fields adds to the start-up script (job.yaml's names): the
    field a size refusal names (components/provider_rules.py check_size)."""
    env = sum(len(f"export {k}={shlex.quote(v)}\n -e {k}") for k, v in job.env.items())
    secrets = sum(2 * len(f" {name}") + len(f" -e {name}") for name in job.secret_names)
    return {
        "run.env": env,
        "run.command": len(" ".join(shlex.quote(part) for part in job.command)),
        "run.image": 2 * len(shlex.quote(job.image)),  # pulled, then run
        "run.secrets": secrets,
    }


def check_script_size(cloud: str, type_: str, property_: str, script: str, job: JobCommand) -> str:
    """`script`, or ScriptTooLarge naming the job field that grew when `cloud` would refuse it
    as `type_`'s `property_` (provider_rules/<cloud>.toml)."""
    check_size(cloud, type_, property_, script, job_field_bytes(job))
    return script


def _group_of_one() -> list[str]:
    """A single node's group variables where no rendezvous is given: rank 0 of 1, itself the
    master (the clouds and the local target run the rendezvous instead; the same names)."""
    return [
        'SPOTROUTE_NODE_ID="${SPOTROUTE_NODE_ID:-$(hostname)}"',
        'SPOTROUTE_NODE_ADDRESS="${SPOTROUTE_NODE_ADDRESS:-$(hostname -I | cut -d" " -f1)}"',
        "export SPOTROUTE_NODE_ID SPOTROUTE_NODE_ADDRESS",
        f"export SPOTROUTE_NODE_RANK=0 NODE_RANK=0 SKYPILOT_NODE_RANK=0 NNODES=1"
        f" MASTER_PORT={MASTER_PORT}",
        'export MASTER_ADDR="$SPOTROUTE_NODE_ADDRESS" SKYPILOT_NODE_IPS="$SPOTROUTE_NODE_ADDRESS"',
        f'export SPOTROUTE_RDZV_ENDPOINT="$SPOTROUTE_NODE_ADDRESS:{MASTER_PORT}"',
        'export SPOTROUTE_GROUP_GENERATION="$SPOTROUTE_NODE_ID"',
    ]


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
    secrets: SecretChannel | None = None,
    placement: str = "",
    rendezvous: GroupRendezvous | None = None,
    fabric: Sequence[str] = (),
    fabric_env: Mapping[str, str] | None = None,
    exit_record: ExitRecordChannel | None = None,
    log_path: str = LOG_PATH,
    workdir: str = "/opt/spotroute",
) -> str:
    """Bash start-up script that runs the job (its container with all GPUs, or its bare command).

    Every value from the job (env, image, command) is shell-quoted with shlex.quote, so a value
    can never end the quoted word and run a command of its own. With `shutdown_when_done` the
    `finish` lines run from an EXIT trap, so they run whatever ends the script: the job's exit, or
    `set -e` stopping at an early failure (docker missing, pull failed). The default powers the
    node off SHUTDOWN_GRACE_MIN minutes later (`shutdown -c` on the node cancels it).
    `notice_source` (aws, gcp, azure) becomes SPOTROUTE_NOTICE_SOURCE, which router.checkpoint
    reads to watch the cloud's preemption notices. `placement` (the stack's name) becomes
    SPOTROUTE_PLACEMENT_ID: the job answers only the hand-over requests addressed to it and names
    it in its resume record (docs/migration.md). `secrets` is how the node reads the job's
    secret env (`job.secret_names`) at boot; a job with secrets and no channel is refused.
    A group forms through `rendezvous` (components/rendezvous.py) before the job starts — a
    group of one too, which waits out a fresh storage grant that way — and again after a peer's
    notice stopped it, up to `rendezvous.reform_rounds` times; one that does not form ends the
    script with EXIT_GROUP_NOT_FORMED. A single node without a rendezvous gets the same group
    variables (rank 0 of 1, itself the master); more nodes need one.
    `fabric` are extra `docker run` options for the node's fabric (devices, mounts) and
    `fabric_env` the NCCL settings the provider documents for it (the job's env wins).
    `exit_record` is how the node stores its exit record next to the checkpoints when the script
    ends, and its boot record as it starts (components/node_exit.py): the router tells a crash
    from a preemption by the first, and a node that came back from the second.
    `log_path` and `workdir` (where a bare command runs) are the local target's substitutions.
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
    for key in job.secret_names:
        if not _ENV_NAME.fullmatch(key) or key in RESERVED_ENV or key in job.env:
            raise ValueError(
                f"job.secret_names: {key!r} is not a free variable name — use letters, digits"
                " and '_', not one spotroute sets or run.env already has"
            )
    if job.secret_names and secrets is None:
        raise ValueError("job.secret_names: this target has no secret store to deliver them")
    if node_count > 1 and rendezvous is None:
        raise ValueError(
            f"node_count: {node_count} nodes need a rendezvous to form one group — this target"
            " has none; use node_count 1"
        )

    env = {
        "SPOTROUTE_JOB_ID": job_name,
        "SPOTROUTE_CHECKPOINT_URL": checkpoint_url,
        # Rendezvous (torchrun's and SkyPilot's names). The group size is known at boot; a
        # group's ranks and addresses come from its rendezvous (docs/components.md).
        "SPOTROUTE_NODE_COUNT": str(node_count),
        "SKYPILOT_NUM_NODES": str(node_count),
    }
    if notice_source:
        env["SPOTROUTE_NOTICE_SOURCE"] = notice_source
    if placement:
        env["SPOTROUTE_PLACEMENT_ID"] = placement
    if job.checkpoint_interval_s:
        env["SPOTROUTE_CHECKPOINT_INTERVAL"] = checkpoint_interval_text(job.checkpoint_interval_s)
    fabric_env = {k: v for k, v in (fabric_env or {}).items() if k not in job.env}
    found_at_boot = [k for k, v in fabric_env.items() if v == DEFAULT_ROUTE_DEVICE]
    env.update({k: v for k, v in fabric_env.items() if k not in found_at_boot})
    if exit_record is not None:
        env["SPOTROUTE_NODE_DIR"] = NODE_DIR  # where the library says it saved on a notice
    env.update(job.env)
    command = " ".join(shlex.quote(part) for part in job.command)
    lines = [
        "#!/bin/bash",
        f"# spotroute start-up script for job {shlex.quote(job_name)}",
        "set -euo pipefail",
        f"exec >>{shlex.quote(log_path)} 2>&1",
    ]
    if exit_record is not None:
        lines += exit_record_lines(exit_record, job_name, placement)
        lines += boot_record_lines(exit_record, job_name, placement)
    if shutdown_when_done:
        lines += [
            # Runs on every exit, including `set -e` aborts before the job starts.
            "spotroute_finish() {",
            "  code=$?",
            "  set +e",
            '  echo "spotroute: job exited with status $code"',
            *(['  spotroute_exit_record "$code"'] if exit_record is not None else []),
            *(f"  {line}" for line in finish),
            '  exit "$code"',
            "}",
            "trap spotroute_finish EXIT",
        ]
    lines += [*(f"export {key}={shlex.quote(value)}" for key, value in env.items())]
    lines += [*(line for key in found_at_boot for line in _default_route_device(key))]
    if exit_record is not None:
        # A node that boots again (GCE: after host maintenance) supersedes its exit record.
        lines += [fresh_node_dir(), "spotroute_boot_record"]
    if job.secret_names and secrets is not None:
        lines += _secret_lines(job.secret_names, secrets)
    lines.append("status=0")
    passthrough_names = [*env, *found_at_boot, *job.secret_names]
    # A group of one is still a group: every node gets rank, count, master and peers
    # (GROUP_ENV), so `torchrun --nnodes=$NNODES --node-rank=$NODE_RANK` runs at any node count.
    if rendezvous is not None:
        lines += rendezvous_lines(rendezvous, checkpoint_url, placement or job_name, node_count)
    else:
        lines += _group_of_one()
    passthrough_names += [name for name in GROUP_ENV if name not in passthrough_names]
    run: list[str]
    if job.image:
        image = shlex.quote(job.image)
        # `-e NAME` without a value copies the variable from this shell, so values are quoted once.
        passthrough = " ".join(f"-e {key}" for key in passthrough_names)
        extra = "".join(f" {option}" for option in fabric)
        lines += [
            "command -v docker >/dev/null || "
            "{ echo 'spotroute: docker is not installed on this image'; exit 1; }",
            # Registries throttle and networks blip at boot; a few retries beat a dead node.
            f"for attempt in 1 2 3 4 5; do docker pull {image} && break; "
            "[ $attempt = 5 ] && exit 1; sleep $((attempt * 10)); done",
        ]
        # Host networking keeps the instance metadata service (preemption notices) reachable
        # from the container with the default IMDSv2 hop limit of 1, and lets NCCL use the
        # node's interfaces; host IPC gives data-loader workers and NCCL a real /dev/shm.
        run = [
            f"{DOCKER_RUN}{extra} --name spotroute-job {passthrough} "
            + (f"-v {NODE_DIR}:{NODE_DIR} " if exit_record is not None else "")
            + f"{image}{' ' + command if command else ''} || status=$?"
        ]
    else:
        lines.append(f"mkdir -p {shlex.quote(workdir)} && cd {shlex.quote(workdir)}")
        run = [f"{command} || status=$?"]
    if rendezvous is not None:
        lines += _group_rounds(run, rendezvous.reform_rounds)
    else:
        lines += run
    if not shutdown_when_done:
        lines.append('echo "spotroute: job exited with status $status"')
        if exit_record is not None:
            lines.append('spotroute_exit_record "$status"')
    lines.append('exit "$status"')
    return "\n".join(lines) + "\n"
