"""job.yaml: what users may write, and the one-line errors they get when it is wrong."""

from __future__ import annotations

import socket
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest

from router.config.job_file import load_job, validate_job_file
from router.core.durations import parse_duration_s
from router.core.errors import EXIT_BAD_INPUT, BadInput
from router.core.job.data import Data, cloud_of_url
from router.core.job.model import AcceleratorRequest, Checkpoint, Job, Resources, Run
from router.core.job.problems import parse_job

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

MINIMAL = """\
name: tiny
resources:
  accelerators: T4
duration_hours: 1
run:
  command: [python, train.py]
"""


def write(tmp_path: Path, text: str, name: str = "job.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def job_with(tmp_path: Path, extra: str, base: str = MINIMAL) -> Path:
    """The minimal job plus `extra` top-level YAML (later keys replace earlier sections)."""
    sections = {}
    current = ""
    for line in (textwrap.dedent(base) + textwrap.dedent(extra)).splitlines():
        if line and not line.startswith(" "):
            current = line.split(":", 1)[0]
            sections[current] = [line]
        else:
            sections[current].append(line)
    return write(tmp_path, "\n".join(line for lines in sections.values() for line in lines) + "\n")


def problems(tmp_path: Path, extra: str, base: str = MINIMAL) -> list[str]:
    return validate_job_file(job_with(tmp_path, extra, base))


def only_problem(tmp_path: Path, extra: str, base: str = MINIMAL) -> str:
    found = problems(tmp_path, extra, base)
    assert len(found) == 1, found
    return found[0]


# --- the examples ---------------------------------------------------------------------------


def test_llm_finetune_example_is_an_8x_a100_80gb_spot_job_checkpointed_every_30m() -> None:
    job = load_job(EXAMPLES / "llm-finetune.yaml")
    assert job.name == "llm-finetune"
    assert job.resources.accelerators == (AcceleratorRequest(gpu="A100-80GB", count=8),)
    assert job.market == "spot"
    assert job.duration_hours == 24
    assert job.checkpoint is not None
    assert (job.checkpoint.interval_s, job.checkpoint.restore_overhead_s) == (1800, 600)
    (data,) = job.data
    assert (data.url, data.cloud, data.region, data.size_gb) == (
        "s3://acme-datasets/llm-corpus/",
        "aws",
        "us-east-1",
        2000,
    )
    assert job.resources.clouds == ("aws", "gcp", "azure")
    assert job.max_price_per_hour == 40
    assert (job.migration.min_savings_pct, job.migration.cooldown_s) == (20, 7200)
    assert job.labels == {"team": "ml-platform", "cost-center": "4711"}
    assert job.run.image and job.run.command


def test_llm_finetune_regions_allow_us_and_eu_regions_of_every_cloud() -> None:
    from fnmatch import fnmatchcase

    job = load_job(EXAMPLES / "llm-finetune.yaml")
    regions = job.resources.regions

    def allowed(region: str) -> bool:
        return any(fnmatchcase(region, g) for g in regions.allow) and not any(
            fnmatchcase(region, g) for g in regions.deny
        )

    us_eu = [
        "us-east-1", "us-west-2", "eu-west-1", "eu-central-1",  # AWS
        "us-central1", "us-east4", "europe-west4", "europe-west1",  # GCP
        "eastus", "eastus2", "westus2", "westus3", "southcentralus", "westeurope",  # Azure
        "northeurope", "swedencentral", "uksouth", "francecentral", "germanywestcentral",
    ]  # fmt: skip
    elsewhere = ["ap-northeast-1", "asia-east1", "japaneast", "australiaeast", "us-gov-west-1"]
    assert [r for r in us_eu if not allowed(r)] == []
    assert [r for r in elsewhere if allowed(r)] == []


def test_quickstart_example_is_a_small_local_on_demand_job_without_image() -> None:
    job = load_job(EXAMPLES / "quickstart.yaml")
    assert job.resources.clouds == ("local",)
    assert job.resources.accelerators == (AcceleratorRequest(gpu="T4", count=1),)
    assert job.market == "on-demand"
    assert job.duration_hours == pytest.approx(0.1)
    assert job.checkpoint == Checkpoint(interval_s=60, url="auto")
    assert job.run.image == ""
    assert job.run.command[:2] == ("/bin/sh", "-c")
    assert "$SPOTROUTE_CHECKPOINT_DIR" in job.run.command[2]


def test_bad_job_example_reports_each_mistake_on_its_own_line() -> None:
    path = EXAMPLES / "bad-job.yaml"
    found = validate_job_file(path)
    assert all(line.startswith(f"{path}: ") for line in found)
    text = "\n".join(found)
    assert "resources.accelerators: 'A100' is ambiguous — use A100-40GB or A100-80GB" in text
    assert "migration.cooldown: bad duration '2 hours'" in text
    assert "unknown field 'min_saving_pct' — did you mean 'min_savings_pct'?" in text
    assert "market: spot needs checkpoint.interval" in text
    assert len(found) >= 5


# --- durations ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "seconds"),
    [
        ("15m", 900),
        ("2h", 7200),
        ("90s", 90),
        ("1h30m", 5400),
        ("1d", 86400),
        ("1.5h", 5400),
        ("1h 30m", 5400),
        ("90", 90),
        (90, 90),
        (2.5, 2.5),
    ],
)
def test_checkpoint_interval_accepts_durations_with_units_or_seconds(
    tmp_path: Path, written: object, seconds: float
) -> None:
    job = load_job(job_with(tmp_path, f"checkpoint:\n  interval: {written}\n"))
    assert job.checkpoint is not None
    assert job.checkpoint.interval_s == seconds


