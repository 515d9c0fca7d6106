"""Issue 32 item 5: every number of job.yaml, spotroute.yaml and a workload has a sane range, and
nothing non-finite reaches a cost or the JSON.

`data.copy_gbps: 1.0e-320` (a positive denormal) passed `> 0`; the plan showed "$nan staging (inf
h …)" and `route plan --json` failed with "Out of range float values are not JSON compliant".
"""

from __future__ import annotations

import copy
import math
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from router.cli import render
from router.config.job_file import job_file_schema
from router.core.errors import BadInput
from router.core.org import OrgConfig, org_config_from_data
from router.core.strict_json import dumps
from router.flows.plan import plan_job
from tests.unit.cli_harness import isolate, route

REPO = Path(__file__).resolve().parents[2]
EXAMPLE: dict[str, Any] = yaml.safe_load((REPO / "examples" / "llm-finetune.yaml").read_text())
NOW = datetime(2025, 6, 1, tzinfo=UTC)
TEXT_NUMBERS = ("env", "command", "labels", "offers")  # numbers there are read as text


def numeric_fields(schema: dict[str, Any]) -> dict[str, tuple[float | None, float | None]]:
    """Every number of a JSON Schema, by its property name: (minimum, maximum)."""
    found: dict[str, tuple[float | None, float | None]] = {}

    def walk(node: Any, name: str) -> None:
        if isinstance(node, dict):
            if node.get("type") in ("number", "integer") and name not in TEXT_NUMBERS:
                low = node.get("minimum", node.get("exclusiveMinimum"))
                found[name] = (low, node.get("maximum", node.get("exclusiveMaximum")))
            for key, value in node.items():
                if key == "properties":
                    for prop, sub in value.items():
                        walk(sub, prop)
                elif key not in ("$defs",):
                    walk(value, name)
            for sub in node.get("$defs", {}).values():
                walk(sub, "")
        elif isinstance(node, list):
            for value in node:
                walk(value, name)

    walk(schema, "")
    return found


def documented(doc: str) -> dict[str, tuple[float, float]]:
    """The `| field | from | to | units |` rows of a doc's Ranges table, by last field name."""
    rows = re.findall(r"^\| `([^`]+)`[^|]*\| ([0-9.e]+) \| ([0-9.e]+) \|", doc, re.MULTILINE)
    return {re.split(r"[.\]]", name)[-1]: (float(lo), float(hi)) for name, lo, hi in rows}


def test_every_number_of_job_yaml_has_a_range_in_route_schema_and_the_docs() -> None:
    fields = numeric_fields(job_file_schema())
    doc = documented((REPO / "docs" / "job-spec.md").read_text(encoding="utf-8"))

    assert "copy_gbps" in fields and "duration_hours" in fields
    for name, (low, high) in fields.items():
        assert low is not None and high is not None, f"job.yaml {name}: no range in the schema"
        assert doc.get(name) == (low, high), f"docs/job-spec.md Ranges: {name} {doc.get(name)}"


def test_every_number_of_spotroute_yaml_has_a_range_in_the_model_and_the_docs() -> None:
    fields = numeric_fields(OrgConfig.model_json_schema())
    doc = documented((REPO / "docs" / "org-config.md").read_text(encoding="utf-8"))

    assert "max_job_cost" in fields and "time_scale" in fields
    for name, (low, high) in fields.items():
        assert low is not None and high is not None, f"spotroute.yaml {name}: no range"
        assert doc.get(name) == (low, high), f"docs/org-config.md Ranges: {name} {doc.get(name)}"


# --- whatever number a job holds: a job whose costs are finite, or one line ----------------------

JOB_NUMBERS = [
    ("resources", "min_vcpus"), ("resources", "min_memory_gb"), ("max_price_per_hour",),
    ("duration_hours",), ("node_count",), ("checkpoint", "interval"),
    ("checkpoint", "restore_overhead"), ("checkpoint", "save_time"), ("data", "size_gb"),
    ("data", "passes"), ("data", "copy_gbps"), ("run", "image_size_gb"),
    ("migration", "min_savings_pct"), ("migration", "cooldown"), ("migration", "spot_wait"),
    ("migration", "nodes_timeout"), ("migration", "restore_timeout"),
]  # fmt: skip
EDGES = [1.0e-320, 5e-324, -0.0, 0.0, 1e-9, 0.0009, 0.001, 0.01, 1.0, 1e4, 10_000.000001,
         65_536.0, 87_600.0, 1e9, 315_360_000.0, 1e300, 1.7e308, math.inf, -math.inf, math.nan,
         10**30]  # fmt: skip
numbers = st.sampled_from(EDGES) | st.floats(allow_subnormal=True) | st.integers(-(10**20), 10**20)


