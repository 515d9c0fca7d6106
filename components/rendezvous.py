"""How the nodes of a group find each other at boot: a rendezvous through files under the job's
own checkpoint prefix, the one place its identity may already write. A group of one forms the
same way (rank 0 of 1, itself the master), so a job gets the same variables at any node count,
and its first storage write waits out a fresh grant before the job starts.

Pure: renders shell lines and a python3 (standard library only) program for the start-up script;
no Pulumi, no SDKs. Each node, when its image is pulled and again whenever the group must form
anew,

1. writes `<checkpoint url>rendezvous/<placement>/<node id>.json` (its address, boot id and the
   time it wrote) every `poll_s` while it waits. A write or listing that fails is tried again
   at the next poll until `timeout_s`: a new identity's grant can be refused for minutes (GCP:
   "typically 2 minutes, potentially 7 minutes or longer",
   https://cloud.google.com/iam/docs/access-change-propagation; Azure role assignments "can take
   up to 10 minutes", https://learn.microsoft.com/azure/role-based-access-control/troubleshooting),
   and storage answers 5xx or times out now and then;
2. lists that prefix until exactly `node_count` nodes have written since it began waiting: a
   late node is waited for up to `timeout_s`; a lost node's entry is never rewritten, so it does
   not count, and its replacement (new id, or the same id with a new address) takes its place;
3. ranks those nodes by id, proposes the generation (a hash of the members, their addresses and
   boots) in its own entry, and waits until every member proposes the same one; rank 0's address
   is the master. A replaced node makes a new generation.

"Written since" compares the writer's clock with the reader's: cloud VMs keep theirs within
milliseconds (Amazon Time Sync, the GCE metadata server's NTP, the Azure host's PTP clock).

It prints the torchrun and SkyPilot variables as shell `export` lines (docs/components.md,
"Rendezvous"); a group that does not form by `timeout_s` ends the script with
EXIT_GROUP_NOT_FORMED, which the router takes for an infrastructure failure.
The storage calls per cloud use what the node image has: the AWS CLI with the
instance role, the GCS JSON API with the metadata server's token, the Blob REST API with the
managed identity's IMDS token; `file` is a shared directory (the local target).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass
from urllib.parse import urlparse

from router.contract.stack_config import EXIT_GROUP_NOT_FORMED as EXIT_GROUP_NOT_FORMED
from router.contract.stack_config import GROUP_ENV as GROUP_ENV

RENDEZVOUS_DIR = "rendezvous"
MASTER_PORT = 29500  # torchrun's default --master-port
TIMEOUT_S = 1200.0  # nodes of one group launch together; boot and image pull differ by minutes
POLL_S = 5.0
STORES = ("s3", "gcs", "azure", "file")


@dataclass(frozen=True, slots=True)
class GroupRendezvous:
    """Where and how patiently the nodes of a group meet (times in seconds).

    `store` names the storage API (s3: the AWS CLI; gcs: the JSON API; azure: Blob REST; file: a
    directory). `reform_rounds`: how often a node whose peer was preempted (the group saved and
    stopped as one) waits for that peer's replacement and forms the group again, instead of
    ending; 0 where the cloud re-places whole groups. `storage_endpoint` / `metadata_endpoint`
    replace the cloud's base URLs (emulators, tests); empty = the cloud's own.
    """

    store: str
    region: str = ""  # AWS: the bucket's region, for the CLI
    client_id: str = ""  # Azure: the user-assigned identity the token is for
    port: int = MASTER_PORT
    timeout_s: float = TIMEOUT_S
    poll_s: float = POLL_S
    reform_rounds: int = 0
    storage_endpoint: str = ""
    metadata_endpoint: str = ""


def aws_rendezvous(region: str) -> GroupRendezvous:
    """S3 through the AWS CLI of the image, with the instance role (IMDSv2)."""
    return GroupRendezvous("s3", region=region)


def gcp_rendezvous(reform_rounds: int = 0) -> GroupRendezvous:
    """Cloud Storage through its JSON API, with the VM service account's metadata token."""
    return GroupRendezvous("gcs", reform_rounds=reform_rounds)


def azure_rendezvous(client_id: str, reform_rounds: int = 0) -> GroupRendezvous:
    """Blob Storage through its REST API, with the user-assigned identity's IMDS token."""
    return GroupRendezvous("azure", client_id=client_id, reform_rounds=reform_rounds)