def test_restore_overhead_and_cooldown_are_durations_too(tmp_path: Path) -> None:
    job = load_job(
        job_with(
            tmp_path,
            "checkpoint: {interval: 30m, restore_overhead: 10m}\nmigration: {cooldown: 2h}\n",
        )
    )
    assert job.checkpoint is not None
    assert job.checkpoint.restore_overhead_s == 600
    assert job.migration.cooldown_s == 7200


@pytest.mark.parametrize("written", ["2 hours", "30m1h", "h", "-5m", "soon"])
def test_bad_duration_names_the_field_the_user_typed_and_the_formats(
    tmp_path: Path, written: str
) -> None:
    line = only_problem(tmp_path, f"checkpoint:\n  interval: '{written}'\n")
    assert line.startswith(f"{tmp_path / 'job.yaml'}: checkpoint.interval: bad duration")
    assert line.endswith("— write e.g. 30m, 2h, 1h30m, 1d or a number of seconds")


def test_zero_interval_is_refused_showing_what_was_typed(tmp_path: Path) -> None:
    line = only_problem(tmp_path, "checkpoint:\n  interval: 0s\n")
    assert "checkpoint.interval: must be at least 1 s, got '0s' — use 1 s or more" in line


def test_model_field_name_in_yaml_is_unknown_and_points_to_the_yaml_name(tmp_path: Path) -> None:
    line = only_problem(tmp_path, "checkpoint:\n  interval_s: 1800\n")
    assert line.endswith(
        "checkpoint.interval_s: unknown field 'interval_s' — did you mean 'interval'?"
    )


def test_missing_interval_is_reported_by_its_yaml_name(tmp_path: Path) -> None:
    line = only_problem(tmp_path, "checkpoint:\n  url: auto\n")
    assert line.endswith("checkpoint.interval: required field missing — add interval: 30m")


def test_duration_hours_also_accepts_a_duration_with_units(tmp_path: Path) -> None:
    assert load_job(job_with(tmp_path, "duration_hours: 90m\n")).duration_hours == 1.5


def test_parse_duration_rejects_booleans() -> None:
    with pytest.raises(ValueError, match="expected a duration"):
        parse_duration_s(True)


# --- accelerators -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("A100-80GB:8", [("A100-80GB", 8)]),
        ("A100-80GB", [("A100-80GB", 1)]),
        ("h100:4", [("H100-80GB", 4)]),
        ("[A100-80GB:8, H100-80GB:8]", [("A100-80GB", 8), ("H100-80GB", 8)]),
        ("[{gpu: a100_80gb, count: 2}, L4]", [("A100-80GB", 2), ("L4", 1)]),
        ("{gpu: T4, count: 4}", [("T4", 4)]),
    ],
)
def test_accelerators_accept_every_documented_shape(
    tmp_path: Path, written: str, expected: list[tuple[str, int]]
) -> None:
    job = load_job(job_with(tmp_path, f"resources:\n  accelerators: {written}\n"))
    assert [(a.gpu, a.count) for a in job.resources.accelerators] == expected


