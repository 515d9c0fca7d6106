"""The node's exit record: what the job's exit looked like on the node, next to its checkpoints.

A node that stops running the job says how, so the router can tell a crash from a preemption
(router/core/node_exit.py decides; docs/migration.md): the start-up script's EXIT trap writes
`<checkpoint url>/exit-<node>.json` = {"format": "spotroute-exit/1", "node", "status",
"interruption_marker", "placement", "job", "time"}. `status` is the job's exit status (or the
script's, when it stopped before the job); `interruption_marker` is whether the checkpoint
library wrote SPOTROUTE_NODE_DIR/interruption.json, i.e. saved on a preemption notice and exited
(router/checkpoint/notice_handling.py) — needed because torchrun reports a worker's exit 75 as
its own 1. The node writes with its own identity, which may write below its checkpoint prefix:
AWS with the AWS CLI, GCP and Azure with python3's standard library and the metadata token, as
the secret channels read (components/startup.py).

Each boot the script also writes `<checkpoint url>/boot-<node>.json` = {"format":
"spotroute-boot/1", "node", "placement", "job", "time"} before the job starts. A VM that boots
again and resumes the job (GCE runs the start-up script at every boot: an on-demand VM restarted
after host maintenance) so says that its exit record from before the restart is over: the router
counts an exit only while no newer boot of the same node follows it.

Pure: renders bash and small python3 programs; tests run them.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

NODE_DIR = "/var/lib/spotroute/node"  # on the host, mounted at the same path in the container
NODE_MARKER = "interruption.json"  # the library's word in SPOTROUTE_NODE_DIR: saved on a notice
EXIT_FORMAT = "spotroute-exit/1"
BOOT_FORMAT = "spotroute-boot/1"


@dataclass(frozen=True, slots=True)
class ExitRecordChannel:
    """How a node stores its exit record: `command URL` reads the JSON on stdin and writes it
    to URL (an object below the node's checkpoint prefix); `where` names the store for the log."""

    command: str
    where: str


# argv[1]: gs://bucket/object. The JSON API's simple upload with the VM service account's token
# (Cloud Storage, "Perform a simple upload": POST /upload/storage/v1/b/BUCKET/o?uploadType=media).
_GCP_PUT = """import json, sys, urllib.parse as up, urllib.request as rq
md = "http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token"
token = json.load(rq.urlopen(rq.Request(md, headers={"Metadata-Flavor": "Google"}), timeout=10))
bucket, _, name = sys.argv[1][len("gs://"):].partition("/")
url = ("https://storage.googleapis.com/upload/storage/v1/b/" + bucket
       + "/o?uploadType=media&name=" + up.quote(name, safe=""))
auth = {"Authorization": "Bearer " + token["access_token"], "Content-Type": "application/json"}
rq.urlopen(rq.Request(url, data=sys.stdin.buffer.read(), method="POST", headers=auth), timeout=30)
"""
# argv[1]: the managed identity's client id; argv[2]: the blob's https URL. Put Blob with an
# Entra ID token for storage (Azure Storage REST, "Put Blob"; x-ms-blob-type BlockBlob).
_AZURE_PUT = """import json, sys, urllib.request as rq
md = ("http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01"
      "&resource=https%3A%2F%2Fstorage.azure.com%2F&client_id=" + sys.argv[1])
token = json.load(rq.urlopen(rq.Request(md, headers={"Metadata": "true"}), timeout=10))
put = {"Authorization": "Bearer " + token["access_token"], "x-ms-blob-type": "BlockBlob",
       "x-ms-version": "2021-08-06", "Content-Type": "application/json"}
rq.urlopen(rq.Request(sys.argv[2], data=sys.stdin.buffer.read(), method="PUT", headers=put),
           timeout=30)
"""


def _python(code: str, *args: str) -> str:
    assert "'" not in code  # the code is one single-quoted shell word
    return " ".join(["python3", "-c", f"'{code}'", *(shlex.quote(a) for a in args)])


def aws_exit_channel(region: str) -> ExitRecordChannel:
    """`aws s3 cp - URL` with the instance role (s3:PutObject below the job's prefix)."""
    return ExitRecordChannel(
        "aws s3 cp --only-show-errors --content-type application/json"
        f" --region {shlex.quote(region)} -",
        "S3",
    )


def gcp_exit_channel() -> ExitRecordChannel:
    """A Cloud Storage upload with the VM service account's metadata token."""
    return ExitRecordChannel(_python(_GCP_PUT), "Cloud Storage")


def azure_exit_channel(client_id: str) -> ExitRecordChannel:
    """A Put Blob with the VM's user-assigned managed identity (IMDS token for storage)."""
    return ExitRecordChannel(_python(_AZURE_PUT, client_id), "Blob Storage")


def fresh_node_dir() -> str:
    """Before the job: an empty SPOTROUTE_NODE_DIR (a rebooted node starts without a marker)."""
    return f"rm -rf {NODE_DIR} && mkdir -p {NODE_DIR}"


def exit_record_lines(channel: ExitRecordChannel, job_name: str, placement: str) -> list[str]:
    """The bash function `spotroute_exit_record STATUS`, called from the EXIT trap: builds the
    record from facts only (status, whether the library's marker is there) and stores it; a
    failed write is logged, never fatal (the cloud's own signals still speak)."""
    job = shlex.quote(json.dumps(job_name))
    stack = shlex.quote(json.dumps(placement))
    return [
        "spotroute_exit_record() {",
        "  local status=$1 marker=false node record url",
        f'  [ -s "{NODE_DIR}/{NODE_MARKER}" ] && marker=true',
        *_stored(
            channel, "exit",
            f"'{{\"format\": \"{EXIT_FORMAT}\", \"node\": \"%s\", \"status\": %d, "
            f'"interruption_marker": %s, "job": %s, "placement": %s, "time": "%s"}}\' '
            f'"$node" "$status" "$marker" {job} {stack}',
        ),
        "}",
    ]


def boot_record_lines(channel: ExitRecordChannel, job_name: str, placement: str) -> list[str]:
    """The bash function `spotroute_boot_record`, called as the script starts, on every boot:
    this node runs the job (again); a failed write is logged, never fatal."""
    job = shlex.quote(json.dumps(job_name))
    stack = shlex.quote(json.dumps(placement))
    return [
        "spotroute_boot_record() {",
        "  local node record url",
        *_stored(
            channel, "boot",
            f"'{{\"format\": \"{BOOT_FORMAT}\", \"node\": \"%s\", \"job\": %s, "
            f'"placement": %s, "time": "%s"}}\' "$node" {job} {stack}',
        ),
        "}",
    ]


def _stored(channel: ExitRecordChannel, kind: str, printf_args: str) -> list[str]:
    """Function body lines: `record` = printf `printf_args` (its format and arguments; the time
    is its last one, added here), logged, stored as `<checkpoint url>/<kind>-<node>.json`."""
    return [
        "  node=$(hostname | tr -cd 'A-Za-z0-9.-')",
        f'  record=$(printf {printf_args} "$(date -u +%Y-%m-%dT%H:%M:%SZ)")',
        f'  echo "spotroute: {kind} record $record"',
        # Robust under `set -u` too: whatever failed, the finish lines after this must run.
        '  url="${SPOTROUTE_CHECKPOINT_URL:-}"',
        '  [ -n "$url" ] || return 0',
        f'  url="${{url%/}}/{kind}-$node.json"',
        f'  printf \'%s\' "$record" | {channel.command} "$url" '
        f'|| echo "spotroute: could not write the {kind} record to {channel.where}"',
    ]