def local_rendezvous() -> GroupRendezvous:
    """A directory every node process can reach (the local target's checkpoint directory)."""
    return GroupRendezvous("file", poll_s=0.5)


def _store_for(url: str, store: str) -> None:
    scheme = urlparse(url).scheme or "file"
    expected = {"s3": ("s3",), "gcs": ("gs",), "azure": ("https",), "file": ("file",)}
    if store not in STORES:
        raise ValueError(f"rendezvous: store {store!r} — use one of {', '.join(STORES)}")
    if scheme not in expected[store]:
        raise ValueError(
            f"rendezvous: a {store} rendezvous cannot use checkpoint URL {url!r} — "
            f"use a {expected[store][0]}:// URL"
        )


# The program. argv: mode (join | peer-lost), the JSON settings, [epoch seconds for peer-lost].
# Standard library only (python3 of every node image); no single quotes (one quoted shell word).
PROGRAM_HEAD = r"""import hashlib, json, os, shlex, subprocess, sys, tempfile, time
import urllib.error, urllib.parse, urllib.request as rq
from datetime import datetime
from xml.etree import ElementTree
C = json.loads(sys.argv[2])
NODE, ADDRESS = os.environ["SPOTROUTE_NODE_ID"], os.environ["SPOTROUTE_NODE_ADDRESS"]
URL = C["url"].rstrip("/") + "/"
PREFIX = "rendezvous/" + C["placement"] + "/"
def say(text):
    sys.stderr.write("spotroute: rendezvous: " + text + "\n"); sys.stderr.flush()
def http(method, url, body=None, headers=None):
    req = rq.Request(url, data=body, method=method, headers=headers or {})
    try:
        with rq.urlopen(req, timeout=30) as reply:
            return reply.read()
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise
class Token:
    def __init__(self, url, headers):
        self.url, self.headers, self.value, self.until = url, headers, "", 0.0
    def __call__(self):
        if time.time() > self.until:
            reply = json.loads(http("GET", self.url, headers=self.headers))
            self.value = reply["access_token"]
            self.until = time.time() + min(float(reply.get("expires_in", 300)), 3600) / 2
        return "Bearer " + self.value
"""
# One storage API per store, each a class `Store` with put(name, bytes), entries() (the bytes
# of every entry under the prefix) and get(name) (None when missing).
STORE_CODE = {
    "s3": r"""class Store:
    def __init__(self):
        self.base = "s3://" + URL[5:]
        self.region = ["--region", C["region"]] if C["region"] else []
    def aws(self, *args, data=None):
        command = ["aws", "s3", "cp", *args, "--only-show-errors", *self.region]
        return subprocess.run(command, input=data, capture_output=True)
    def put(self, name, data):
        done = self.aws("-", self.base + name, data=data)
        if done.returncode:
            raise OSError(done.stderr.decode(errors="replace").strip())
    def entries(self):
        with tempfile.TemporaryDirectory() as folder:
            done = self.aws(self.base + PREFIX, folder, "--recursive")
            if done.returncode:
                raise OSError(done.stderr.decode(errors="replace").strip())
            found = []
            for name in sorted(os.listdir(folder)):
                with open(os.path.join(folder, name), "rb") as source:
                    found.append(source.read())
            return found
    def get(self, name):
        done = self.aws(self.base + name, "-")
        return done.stdout if done.returncode == 0 else None
""",
    "gcs": r"""class Store:
    def __init__(self):
        self.bucket, _, self.root = URL[5:].partition("/")
        self.api = C["storage"] or "https://storage.googleapis.com"
        meta = C["metadata"] or "http://metadata.google.internal"
        path = "/computeMetadata/v1/instance/service-accounts/default/token"
        self.token = Token(meta + path, {"Metadata-Flavor": "Google"})
    def object_url(self, name):
        quoted = urllib.parse.quote(self.root + name, safe="")
        return self.api + "/storage/v1/b/" + self.bucket + "/o/" + quoted
    def put(self, name, data):
        quoted = urllib.parse.quote(self.root + name, safe="")
        url = self.api + "/upload/storage/v1/b/" + self.bucket + "/o?uploadType=media&name="
        headers = {"Authorization": self.token(), "Content-Type": "application/json"}
        http("POST", url + quoted, data, headers)
    def entries(self):
        names, page = [], ""
        while True:
            query = {"prefix": self.root + PREFIX, "fields": "items(name),nextPageToken"}
            if page:
                query["pageToken"] = page
            url = self.api + "/storage/v1/b/" + self.bucket + "/o?" + urllib.parse.urlencode(query)
            reply = json.loads(http("GET", url, headers={"Authorization": self.token()}) or b"{}")
            names += [item["name"][len(self.root):] for item in reply.get("items", [])]
            page = reply.get("nextPageToken", "")
            if not page:
                return [self.get(name) for name in sorted(names) if name.endswith(".json")]
    def get(self, name):
        url = self.object_url(name) + "?alt=media"
        return http("GET", url, headers={"Authorization": self.token()})
""",
    "azure": r"""class Store:
    def __init__(self):
        parsed = urllib.parse.urlparse(URL)
        self.container, _, self.root = parsed.path.lstrip("/").partition("/")
        self.api = (C["storage"] or "https://" + parsed.netloc) + "/" + self.container
        meta = C["metadata"] or "http://169.254.169.254"
        query = urllib.parse.urlencode({"api-version": "2018-02-01", "client_id": C["client_id"],
                                        "resource": "https://storage.azure.com/"})
        self.token = Token(meta + "/metadata/identity/oauth2/token?" + query, {"Metadata": "true"})
    def headers(self, **extra):
        return {"Authorization": self.token(), "x-ms-version": "2021-08-06", **extra}
    def put(self, name, data):
        kind = {"x-ms-blob-type": "BlockBlob", "Content-Type": "application/json"}
        url = self.api + "/" + urllib.parse.quote(self.root + name)
        http("PUT", url, data, self.headers(**kind))
    def entries(self):
        names, marker = [], ""
        while True:
            query = {"restype": "container", "comp": "list", "prefix": self.root + PREFIX}
            if marker:
                query["marker"] = marker
            url = self.api + "?" + urllib.parse.urlencode(query)
            tree = ElementTree.fromstring(http("GET", url, headers=self.headers()))
            names += [n.text[len(self.root):] for n in tree.iter("Name") if n.text]
            marker = tree.findtext("NextMarker") or ""
            if not marker:
                return [self.get(name) for name in sorted(names) if name.endswith(".json")]
    def get(self, name):
        url = self.api + "/" + urllib.parse.quote(self.root + name)
        return http("GET", url, headers=self.headers())
""",
    "file": r"""class Store:
    def __init__(self):
        self.root = urllib.parse.urlparse(URL).path if URL.startswith("file:") else URL
    def put(self, name, data):
        path = os.path.join(self.root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "wb") as out:
            out.write(data)
        os.replace(path + ".tmp", path)
    def entries(self):
        folder = os.path.join(self.root, PREFIX)
        names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
        names = [n for n in names if n.endswith(".json")]
        return [self.get(PREFIX + n) for n in names]
    def get(self, name):
        try:
            with open(os.path.join(self.root, name), "rb") as source:
                return source.read()
        except FileNotFoundError:
            return None
""",
}
PROGRAM_TAIL = r"""STORE = Store()
def boot_id():
    if os.environ.get("SPOTROUTE_BOOT_ID"):
        return os.environ["SPOTROUTE_BOOT_ID"]
    with open("/proc/sys/kernel/random/boot_id") as source:
        return source.read().strip()
ME = {"node": NODE, "address": ADDRESS, "boot": boot_id()}
def write(gen):
    STORE.put(PREFIX + NODE + ".json", json.dumps({**ME, "gen": gen, "seen": time.time()}).encode())
def live(since):
    found = {}
    for blob in STORE.entries():
        try:
            entry = json.loads(blob)
        except (TypeError, ValueError):
            continue
        if float(entry.get("seen", 0)) >= since:
            found[entry["node"]] = entry
    return [found[n] for n in sorted(found)]
def generation(members):
    text = json.dumps([[m["node"], m["address"], m["boot"]] for m in members])
    return hashlib.sha256(text.encode()).hexdigest()[:12]
def join():
    started = time.time()
    deadline, proposal, said, refused = started + C["timeout_s"], None, "", ""
    while True:
        try:
            write(proposal)
            members = live(started)
            refused = ""
        except Exception as error:
            # A new grant not yet in force, a 5xx, a timeout: the same next poll, to the deadline.
            members = []
            problem = "cannot write or list " + URL + PREFIX + ": " + str(error)
            if problem != refused:
                say(problem + "; trying again until the deadline"); refused = problem
        if ME["node"] in [m["node"] for m in members] and len(members) == C["nodes"]:
            gen = generation(members)
            if gen != proposal:
                proposal = gen
                continue
            if all(m.get("gen") == gen for m in members):
                return members, gen
        here = ", ".join(m["node"] + " " + m["address"] for m in members)
        news = str(len(members)) + " of " + str(C["nodes"]) + " nodes here (" + here + ")"
        if news != said:
            say(news + "; waiting"); said = news
        if time.time() > deadline:
            why = refused or "the others never started, or cannot write " + URL + PREFIX
            say("the group did not form within " + str(int(C["timeout_s"])) + " s: " + news
                + " - " + why)
            sys.exit(1)
        time.sleep(C["poll_s"])
def exports(members, gen):
    rank = [m["node"] for m in members].index(NODE)
    master = members[0]["address"]
    values = {"SPOTROUTE_NODE_RANK": rank, "NODE_RANK": rank, "SKYPILOT_NODE_RANK": rank,
              "NNODES": C["nodes"], "MASTER_ADDR": master, "MASTER_PORT": C["port"],
              "SPOTROUTE_RDZV_ENDPOINT": master + ":" + str(C["port"]),
              "SKYPILOT_NODE_IPS": "\n".join(m["address"] for m in members),
              "SPOTROUTE_GROUP_GENERATION": gen}
    for name, value in values.items():
        print("export " + name + "=" + shlex.quote(str(value)))
    say("formed generation " + gen + ": rank " + str(rank) + " of " + str(C["nodes"])
        + ", master " + master)
def peer_lost(started):
    marker = json.loads(STORE.get("interruption.json") or b"{}")
    noticed = marker.get("noticed_on") or []
    try:
        written = datetime.fromisoformat(str(marker.get("written_at"))).timestamp()
    except ValueError:
        written = 0.0
    fresh = written >= started - 5
    sys.exit(0 if fresh and marker.get("exiting") and noticed and NODE not in noticed else 1)
if sys.argv[1] == "join":
    exports(*join())
else:
    peer_lost(float(sys.argv[3]))
"""