def test_ambiguous_a100_error_matches_the_documented_line(tmp_path: Path) -> None:
    line = only_problem(tmp_path, "resources:\n  accelerators: A100:8\n")
    assert line == (
        f"{tmp_path / 'job.yaml'}: resources.accelerators: 'A100' is ambiguous"
        " — use A100-40GB or A100-80GB"
    )


def test_accelerator_errors_point_at_the_list_item_the_user_wrote(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        "resources:\n  accelerators: [A100-80GB:8, B200:8, 'T4:x', {gpu: L4, count: 100}]\n",
    )
    assert [line.split(": ", 2)[1] for line in found] == [
        "resources.accelerators[1]",
        "resources.accelerators[2]",
        "resources.accelerators[3].count",
    ]
    assert "'B200' is not a known GPU — use one of H100-80GB" in found[0]
    assert "count: expected a whole number, got 'x'" in found[1]
    assert "must be at most 64, got 100 — use 64 or less" in found[2]


def test_empty_accelerator_list_is_refused(tmp_path: Path) -> None:
    assert "no accelerators listed" in only_problem(tmp_path, "resources:\n  accelerators: []\n")


# --- regions, clouds ------------------------------------------------------------------------


def test_regions_as_plain_list_mean_allow(tmp_path: Path) -> None:
    job = load_job(job_with(tmp_path, "resources:\n  accelerators: T4\n  regions: [us-*]\n"))
    assert (job.resources.regions.allow, job.resources.regions.deny) == (("us-*",), ())


def test_regions_allow_and_deny_accept_lists_or_one_glob(tmp_path: Path) -> None:
    job = load_job(
        job_with(
            tmp_path,
            "resources:\n  accelerators: T4\n  regions: {allow: [us-*, eu*], deny: us-gov-*}\n",
        )
    )
    assert job.resources.regions.allow == ("us-*", "eu*")
    assert job.resources.regions.deny == ("us-gov-*",)


def test_region_typo_in_plain_list_points_at_the_item(tmp_path: Path) -> None:
    line = only_problem(tmp_path, "resources:\n  accelerators: T4\n  regions: [us-*, 5]\n")
    assert ": resources.regions[1]: expected text, got 5" in line


def test_clouds_default_to_the_three_public_clouds(tmp_path: Path) -> None:
    assert load_job(job_with(tmp_path, "")).resources.clouds == ("aws", "gcp", "azure")


def test_cloud_typo_suggests_the_cloud(tmp_path: Path) -> None:
    line = only_problem(tmp_path, "resources:\n  accelerators: T4\n  clouds: [aws, azrue]\n")
    assert line.endswith(
        "resources.clouds[1]: 'azrue' is not one of aws, gcp, azure, local — did you mean 'azure'?"
    )


# --- data -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "cloud"),
    [
        ("s3://bucket/x/", "aws"),
        ("gs://bucket/x/", "gcp"),
        ("az://container/x/", "azure"),
        ("abfs://container@acct.dfs.core.windows.net/x", "azure"),
        ("https://acct.blob.core.windows.net/container/x", "azure"),
        ("file:///srv/data", "local"),
    ],
)
def test_data_cloud_is_inferred_from_the_url(tmp_path: Path, url: str, cloud: str) -> None:
    job = load_job(job_with(tmp_path, f"data: {{url: '{url}', region: r1, size_gb: 10}}\n"))
    assert [d.cloud for d in job.data] == [cloud]


def test_unknown_data_scheme_without_cloud_names_data_url(tmp_path: Path) -> None:
    line = only_problem(tmp_path, "data: {url: 'ftp://host/x', region: r1, size_gb: 1}\n")
    assert ": data.url: cannot tell which cloud 'ftp://host/x' is in" in line
    assert "add cloud: aws|gcp|azure|local next to it" in line


def test_unknown_scheme_with_explicit_cloud_is_accepted(tmp_path: Path) -> None:
    job = load_job(
        job_with(tmp_path, "data: {url: 'ftp://host/x', cloud: aws, region: r1, size_gb: 1}\n")
    )
    assert [d.cloud for d in job.data] == ["aws"]


def test_data_cloud_contradicting_the_url_is_refused(tmp_path: Path) -> None:
    line = only_problem(tmp_path, "data: {url: 'gs://b/x', cloud: aws, region: r1, size_gb: 1}\n")
    assert "cloud is aws but 'gs://b/x' is in gcp" in line


