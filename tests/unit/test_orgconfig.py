"""spotroute.yaml: defaults, the documented example, one-line errors, no secrets."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from router.config.org_file import load_org_config, parse_org_config
from router.config.project import Project
from router.core.errors import BadInput
from router.core.org import DEFAULT_MAX_QUOTE_AGE_S, OrgConfig

DOC = Path(__file__).resolve().parents[2] / "docs" / "org-config.md"


def documented_example() -> str:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert blocks, "docs/org-config.md has no yaml example"
    return str(blocks[0])


def bad(text: str) -> str:
    with pytest.raises(BadInput) as caught:
        parse_org_config(text)
    assert caught.value.exit_code == 2
    assert "\n" not in caught.value.message
    return caught.value.message


def test_no_path_means_the_defaults() -> None:
    org = load_org_config(None)
    assert org == OrgConfig()
    assert org.clouds == ("aws", "gcp", "azure", "local")
    assert org.max_quote_age_s == DEFAULT_MAX_QUOTE_AGE_S == 86_400


def test_missing_file_means_the_defaults(tmp_path: Path) -> None:
    assert load_org_config(tmp_path / "spotroute.yaml") == OrgConfig()


def test_empty_file_means_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "spotroute.yaml"
    path.write_text("# nothing configured yet\n", encoding="utf-8")
    assert load_org_config(path) == OrgConfig()


def test_org_config_lives_next_to_pulumi_yaml(tmp_path: Path) -> None:
    assert Project(tmp_path).org_config_path == tmp_path / "spotroute.yaml"


def test_documented_example_loads(tmp_path: Path) -> None:
    path = tmp_path / "spotroute.yaml"
    path.write_text(documented_example(), encoding="utf-8")

    org = load_org_config(path)

    assert org.clouds == ("aws", "gcp", "azure")
    assert org.regions.deny == ("us-gov-*", "gcp:europe-west3")
    assert [r.marginal_cost_per_hour for r in org.reservations] == [0.0, 4.10]
    assert org.budgets.max_job_cost == 5000
    assert org.max_quote_age_s == 12 * 3600
    assert org.credentials["aws_profile"] == "training"


def test_discount_percent_out_of_range_names_the_field() -> None:
    message = bad("discounts:\n  - cloud: aws\n    percent: 120\n")
    assert message.startswith("spotroute.yaml: discounts[0].percent: must be between 0 and 100 — ")


def test_secret_looking_credential_is_refused_without_echoing_it() -> None:
    message = bad("credentials:\n  aws_secret_access_key: wJalrXUtnFEMI/K7MDENG\n")
    assert message.startswith("spotroute.yaml: credentials: 'aws_secret_access_key' looks like")
    assert "wJalrXUtnFEMI" not in message


@pytest.mark.parametrize("key", ["db_password", "AZURE_CLIENT_SECRET", "api_key", "gh_token"])
def test_every_secret_like_key_is_refused(key: str) -> None:
    assert "looks like a secret" in bad(f"credentials:\n  {key}: x\n")


def test_backend_url_with_a_password_is_refused() -> None:
    message = bad("backend_url: postgres://ops:hunter2@db.internal/pulumi\n")
    assert message.startswith("spotroute.yaml: backend_url: contains a password")
    assert "hunter2" not in message


def test_unknown_key_is_an_error_not_ignored() -> None:
    message = bad("budgets:\n  max_job_cots: 10\n")
    assert message.startswith("spotroute.yaml: budgets.max_job_cots: unknown key")


def test_unknown_cloud_lists_the_choices() -> None:
    assert bad("clouds: [aws, oci]\n") == (
        "spotroute.yaml: clouds[1]: Input should be 'aws', 'gcp', 'azure' or 'local'"
    )


def test_invalid_yaml_names_the_line() -> None:
    assert bad("clouds: [aws\nregions: {}\n").startswith("spotroute.yaml: not valid YAML at line")


def test_top_level_must_be_a_mapping() -> None:
    assert bad("- aws\n- gcp\n").startswith("spotroute.yaml: must be a mapping of settings")


def test_several_problems_are_counted_on_the_one_line() -> None:
    assert bad("budgets: {max_job_cost: -1, max_price_per_hour: 0}\n").endswith("(and 1 more)")


def test_error_names_the_file_it_read(tmp_path: Path) -> None:
    path = tmp_path / "spotroute.yaml"
    path.write_text("max_quote_age_s: soon\n", encoding="utf-8")
    with pytest.raises(BadInput, match=r"^spotroute.yaml: max_quote_age_s: 'soon' is not a dur"):
        load_org_config(path)


def test_largest_matching_discount_applies_and_discounts_do_not_stack() -> None:
    org = parse_org_config(
        "discounts:\n"
        "  - {cloud: aws, percent: 5}\n"
        "  - {cloud: aws, family: 'p4*', percent: 12}\n"
        "  - {cloud: aws, family: 'p4*', market: on-demand, percent: 30}\n"
    )
    spot = org.discount_for("aws", "p4de.24xlarge", "spot")
    on_demand = org.discount_for("aws", "p4de.24xlarge", "on-demand")
    assert spot is not None and spot.percent == 12
    assert on_demand is not None and on_demand.percent == 30
    assert org.discount_for("gcp", "a2-ultragpu-8g", "spot") is None


def test_azure_storage_accounts_need_resource_ids() -> None:
    from router.config.org_file import parse_org_config
    from router.core.errors import BadInput

    good = parse_org_config(
        "azure_storage_accounts:\n  acmeckpt: /subscriptions/s/resourceGroups/g/providers/"
        "Microsoft.Storage/storageAccounts/acmeckpt\n"
    )
    assert set(good.azure_storage_accounts) == {"acmeckpt"}
    with pytest.raises(BadInput, match="azure_storage_accounts"):
        parse_org_config("azure_storage_accounts:\n  acmeckpt: acmeckpt\n")
