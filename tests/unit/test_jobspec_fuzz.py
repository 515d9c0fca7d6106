"""Whatever a job file holds, users get a Job or one-line BadInput messages, never a traceback."""

from __future__ import annotations

import copy
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from router.config.job_file import load_job, validate_job_file
from router.core.errors import BadInput
from router.core.job.model import Job
from router.core.job.problems import parse_job

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llm-finetune.yaml"
EXAMPLE_TEXT = EXAMPLE.read_text(encoding="utf-8")
EXAMPLE_DATA: dict[str, Any] = yaml.safe_load(EXAMPLE_TEXT)

KNOWN_KEYS = sorted(
    {
        *("name", "resources", "market", "max_price_per_hour", "duration_hours", "deadline"),
        *("node_count", "checkpoint", "data", "run", "migration", "labels"),
        *("accelerators", "min_vcpus", "min_memory_gb", "clouds", "regions", "allow", "deny"),
        *("gpu", "count", "interval", "restore_overhead", "url", "cloud", "region", "size_gb"),
        *("image", "command", "env", "min_savings_pct", "cooldown", "interval_s"),
    }
)
INTERESTING_TEXT = [
    "spot", "on-demand", "auto", "A100", "A100-80GB:8", "T4:x", "h100", "30m", "1h30m", "-5m",
    "s3://b/x", "ftp://x", "aws", "local", "us-*", "2026-06-30T18:00:00Z", "2026-06-30",
    "", " ", "\n", "\u2028", "'", "{", "nan", "1e400", "é", "x" * 200,
]  # fmt: skip

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(INTERESTING_TEXT)
    | st.text(max_size=20)
    | st.sampled_from(
        [datetime(2026, 6, 30, 18), datetime(2026, 6, 30, tzinfo=UTC), date(2026, 6, 30)]
    )
    | st.binary(max_size=8)
)
keys = st.sampled_from(KNOWN_KEYS) | st.text(max_size=12) | st.integers(-3, 3) | st.none()
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(keys, inner, max_size=5)
    ),
    max_leaves=12,
)


def assert_one_line_problem(message: str, source: str) -> None:
    assert message.startswith(f"{source}: ")
    assert len(message.splitlines()) == 1, message
    assert " — " in message, f"no fix offered: {message}"


def check_parse(data: object) -> None:
    try:
        job = parse_job(data, "job.yaml")
    except BadInput as e:
        assert_one_line_problem(e.message, "job.yaml")
    else:
        assert isinstance(job, Job)


def paths(node: object, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every location in a parsed job: mapping keys and list indices."""
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += paths(value, (*prefix, i))
    return found


EXAMPLE_PATHS = paths(EXAMPLE_DATA)[1:]


@st.composite
def mutated_examples(draw: st.DrawFn) -> object:
    """The valid example with a few places replaced, deleted or given an extra key."""
    data = copy.deepcopy(EXAMPLE_DATA)
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.sampled_from(EXAMPLE_PATHS))
        parent: Any = data
        try:
            for step in where[:-1]:
                parent = parent[step]
            last = where[-1]
            action = draw(st.sampled_from(["replace", "delete", "add"]))
            if action == "replace":
                parent[last] = draw(values)
            elif action == "delete":
                del parent[last]
            elif isinstance(parent, dict):
                parent[draw(keys)] = draw(values)
            elif isinstance(parent, list):
                parent.append(draw(values))
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed or replaced this place
    return data


@st.composite
def mutated_yaml_text(draw: st.DrawFn) -> str:
    """The example's text with characters inserted, deleted or swapped."""
    text = EXAMPLE_TEXT
    for _ in range(draw(st.integers(1, 6))):
        i = draw(st.integers(0, len(text)))
        edit = draw(st.sampled_from(["insert", "delete", "replace"]))
        piece = draw(
            st.sampled_from([":", "-", " ", "\t", "\n", "[", "{", "'", '"', "&a", "*a", "!!", "#"])
            | st.text(max_size=3)
        )
        if edit == "insert":
            text = text[:i] + piece + text[i:]
        elif edit == "delete":
            text = text[:i] + text[i + draw(st.integers(1, 20)) :]
        else:
            text = text[:i] + piece + text[i + len(piece) :]
    return text


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def check_file(path: Path, content: bytes) -> None:
    path.write_bytes(content)
    found = validate_job_file(path)
    for line in found:
        assert_one_line_problem(line, str(path))
    try:
        load_job(path)
    except BadInput as e:
        assert found and e.message == found[0]
    else:
        assert found == []


@settings(max_examples=300, deadline=None)
@given(values)
def test_random_data_gives_a_job_or_one_line_bad_input(data: object) -> None:
    check_parse(data)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(keys, values, max_size=6))
def test_random_mappings_give_a_job_or_one_line_bad_input(data: dict[Any, Any]) -> None:
    check_parse(data)


@settings(max_examples=400, deadline=None)
@given(mutated_examples())
def test_mutated_valid_job_gives_a_job_or_one_line_bad_input(data: object) -> None:
    check_parse(data)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_random_bytes_file_gives_one_line_bad_input(fuzz_dir: Path, content: bytes) -> None:
    check_file(fuzz_dir / "bytes.yaml", content)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_random_text_file_gives_one_line_bad_input(fuzz_dir: Path, text: str) -> None:
    check_file(fuzz_dir / "text.yaml", text.encode("utf-8", "surrogatepass"))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_yaml_text())
def test_mutated_yaml_file_gives_a_job_or_one_line_bad_input(fuzz_dir: Path, text: str) -> None:
    check_file(fuzz_dir / "mutated.yaml", text.encode("utf-8", "surrogatepass"))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_examples())
def test_mutated_job_dumped_as_yaml_gives_a_job_or_one_line_bad_input(
    fuzz_dir: Path, data: object
) -> None:
    try:
        text = yaml.safe_dump(data, allow_unicode=True)
    except yaml.YAMLError:
        text = None  # e.g. tuples, which PyYAML's safe dumper cannot write
    assume(text is not None)
    assert text is not None
    check_file(fuzz_dir / "dumped.yaml", text.encode("utf-8", "surrogatepass"))