def test_a_single_data_mapping_is_one_data_set_read_once_and_cheapest_way(tmp_path: Path) -> None:
    job = load_job(job_with(tmp_path, "data: {url: 's3://b/x', region: us-east-1, size_gb: 5}\n"))
    (data,) = job.data
    assert (data.access, data.passes, data.replicas) == ("auto", 1.0, ())
    assert (data.copy_gbps, data.start_while_copying) == (1.0, False)


def test_no_data_is_an_empty_tuple(tmp_path: Path) -> None:
    assert load_job(job_with(tmp_path, "")).data == ()
    assert load_job(job_with(tmp_path, "data:\n")).data == ()


def test_several_data_sets_with_passes_access_and_replicas(tmp_path: Path) -> None:
    job = load_job(
        job_with(
            tmp_path,
            """\
            data:
              - url: s3://corpus/tokens/
                region: us-east-1
                size_gb: 2000
                passes: 3
                replicas:
                  - {url: gs://mirror/tokens/, region: us-central1}
              - {url: az://eval/x, region: eastus, size_gb: 50, access: copy, copy_gbps: 5,
                 start_while_copying: true}
            """,
        )
    )
    corpus, evals = job.data
    assert corpus.passes == 3
    assert [(r.url, r.cloud, r.region) for r in corpus.replicas] == [
        ("gs://mirror/tokens/", "gcp", "us-central1")
    ]
    assert [loc.url for loc in corpus.locations] == ["s3://corpus/tokens/", "gs://mirror/tokens/"]
    assert (evals.access, evals.copy_gbps, evals.start_while_copying) == ("copy", 5, True)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            "data: {url: 's3://b/x', region: r, size_gb: 1, access: strem}\n",
            "data.access: 'strem' is not one of auto, stream, copy — did you mean 'stream'?",
        ),
        (
            "data: [{url: 's3://b/x', region: r, size_gb: 1}, {url: 's3://c', region: r,"
            " size_gb: 1, passes: 0}]\n",
            "data[1].passes: must be at least 0.01, got 0 — use 0.01 or more",
        ),
        (
            "data: {url: 's3://b/x', region: r, size_gb: 1, passes: yes}\n",
            "data.passes: expected a number, got true — write a number such as 8",
        ),
        (
            "data: {url: 's3://b/x', region: r, size_gb: 1, replicas: [{url: 'gs://m'}]}\n",
            "data.replicas[0].region: required field missing — add region: us-east-1",
        ),
        (
            "data: {url: 's3://b/x', region: r, size_gb: 1, replicas: {url: 'ftp://m', region: r}}"
            "\n",
            "data.replicas.url: cannot tell which cloud 'ftp://m' is in",
        ),
        (
            "data: {url: 's3://b/x', region: r, size_gb: 1, epochs: 3}\n",
            "data.epochs: unknown field 'epochs' — use one of",
        ),
        (
            "data: {url: 's3://b/x', region: r, size_gb: 1, copy_gbps: 0}\n",
            "data.copy_gbps: must be at least 0.001, got 0",
        ),
    ],
)
def test_data_errors_name_the_field_path(tmp_path: Path, extra: str, expected: str) -> None:
    assert expected in only_problem(tmp_path, extra)


def test_cloud_of_url_returns_none_for_plain_paths() -> None:
    assert cloud_of_url("/srv/data") is None


# --- name -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "llm-finetune", "job-2", "a" * 40])
def test_valid_stack_names_are_accepted(tmp_path: Path, name: str) -> None:
    assert load_job(job_with(tmp_path, f"name: {name}\n")).name == name


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [
        ("Fine_Tune", "fine-tune"),
        ("2nd-run", "job-2nd-run"),
        ("job-", "job"),
        ("a" * 41, "a" * 40),
        ("my job", "my-job"),
    ],
)
def test_invalid_name_says_the_rule_and_suggests_a_valid_one(
    tmp_path: Path, name: str, suggestion: str
) -> None:
    line = only_problem(tmp_path, f"name: '{name}'\n")
    assert f": name: {name!r} is not a valid name — use lowercase letters" in line
    assert line.endswith(f"e.g. {suggestion!r}")


# --- market and checkpoint ------------------------------------------------------------------


def test_spot_without_checkpoint_is_refused_with_the_fix(tmp_path: Path) -> None:
    line = only_problem(tmp_path, "market: spot\n")
    assert line == (
        f"{tmp_path / 'job.yaml'}: market: spot needs checkpoint.interval so the job can resume"
        " after interruption — add checkpoint: {interval: 30m} or use market: on-demand"
    )


