"""The stack-config contract: docs/stack-config.md lists exactly its keys, and raw values parse."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from router.contract.stack_config import (
    DEFAULT_BOOT_DISK_GB,
    KEYS,
    StackConfigError,
    key,
    parse,
    parse_value,
    serialise,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "stack-config.md"
ROW = re.compile(r"^\| `spotroute:(?P<name>[A-Za-z]+)` \| (?P<type>.+?) \| .+ \|$")


def test_stack_config_doc_lists_every_contract_key_with_its_type_in_order() -> None:
    rows = [m.group("name", "type") for m in map(ROW.match, DOC.read_text().splitlines()) if m]
    assert rows == [(k.name, k.doc_type) for k in KEYS]


def test_unset_keys_take_their_defaults_and_required_ones_are_reported_missing() -> None:
    assert parse_value(key("bootDiskGb"), None) == DEFAULT_BOOT_DISK_GB
    assert parse_value(key("remoteAccess"), None) is False
    assert parse_value(key("checkpointing"), None) is False
    with pytest.raises(StackConfigError, match=r"^spotroute:gpuCount: missing — the router"):
        parse_value(key("gpuCount"), None)


@pytest.mark.parametrize(
    ("name", "raw", "problem"),
    [
        ("cloud", "ibm", "'ibm' is not valid — use one of aws, gcp, azure, local"),
        ("maxPrice", "true", "True is not a number"),
        ("gpuCount", "65", "65 is out of range — use 1..64"),
        ("nodeCount", "1.5", "1.5 is not a whole number"),
        ("checkpointing", '"yes"', "'yes' is not true or false"),
        ("instanceTypes", '[""]', "[''] is not a list of non-empty strings"),
        ("labels", "[]", "[] is not a map"),
        ("job", "{", "'{' is not valid YAML/JSON data"),
    ],
)
def test_a_bad_raw_value_names_the_key_and_the_problem(name: str, raw: str, problem: str) -> None:
    with pytest.raises(StackConfigError) as failure:
        parse_value(key(name), raw)
    assert failure.value.key == name
    assert failure.value.problem.startswith(problem)


def test_parse_reads_every_program_key_and_skips_the_recorded_ones() -> None:
    raw = {
        "jobName": "train", "cloud": "aws", "region": "us-east-1",
        "instanceTypes": '["p5.48xlarge"]', "market": "on-demand", "maxPrice": "98.3",
        "gpu": "H100-80GB", "gpuCount": "8",
        "job": '{"command": ["python", "train.py"]}',
    }  # fmt: skip
    values = parse(raw.get)
    assert values["instanceTypes"] == ("p5.48xlarge",) and values["maxPrice"] == 98.3
    assert values["nodeCount"] == 1 and values["labels"] == {}
    assert "pricePerHour" not in values and "priceSource" not in values


def test_serialise_refuses_a_missing_or_unknown_key() -> None:
    complete = {k.name: k.default for k in KEYS}
    assert serialise(complete) == complete
    with pytest.raises(ValueError, match=r"missing \['jobName'\], unknown \['maxprice'\]"):
        serialise({**{n: v for n, v in complete.items() if n != "jobName"}, "maxprice": 1})
