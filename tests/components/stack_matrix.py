"""The placement program under mocks for every cloud × market × bucket × remote-access cell.

Shared by the provider-facts test and scripts/provider_facts.py (which finds the resource types
to describe by running it). One more GCP cell without a zone builds the regional group.
"""

from __future__ import annotations

from harness import CapturedStack, run_program


def all_stacks() -> list[CapturedStack]:
    """One captured stack per cell of test_policy_pack_over_stacks.MATRIX, plus regional GCP."""
    from test_policy_pack_over_stacks import CLOUDS, MATRIX, placement, stack_config

    regional = {**stack_config("gcp", "spot", "new-bucket", "no-ssh"), "zone": ""}
    return [
        *(placement(*(str(value) for value in cell.values)) for cell in MATRIX),
        run_program(regional, **CLOUDS["gcp"].get("mocks", {})),
    ]