def test_spot_with_checkpoint_is_accepted(tmp_path: Path) -> None:
    job = load_job(job_with(tmp_path, "market: spot\ncheckpoint: {interval: 30m}\n"))
    assert job.market == "spot"


def test_auto_market_without_checkpoint_is_allowed(tmp_path: Path) -> None:
    job = load_job(job_with(tmp_path, ""))
    assert (job.market, job.checkpoint) == ("auto", None)


def test_market_typo_suggests_the_market(tmp_path: Path) -> None:
    assert "did you mean 'on-demand'?" in only_problem(tmp_path, "market: ondemand\n")


def test_checkpoint_url_must_be_auto_or_known_storage(tmp_path: Path) -> None:
    line = only_problem(tmp_path, "checkpoint: {interval: 30m, url: /tmp/ckpt}\n")
    assert "checkpoint.url: cannot tell which storage '/tmp/ckpt' is" in line


# --- run, labels, deadline ------------------------------------------------------------------


def test_command_string_is_split_like_a_shell(tmp_path: Path) -> None:
    job = load_job(job_with(tmp_path, "run:\n  command: python train.py --name 'my run'\n"))
    assert job.run.command == ("python", "train.py", "--name", "my run")


def test_command_list_numbers_become_words(tmp_path: Path) -> None:
    job = load_job(job_with(tmp_path, "run:\n  command: [python, train.py, --epochs, 3]\n"))
    assert job.run.command == ("python", "train.py", "--epochs", "3")


def test_command_with_unclosed_quote_says_how_to_fix(tmp_path: Path) -> None:
    line = only_problem(tmp_path, 'run:\n  command: "python \'train.py"\n')
    assert "run.command: cannot split the command" in line
    assert "close the quote or write it as a list" in line


def test_env_numbers_become_strings_and_booleans_must_be_quoted(tmp_path: Path) -> None:
    job = load_job(job_with(tmp_path, "run:\n  command: [x]\n  env: {EPOCHS: 3}\n"))
    assert job.run.env == {"EPOCHS": "3"}
    line = only_problem(tmp_path, "run:\n  command: [x]\n  env: {DEBUG: true}\n")
    assert "run.env.DEBUG:" in line and "quote it: 'true'" in line


def test_label_numbers_become_strings(tmp_path: Path) -> None:
    job = load_job(job_with(tmp_path, "labels: {team: ml, cost-center: 4711}\n"))
    assert job.labels == {"team": "ml", "cost-center": "4711"}


def test_labels_that_gcp_would_reject_are_refused_with_a_suggestion(tmp_path: Path) -> None:
    line = only_problem(tmp_path, "labels: {team: ML Platform}\n")
    assert "labels.team: label value 'ML Platform' is not portable" in line
    assert line.endswith("e.g. 'ml-platform'")


def test_more_labels_than_aws_and_azure_tag_limits_leave_room_for_are_refused(
    tmp_path: Path,
) -> None:
    # 50 tags per resource on AWS and Azure (tagging docs, cited in core/job/model.py);
    # spotroute adds 4, and team when the job has none (components/provider_rules tests show
    # the cloud refusing one more).
    many = ", ".join(f"l{i}: v" for i in range(45))
    assert len(load_job(job_with(tmp_path, f"labels: {{{many}}}\n")).labels) == 45
    assert len(load_job(job_with(tmp_path, f"labels: {{{many}, team: ml}}\n")).labels) == 46
    line = only_problem(tmp_path, f"labels: {{{many}, l45: v}}\n")
    assert "labels: 46 labels, at most 46 with a team label (45 without)" in line


def test_deadline_is_iso_8601_with_timezone(tmp_path: Path) -> None:
    job = load_job(job_with(tmp_path, "deadline: 2026-06-30T18:00:00Z\n"))
    assert job.deadline == datetime(2026, 6, 30, 18, tzinfo=UTC)


def test_deadline_without_timezone_is_refused(tmp_path: Path) -> None:
    assert "has no timezone — add Z (UTC)" in only_problem(
        tmp_path, "deadline: '2026-06-30T18:00:00'\n"
    )


