"""GPU names: what users may write and what they are told when it is not enough."""

from __future__ import annotations

import pytest

from router.config.datafiles import load_gpus
from router.core.gpus import (
    GpuTableMissing,
    UnknownGpu,
    canonical_gpu,
    gpu_memory_gb,
    gpu_vendor,
    parse_gpu_table,
    use_gpu_table,
)

CANONICAL_GPUS = load_gpus().names


def test_canonical_gpus_are_the_documented_nine_in_order() -> None:
    assert CANONICAL_GPUS == (
        "H100-80GB",
        "A100-80GB",
        "A100-40GB",
        "L40S",
        "L4",
        "A10G",
        "A10",
        "T4",
        "V100",
    )


@pytest.mark.parametrize("name", CANONICAL_GPUS)
def test_every_canonical_name_maps_to_itself_in_any_case(name: str) -> None:
    assert canonical_gpu(name) == name
    assert canonical_gpu(name.lower()) == name


@pytest.mark.parametrize(
    ("typed", "canonical"),
    [
        ("h100", "H100-80GB"),
        ("H100", "H100-80GB"),
        ("A100-80G", "A100-80GB"),
        ("a100_80gb", "A100-80GB"),
        ("A100 80GB", "A100-80GB"),
        ("  t4 ", "T4"),
        ("nvidia-tesla-t4", "T4"),
        ("nvidia-l4", "L4"),
        ("nvidia-tesla-a100", "A100-40GB"),  # GCP's accelerator type for the 40 GB part
        ("nvidia-a100-80gb", "A100-80GB"),
        ("a10g", "A10G"),
        ("a10", "A10"),
    ],
)
def test_aliases_resolve_case_insensitively(typed: str, canonical: str) -> None:
    assert canonical_gpu(typed) == canonical


@pytest.mark.parametrize("typed", ["A100", "a100", "A100-SXM4"])
def test_a100_without_memory_is_ambiguous_and_lists_both_choices(typed: str) -> None:
    with pytest.raises(UnknownGpu) as e:
        canonical_gpu(typed)
    assert str(e.value) == f"{typed!r} is ambiguous — use A100-40GB or A100-80GB"


def test_unknown_gpu_lists_every_canonical_name() -> None:
    with pytest.raises(UnknownGpu) as e:
        canonical_gpu("B200")
    assert str(e.value) == (
        "'B200' is not a known GPU — use one of H100-80GB, A100-80GB, A100-40GB, L40S, L4,"
        " A10G, A10, T4, V100"
    )


def test_near_miss_suggests_the_closest_gpu() -> None:
    with pytest.raises(UnknownGpu, match=r"did you mean L40S\?"):
        canonical_gpu("L40")


def test_unknown_gpu_is_a_value_error_so_callers_can_catch_either() -> None:
    with pytest.raises(ValueError, match="not a known GPU"):
        canonical_gpu("")


@pytest.mark.parametrize(
    ("name", "memory_gb"),
    [
        ("H100-80GB", 80),
        ("A100-80GB", 80),
        ("A100-40GB", 40),
        ("L40S", 48),
        ("L4", 24),
        ("A10G", 24),
        ("A10", 24),
        ("T4", 16),
        ("V100", 16),
        ("h100", 80),
    ],
)
def test_memory_per_gpu_in_gb(name: str, memory_gb: int) -> None:
    assert gpu_memory_gb(name) == memory_gb


def test_memory_of_ambiguous_name_is_refused() -> None:
    with pytest.raises(UnknownGpu, match="ambiguous"):
        gpu_memory_gb("A100")


def test_vendor_is_read_from_the_table() -> None:
    assert {gpu_vendor(name) for name in CANONICAL_GPUS} == {"nvidia"}


def test_table_skips_source_comment_lines() -> None:
    table = parse_gpu_table(
        "# source: test fixture\n# date: 2026-01-01\nname,memory_gb,vendor,aliases\n"
        "X1-8GB,8,acme,x1 x1-8g\n"
    )
    assert [(g.name, g.memory_gb, g.vendor, g.aliases) for g in table.gpus] == [
        ("X1-8GB", 8, "acme", ("x1", "x1-8g"))
    ]


def test_table_refuses_an_alias_naming_two_gpus() -> None:
    with pytest.raises(ValueError, match="names both"):
        parse_gpu_table("name,memory_gb,vendor,aliases\nA-1,1,v,a\nB-1,1,v,a\n")


def test_a_parsed_table_answers_lookups_once_the_edge_hands_it_in() -> None:
    bundled = load_gpus()
    table = parse_gpu_table("name,memory_gb,vendor,aliases\nX1-8GB,8,acme,x1\n")
    with pytest.raises(UnknownGpu):
        canonical_gpu("x1")
    try:
        use_gpu_table(table)
        assert canonical_gpu("X1") == "X1-8GB" and gpu_memory_gb("x1") == 8
    finally:
        use_gpu_table(bundled)
    assert canonical_gpu("h100") == "H100-80GB"


def test_a_lookup_before_the_table_is_loaded_says_which_loader_to_call() -> None:
    import router.core.gpus as gpus

    saved = dict(gpus._TABLE)
    gpus._TABLE.clear()
    try:
        with pytest.raises(GpuTableMissing, match=r"router\.config\.datafiles\.load_gpus\(\)"):
            canonical_gpu("h100")
    finally:
        gpus._TABLE.update(saved)