def finite_everywhere(value: Any, where: str = "") -> None:
    if isinstance(value, float):
        assert math.isfinite(value), f"{where} = {value}"
    elif isinstance(value, dict):
        for key, item in value.items():
            finite_everywhere(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            finite_everywhere(item, f"{where}[{i}]")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ranges")


@pytest.mark.parametrize("where", JOB_NUMBERS, ids=[".".join(w) for w in JOB_NUMBERS])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(value=numbers)
@example(value=1.0e-320)  # the issue's denormal: copy_gbps gave inf staging hours
@example(value=5e-324)
@example(value=1e300)
@example(value=1.7e308)  # passes: egress of inf dollars
def test_any_number_in_a_job_gives_finite_costs_or_one_line(
    scratch: Path, where: tuple[str, ...], value: float
) -> None:
    data = copy.deepcopy(EXAMPLE)
    data["data"]["access"] = "auto"  # both ways priced: stream and copy (staging)
    data["checkpoint"]["save_time"] = "45s"
    node = data
    for key in where[:-1]:
        node = node.setdefault(key, {})
    node[where[-1]] = value
    job = scratch / "job.yaml"
    # PyYAML writes 1.0e-320, .nan and .inf, which YAML reads back as floats (1e-320 is text)
    job.write_text(yaml.safe_dump(data), encoding="utf-8")
    try:
        report = plan_job(job, project=None, now=NOW)
    except BadInput as e:
        assert len(e.message.splitlines()) == 1 and " — " in e.message, e.message
        assert ".".join(where).split(".")[-1] in e.message, e.message
        return
    out = render.plan_json(report, explain=True, top=3)
    finite_everywhere(out)
    dumps(out)  # the one JSON writer refuses NaN and infinities


def test_the_denormal_copy_rate_of_the_issue_is_one_line_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    isolate(monkeypatch, tmp_path)
    text = (REPO / "examples" / "llm-finetune.yaml").read_text(encoding="utf-8")
    job = tmp_path / "job.yaml"
    job.write_text(text.replace("# copy_gbps: 1 ", "copy_gbps: 1.0e-320 "), encoding="utf-8")

    for args in (("plan", job), ("plan", job, "--json")):
        run = route(monkeypatch, capsys, *args)
        assert run.code == 2, (run.out, run.err)
        assert run.err_lines == [run.err_lines[0]] and "data.copy_gbps: must be" in run.err, run.err
        assert "nan" not in run.out and "inf" not in run.out.replace("info", "")


# --- spotroute.yaml ----------------------------------------------------------------------------

ORG_NUMBERS: list[tuple[str, dict[str, Any]]] = [
    ("budgets.max_price_per_hour", {"budgets": {"max_price_per_hour": None}}),
    ("budgets.max_job_cost", {"budgets": {"max_job_cost": None}}),
    ("max_quote_age_s", {"max_quote_age_s": None}),
    ("reservations[0].price_per_hour", {"reservations": [{"cloud": "aws", "region": "us-east-1",
        "instance_type": "p4de.24xlarge", "count": 1, "price_per_hour": None}]}),
    ("reservations[0].count", {"reservations": [{"cloud": "aws", "region": "us-east-1",
        "instance_type": "p4de.24xlarge", "count": None, "price_per_hour": 1.0}]}),
    ("local_market.time_scale", {"local_market": {"time_scale": None}}),
    ("startup.budget_factor", {"startup": {"budget_factor": None}}),
    ("startup.nodes_timeout", {"startup": {"nodes_timeout": None}}),
]  # fmt: skip


def _with(template: Any, value: float) -> Any:
    if isinstance(template, dict):
        return {k: value if v is None else _with(v, value) for k, v in template.items()}
    if isinstance(template, list):
        return [_with(v, value) for v in template]
    return template


POSITIVE_FLOORS = ("budgets", "max_quote_age_s", "local_market", "startup", "reservations[0].count")


@pytest.mark.parametrize(("field", "template"), ORG_NUMBERS, ids=[f for f, _ in ORG_NUMBERS])
@pytest.mark.parametrize("value", [1.0e-320, 1e300, math.inf, math.nan, -1.0, 10**30])
def test_an_insane_number_in_spotroute_yaml_is_one_line_naming_it(
    field: str, template: dict[str, Any], value: float
) -> None:
    if value == 1.0e-320 and not field.startswith(POSITIVE_FLOORS):
        assert org_config_from_data(_with(template, value))  # a price of ~0: in range [0, …]
        return
    with pytest.raises(BadInput) as err:
        org_config_from_data(_with(template, value))

    assert err.value.message.startswith(f"spotroute.yaml: {field}: "), err.value.message
    assert len(err.value.message.splitlines()) == 1


# --- a workload --------------------------------------------------------------------------------

WORKLOAD = yaml.safe_load((REPO / "examples" / "backtest-30d.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("path", "field"),
    [(("days",), "days"), (("jobs", "generate", "gpu_hours_per_day"), "gpu_hours_per_day"),
     (("jobs", "generate", "mix", 0, "median_hours"), "median_hours"),
     (("jobs", "generate", "mix", 0, "weight"), "weight"),
     (("market", "noise"), "noise"), (("market", "zone_spread"), "zone_spread"),
     (("market", "shapes", 0, "offers", 0, "on_demand"), "on_demand"),
     (("market", "seed"), "seed"), (("market", "shapes", 0, "offers", 0, "zones"), "zones"),
     (("step",), "step")],
    ids=lambda p: p if isinstance(p, str) else "",
)  # fmt: skip
@pytest.mark.parametrize("value", [math.nan, math.inf, 1e300, 1.0e-320, 10**30, -1])
def test_an_insane_number_in_a_workload_is_one_line_and_never_a_runaway_replay(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    path: tuple[str | int, ...],
    field: str,
    value: float,
) -> None:
    isolate(monkeypatch, tmp_path)
    data = copy.deepcopy(WORKLOAD)
    node: Any = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    workload = tmp_path / "w.yaml"
    workload.write_text(yaml.safe_dump(data), encoding="utf-8")

    run = route(monkeypatch, capsys, "backtest", workload, "--json")

    if run.code == 0:  # a tiny but positive value that is in range (a seed of 0 is one)
        finite_everywhere(run.json())
        return
    assert run.code == 2, (run.code, run.err[-500:])
    assert len(run.err_lines) == 1 and field in run.err_lines[0], run.err_lines