def test_deadline_date_only_asks_for_a_time(tmp_path: Path) -> None:
    assert "2026-06-30 has no time — write e.g. 2026-06-30T18:00:00Z" in only_problem(
        tmp_path, "deadline: 2026-06-30\n"
    )


# --- wrong types, ranges, unknown keys ------------------------------------------------------


def test_unknown_top_level_key_suggests_the_closest_field(tmp_path: Path) -> None:
    assert only_problem(tmp_path, "resource: {}\n").endswith(
        "resource: unknown field 'resource' — did you mean 'resources'?"
    )


def test_unknown_key_without_a_close_match_lists_the_fields(tmp_path: Path) -> None:
    line = only_problem(tmp_path, "migration: {zzz: 1}\n")
    assert line.endswith(
        "migration.zzz: unknown field 'zzz' — use one of min_savings_pct, cooldown,"
        " spot_wait, nodes_timeout, restore_timeout"
    )


def test_boolean_is_not_accepted_as_a_number(tmp_path: Path) -> None:
    assert "expected a number, got true" in only_problem(tmp_path, "node_count: yes\n")


def test_out_of_range_number_says_the_bound(tmp_path: Path) -> None:
    assert only_problem(tmp_path, "migration: {min_savings_pct: 150}\n").endswith(
        "migration.min_savings_pct: must be at most 100, got 150 — use 100 or less"
    )


def test_text_where_a_number_belongs_is_refused(tmp_path: Path) -> None:
    assert "max_price_per_hour: expected a number, got 'cheap'" in only_problem(
        tmp_path, "max_price_per_hour: cheap\n"
    )


def test_infinite_numbers_are_refused(tmp_path: Path) -> None:
    assert "expected a finite number" in only_problem(tmp_path, "duration_hours: .inf\n")


def test_section_given_as_text_asks_for_a_mapping(tmp_path: Path) -> None:
    assert "checkpoint: expected a mapping of fields, got '30m'" in only_problem(
        tmp_path, "checkpoint: 30m\n"
    )


def test_every_missing_required_field_is_reported_with_an_example(tmp_path: Path) -> None:
    found = validate_job_file(write(tmp_path, "name: x\n"))
    assert [line.split(": ", 2)[1:] for line in found] == [
        ["resources", "required field missing — add resources: {accelerators: A100-80GB:8}"],
        ["duration_hours", "required field missing — add duration_hours: 24"],
        ["run", "required field missing — add run: {command: [python, train.py]}"],
    ]


def test_problems_are_listed_in_the_order_of_the_file(tmp_path: Path) -> None:
    found = validate_job_file(
        write(
            tmp_path,
            "run: {command: []}\nname: Bad\nresources: {accelerators: A100}\nduration_hours: 1\n",
        )
    )
    assert [line.split(": ", 2)[1] for line in found] == [
        "run.command",
        "name",
        "resources.accelerators",
    ]


def test_load_job_raises_bad_input_with_the_first_problem_only(tmp_path: Path) -> None:
    path = write(tmp_path, "name: Bad\nresources: {accelerators: A100}\n")
    with pytest.raises(BadInput) as e:
        load_job(path)
    assert e.value.message == validate_job_file(path)[0]
    assert e.value.exit_code == EXIT_BAD_INPUT
    assert "\n" not in e.value.message


# --- the file itself ------------------------------------------------------------------------


