"""The hostile-input suite (issue 12): generated, seeded cases over `route validate`, `route
plan`, `route plan --json`, `route prices import` and spotroute.yaml. For every case: no
traceback, exit code 0 or 2 (`plan` may also say "no placement fits", exit 1, for a valid job
nothing can run), no raw control character on the terminal, strict JSON whenever --json succeeds.

The generator mutates a valid job / catalog / org config with values an attacker or a bad editor
produces: integers of thousands of digits (decimal, hex, binary, sexagesimal), 1e308 and `1`
followed by 400 zeros, NaN/inf, `!!timestamp` (valid and out of range), other tags, NUL and
terminal escapes, 100 KB strings, 50k-deep nesting, alias bombs, duplicate keys, wrong types.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from router.core.strict_json import loads_strict
from tests.unit.cli_harness import SKYPILOT_GCP_HEADER, Run, isolate, route

SEED = 20261201
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
ESC_TITLE = "\x1b]0;pwned\x07"

BASE_JOB = {
    "name": "hostile",
    "resources": '{accelerators: "T4:1", clouds: [local]}',
    "market": "on-demand",
    "duration_hours": "1",
    "checkpoint": "{interval: 10m, url: auto}",
    "run": '{command: [python, train.py], env: {EPOCHS: "3"}}',
    "labels": "{team: ml}",
}

HOSTILE_SCALARS = [
    "1" + "0" * 400,
    "1.0e+308",
    "-1.0e+308",
    "0x" + "f" * 3000,
    "0b" + "1" * 9000,
    ":".join(["59"] * 2000),
    "9" * 5000,
    ".nan",
    ".inf",
    "-.inf",
    "!!timestamp 2001-12-14t21:59:43.10-05:00",
    "!!timestamp 99999-12-14",
    "2001-12-14",
    "!!binary aGVsbG8=",
    "!!python/object:os.system ls",
    "!!float nan",
    "~",
    "[]",
    "{}",
    "true",
    "-1",
    "0",
    '"\\0"',
    f'"{ESC_TITLE.encode("unicode_escape").decode()}"',
    '"\\e[2J\\e[31mred"',
    '"\\u202eevil"',
    '"' + "A" * 100_000 + '"',
    "[" * 50_000 + "]" * 50_000,
    "&a [*a]",
    '"T4:1\\0"',
    '"A100"',
    '"H100-80GB:100000"',
    '"1h' + "9" * 400 + 'm"',
    "!!str",
    "!!int 12",
    "*undefined",
    "@reserved",
    "'unterminated",
]
HOSTILE_KEYS = [ESC_TITLE, "x\x00y", "é" * 300, "<<", "? complex", "1" * 2000, "\u202ename"]


def _job_text(rng: random.Random) -> str:
    fields = dict(BASE_JOB)
    for _ in range(rng.randint(1, 3)):
        op = rng.random()
        key = rng.choice(list(fields))
        if op < 0.55:
            fields[key] = rng.choice(HOSTILE_SCALARS)
        elif op < 0.7:
            fields[rng.choice(HOSTILE_KEYS).replace("\x00", "\\0")] = "1"
        elif op < 0.8:
            inner = rng.choice(["accelerators", "clouds", "command", "env", "interval", "url"])
            fields[key] = f"{{{inner}: {rng.choice(HOSTILE_SCALARS)}}}"
        elif op < 0.9:
            fields["duration_hours"] = rng.choice(HOSTILE_SCALARS[:12])
        else:
            fields.pop(key)
    lines = [f"{k}: {v}" for k, v in fields.items()]
    if rng.random() < 0.1:
        lines.append(rng.choice(lines))  # a duplicate key
    if rng.random() < 0.05:
        bomb = ["a: &a [x, x, x, x, x, x, x, x, x]"]
        bomb += [f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}] " for i in range(8)]
        bomb += ["c2: {<<: [" + ", ".join(["*a"] * 200) + "]}"]
        lines += bomb
    return "\n".join(lines) + "\n"


def _catalog_text(rng: random.Random) -> str:
    header = SKYPILOT_GCP_HEADER
    good = [
        "a2-highgpu-8g",
        "96.0",
        "680.0",
        "",
        "",
        "",
        "us-central1",
        "us-central1-a",
        "5.9",
        "2.3",
    ]
    rows = [header]
    for _ in range(rng.randint(1, 6)):
        row = list(good)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(row))
            row[i] = rng.choice(
                [
                    f"us-{ESC_TITLE}central1",
                    "us-evil-1",
                    "us-central1\x00",
                    "cheap",
                    "nan",
                    "inf",
                    "-5",
                    "0",
                    "1e400",
                    "9" * 5000,
                    "",
                    '"',
                    "A" * 50_000,
                    "\x1b[2J",
                ]
            )
        rows.append(",".join(row))
    if rng.random() < 0.1:
        rows.append("\x00\x01\x02 binary garbage \xff")
    return "\n".join(rows) + "\n"


def _org_text(rng: random.Random) -> str:
    options = [
        "budgets: {max_job_cost: .nan}",
        "budgets: {max_price_per_hour: 1.0e+309}",
        "max_quote_age_s: " + "9" * 5000,
        "max_quote_age_s: 1" + "0" * 400 + "h",
        "regions: {allow: [" + "[" * 50_000 + "]" * 50_000 + "]}",
        "clouds: [aws]\nclouds: [gcp]",
        "require_fresh: !!timestamp 2001-12-14",
        "backend_url: " + f'"{ESC_TITLE.encode("unicode_escape").decode()}"',
        "discounts: [{cloud: aws, percent: .inf}]",
        "credentials: {api_key: hunter2}",
        f'"{ESC_TITLE.encode("unicode_escape").decode()}": 1',
        "reservations: [{cloud: aws, region: us-east-1, instance_type: p4d.24xlarge, count: 0x"
        + "f" * 2000
        + ", price_per_hour: 1}]",
        "allow_stale_deploy: yes please",
        "[" * 50_000,
        "a: &a [1,2,3,4,5,6,7,8,9]\nb: {<<: [" + ", ".join(["*a"] * 500) + "]}",
        "!!python/object/apply:os.system [ls]",
    ]
    return "\n".join(rng.sample(options, rng.randint(1, 2))) + "\n"


def _check(run: Run, *, as_json: bool, allow_no_placement: bool) -> str | None:
    """Why this run breaks a promise (None when it keeps them all)."""
    if "Traceback" in run.err or "error: unexpected " in run.err:
        return f"traceback/unexpected: {run.err[:200]!r}"
    ok_codes = {0, 2} | (
        {1} if allow_no_placement and "no placement fits" in run.err + run.out else set()
    )
    if run.code not in ok_codes:
        return f"exit {run.code}: {run.err[:200]!r}"
    if RAW_CONTROL.search(run.out.replace("\n", "").replace("\t", "")) or RAW_CONTROL.search(
        run.err.replace("\n", "").replace("\t", "")
    ):
        return f"raw control character: {(run.out + run.err)[:200]!r}"
    if as_json and run.code == 0:
        try:
            loads_strict(run.out)
        except ValueError as exc:
            return f"not strict JSON ({exc})"
    if any(len(line) > 2000 for line in run.err.splitlines()):
        return "an error line longer than 2000 characters"
    return None


def _suite(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    cases: int,
    make: Callable[[random.Random, Path], tuple[str, ...]],
    *,
    as_json: bool = False,
    allow_no_placement: bool = False,
    salt: int = 0,
) -> Counter[int]:
    isolate(monkeypatch, tmp_path)
    rng = random.Random(SEED + salt)
    failures: list[str] = []
    codes: Counter[int] = Counter()
    for i in range(cases):
        args = make(rng, tmp_path / f"case-{i}")
        run = route(monkeypatch, capsys, *args)
        codes[run.code] += 1
        why = _check(
            run, as_json=as_json and "--json" in args, allow_no_placement=allow_no_placement
        )
        if why:
            failures.append(f"case {i} ({' '.join(args)[:80]}): {why}")
    assert not failures, f"{len(failures)} of {cases} cases broke a promise:\n" + "\n".join(
        failures[:15]
    )
    print(f"{cases} cases, exit codes {dict(codes)}")
    return codes


def _job_case(rng: random.Random, where: Path) -> Path:
    where.mkdir(parents=True)
    path = where / "job.yaml"
    path.write_text(_job_text(rng), encoding="utf-8")
    return path


def test_validate_survives_hostile_job_files(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    codes = _suite(
        monkeypatch, capsys, tmp_path, 300, lambda rng, w: ("validate", str(_job_case(rng, w)))
    )
    assert codes[2] > 100  # the generator does produce bad input


def test_plan_survives_hostile_job_files(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _suite(
        monkeypatch,
        capsys,
        tmp_path,
        200,
        lambda rng, w: ("plan", str(_job_case(rng, w))),
        allow_no_placement=True,
        salt=1,
    )


def test_plan_json_survives_hostile_job_files_and_is_strict_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _suite(
        monkeypatch,
        capsys,
        tmp_path,
        200,
        lambda rng, w: ("plan", str(_job_case(rng, w)), "--json", "--explain"),
        as_json=True,
        allow_no_placement=True,
        salt=2,
    )


def test_prices_import_survives_hostile_catalogs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def make(rng: random.Random, where: Path) -> tuple[str, ...]:
        where.mkdir(parents=True)
        path = where / "vms.csv"
        path.write_bytes(_catalog_text(rng).encode("utf-8", "surrogateescape"))
        json_flag = ("--json",) if rng.random() < 0.5 else ()
        return ("prices", "import", str(path), "--format", "skypilot", "--cloud", "gcp", *json_flag)

    _suite(monkeypatch, capsys, tmp_path, 150, make, as_json=True, salt=3)
    # and nothing bogus reached the cache: a plan of a GCP job shows only real region names
    run = route(monkeypatch, capsys, "prices", "--clouds", "gcp", "--json")
    assert run.code == 0
    regions = {o["region"] for o in loads_strict(run.out)}
    assert all(re.fullmatch(r"[a-z]+-[a-z]+\d{1,2}", r) for r in regions), regions
    assert "us-evil-1" not in regions  # not GCP's naming: refused on import


def test_org_config_survives_hostile_spotroute_yaml(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("\n".join(f"{k}: {v}" for k, v in BASE_JOB.items()) + "\n")

    def make(rng: random.Random, where: Path) -> tuple[str, ...]:
        where.mkdir(parents=True)
        (where / "Pulumi.yaml").write_text("name: spotroute\nruntime: python\n")
        (where / "spotroute.yaml").write_text(_org_text(rng), encoding="utf-8")
        return (
            "--project-dir",
            str(where),
            "plan",
            str(job),
            *(("--json",) if rng.random() < 0.5 else ()),
        )

    codes = _suite(monkeypatch, capsys, tmp_path, 150, make, as_json=True, salt=4)
    assert codes[2] > 50