def settings_json(
    rendezvous: GroupRendezvous, checkpoint_url: str, placement: str, node_count: int
) -> str:
    """The program's settings (argv[2]) for one group."""
    _store_for(checkpoint_url, rendezvous.store)
    if node_count < 1:
        raise ValueError(f"node_count: {node_count} — a group has 1 node or more")
    if not placement or "/" in placement:
        raise ValueError(f"placement: {placement!r} — the stack name, without '/'")
    settings = {
        **asdict(rendezvous),
        "storage": rendezvous.storage_endpoint,
        "metadata": rendezvous.metadata_endpoint,
        "url": checkpoint_url,
        "placement": placement,
        "nodes": node_count,
    }
    return json.dumps(settings, sort_keys=True)


def rendezvous_lines(
    rendezvous: GroupRendezvous, checkpoint_url: str, placement: str, node_count: int
) -> list[str]:
    """Shell lines defining `spotroute_rendezvous` (wait for the group, export its env; the
    program's status when it did not form — 128 + n when a signal stopped it) and
    `spotroute_peer_lost STARTED` (true when, since STARTED in epoch seconds, the group stopped
    for a peer's notice, not this node's: the library's marker names the nodes noticed)."""
    program = PROGRAM_HEAD + STORE_CODE[rendezvous.store] + PROGRAM_TAIL
    assert "'" not in program  # one single-quoted shell word
    settings = shlex.quote(settings_json(rendezvous, checkpoint_url, placement, node_count))
    return [
        # Overridable so several node processes can share one machine (the local target).
        'export SPOTROUTE_NODE_ID="${SPOTROUTE_NODE_ID:-$(hostname)}"',
        'export SPOTROUTE_NODE_ADDRESS="${SPOTROUTE_NODE_ADDRESS:-$(hostname -I | cut -d" " -f1)}"',
        f"spotroute_rdzv='{program}'",
        f"spotroute_rdzv_settings={settings}",
        "spotroute_rendezvous() {",
        "  local exports",
        '  exports="$(python3 -c "$spotroute_rdzv" join "$spotroute_rdzv_settings")" || return $?',
        '  eval "$exports"',
        "}",
        "spotroute_peer_lost() {",
        '  python3 -c "$spotroute_rdzv" peer-lost "$spotroute_rdzv_settings" "$1"',
        "}",
    ]