def test_missing_file_is_one_line_naming_the_path(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    assert validate_job_file(path) == [
        f"{path}: file not found — check the path and the current directory"
    ]


def test_directory_points_at_the_job_file_inside(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(MINIMAL)
    assert validate_job_file(tmp_path) == [
        f"{tmp_path}: is a directory — pass the job file, e.g. {tmp_path / 'job.yaml'}"
    ]


def test_unreadable_file_is_reported_not_raised(tmp_path: Path) -> None:
    # A socket exists but cannot be opened as a file, whoever runs the test (even root).
    path = tmp_path / "job.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        (line,) = validate_job_file(path)
    assert line == f"{path}: is a socket, not a regular file — pass the job file itself"


def test_non_utf8_file_names_the_line_and_byte(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_bytes(b"name: ok\nrun: caf\xe9\n")
    assert validate_job_file(path) == [
        f"{path}: line 2: not UTF-8 text (byte 0xe9) — save the file as UTF-8"
    ]


def test_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + MINIMAL.encode())
    assert load_job(path).name == "tiny"


def test_yaml_syntax_error_gives_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\nresources:\n  accelerators: [T4\nrun: {}\n")
    (line,) = validate_job_file(path)
    assert line.startswith(f"{path}: line 4, column ")
    assert "YAML error:" in line


def test_duplicate_key_is_refused_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + "name: other\n")
    assert validate_job_file(path) == [
        f"{path}: line 7, column 1: YAML error: duplicate key 'name' — keep only one of them"
    ]


def test_tabs_for_indentation_are_explained(tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\nrun:\n\tcommand: [x]\n")
    assert validate_job_file(path)[0].endswith("indent with spaces, not tabs")


def test_python_tags_are_not_executed(tmp_path: Path) -> None:
    path = write(tmp_path, "name: !!python/object/apply:os.system [echo hacked]\n")
    assert "remove the YAML tag" in validate_job_file(path)[0]


def test_two_documents_in_one_file_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + "---\n" + MINIMAL)
    assert validate_job_file(path)[0].endswith(
        "keep one job per file (remove the second '---' document)"
    )


@pytest.mark.parametrize("text", ["", "# just a comment\n", "---\n"])
def test_empty_file_says_which_fields_a_job_needs(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    assert validate_job_file(path) == [
        f"{path}: the job is empty — it needs at least name, resources, duration_hours and run;"
        " see examples/quickstart.yaml"
    ]


@pytest.mark.parametrize(("text", "kind"), [("- a\n- b\n", "a list"), ("hello\n", "text 'hello'")])
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str, kind: str) -> None:
    path = write(tmp_path, text)
    assert validate_job_file(path) == [
        f"{path}: top level is {kind}, expected a mapping of fields"
        " — start with `name: my-job` (see examples/quickstart.yaml)"
    ]


def test_huge_expansion_through_aliases_is_refused(tmp_path: Path) -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i, name in enumerate("bcdefg"):
        prev = "abcdefg"[i]
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]")
    (line,) = validate_job_file(write(tmp_path, "\n".join(lines) + "\n"))
    assert "too large or too deeply nested" in line


def test_file_larger_than_a_mebibyte_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + "# " + "x" * (1 << 20) + "\n")
    assert validate_job_file(path) == [f"{path}: file is larger than 1 MiB — is this the job file?"]


# --- parse_job on data, and Python construction ---------------------------------------------


def test_parse_job_names_the_source_given() -> None:
    with pytest.raises(BadInput, match=r"^inline: name: required field missing"):
        parse_job(
            {"resources": {"accelerators": "T4"}, "duration_hours": 1, "run": {"command": "x"}},
            "inline",
        )


def test_python_code_builds_models_by_field_name() -> None:
    job = Job(
        name="py",
        resources=Resources(accelerators=(AcceleratorRequest(gpu="a100-80gb", count=8),)),
        duration_hours=2,
        checkpoint=Checkpoint(interval_s=1800),
        run=Run(command=("python", "train.py")),
    )
    assert job.resources.accelerators[0].gpu == "A100-80GB"
    assert job.checkpoint is not None and job.checkpoint.interval_s == 1800


def test_python_code_may_pass_one_data_set_or_several() -> None:
    corpus = Data(url="s3://corpus/x", region="us-east-1", size_gb=10)
    base = {
        "name": "py",
        "resources": Resources(accelerators=(AcceleratorRequest(gpu="T4"),)),
        "duration_hours": 1,
        "run": Run(command=("python",)),
    }
    assert Job(**base, data=corpus).data == (corpus,)
    assert Job(**base, data=(corpus, corpus)).data == (corpus, corpus)
    assert corpus.cloud == "aws"


def test_jobs_are_immutable() -> None:
    job = parse_job(
        {
            "name": "x",
            "resources": {"accelerators": "T4"},
            "duration_hours": 1,
            "run": {"command": "x"},
        },
        "inline",
    )
    with pytest.raises(ValueError, match="frozen"):
        job.name = "y"  # type: ignore[misc]


def test_bootstrap_is_reserved_for_spotrouted_own_stack(tmp_path: Path) -> None:
    from router.config.job_file import validate_job_file

    job = tmp_path / "job.yaml"
    job.write_text(
        "name: bootstrap\nresources: {accelerators: 'T4:1'}\nduration_hours: 1\n"
        "market: on-demand\nrun: {command: [/bin/true]}\n"
    )
    problems = validate_job_file(job)
    assert len(problems) == 1 and "reserved" in problems[0] and "name" in problems[0]
