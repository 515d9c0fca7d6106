"""The providers' own rules as data: components/provider_rules/<cloud>.toml, one file per cloud,
every row citing its page (names and their uniqueness scope, default quotas, size limits, labels,
each image's shell), and bash.toml (the bash features newer than some image's bash).

Pure lookups over package data. The components use the size limits (a start-up script that the
cloud would refuse fails before anything is registered: `check_size`); the component tests'
mock clouds (tests/components/cloud_account.py) enforce every rule across the stacks alive at
one moment. docs/components.md, "Provider rules", says which rules are checked where.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

RULE_CLOUDS = ("aws", "gcp", "azure")


@dataclass(frozen=True, slots=True)
class NameRule:
    """How one resource type's physical name (input `property`) must look, and where it must be
    unique: `scope` words are "account", "global", "region" or an input property's name."""

    type: str
    property: str
    max: int
    pattern: str
    scope: tuple[str, ...]
    source: str
    min: int = 1
    prefix_property: str = ""  # the provider appends unique characters to this input's value
    prefix_max: int = 0
    case_insensitive: bool = False

    def problem(self, name: str) -> str | None:
        """Why the cloud refuses `name` (length, characters), or None."""
        if not self.min <= len(name) <= self.max:
            return f"{len(name)} characters, {self.min}-{self.max} allowed"
        if not re.fullmatch(self.pattern, name):
            return f"does not match {self.pattern}"
        return None


@dataclass(frozen=True, slots=True)
class Quota:
    """A default quota of a fresh account: at most `limit` of `types` per `scope`, `in_use` of
    them already taken (a default VPC, a default network); `message` is the provider's refusal."""

    name: str
    types: tuple[str, ...]
    scope: tuple[str, ...]
    limit: int
    in_use: int
    message: str
    source: str


@dataclass(frozen=True, slots=True)
class SizeLimit:
    """At most `limit_bytes` in input `property` (dotted path) of `type`, measured after decoding
    `encoding` ("" or "base64"); `what` names the field as the provider's docs do."""

    type: str
    property: str
    limit_bytes: int
    what: str
    source: str
    encoding: str = ""

    def size_of(self, value: Any) -> int:
        """Bytes the provider counts for `value` (a string, or a map: keys and values)."""
        if isinstance(value, Mapping):
            return sum(len(str(k).encode()) + len(str(v).encode()) for k, v in value.items())
        text = str(value)
        if self.encoding == "base64":
            return len(base64.b64decode(text))
        return len(text.encode())


@dataclass(frozen=True, slots=True)
class LabelRule:
    """Labels (GCP) or tags (AWS, Azure): how many a resource may carry and their shapes."""

    properties: tuple[str, ...]
    max_count: int
    key_pattern: str
    value_pattern: str
    source: str

    def problems(self, labels: Mapping[str, Any]) -> list[str]:
        found = []
        if len(labels) > self.max_count:
            found.append(f"{len(labels)} labels, at most {self.max_count}")
        for key, value in labels.items():
            if not re.fullmatch(self.key_pattern, str(key)):
                found.append(f"key {key!r} does not match {self.key_pattern}")
            if not re.fullmatch(self.value_pattern, str(value)):
                found.append(f"value {value!r} of {key!r} does not match {self.value_pattern}")
        return found


@dataclass(frozen=True, slots=True)
class Image:
    """A node image (`key` as the program names it) and the bash and python3 it ships."""

    key: str
    name: str
    bash: str
    source: str
    python: str  # /usr/bin/python3's release: the start-up script's programs run on it
    python_source: str


@dataclass(frozen=True, slots=True)
class ProviderRules:
    """One cloud's rules (components/provider_rules/<cloud>.toml)."""

    cloud: str
    account: str  # what the cloud calls an account: account, project, subscription
    autoname_suffix: int  # characters Pulumi autonaming appends to a logical name
    conflict: str  # the provider's refusal of a taken name ({type}, {name})
    names: tuple[NameRule, ...]
    quotas: tuple[Quota, ...]
    sizes: tuple[SizeLimit, ...]
    labels: LabelRule
    images: tuple[Image, ...]
    network_tags: Mapping[str, Any]

    def names_of(self, type_: str) -> list[NameRule]:
        return [rule for rule in self.names if rule.type == type_]

    def sizes_of(self, type_: str) -> list[SizeLimit]:
        return [rule for rule in self.sizes if rule.type == type_]

    def image(self, key: str) -> Image:
        """The image with this key; KeyError naming the file when it has no row."""
        for image in self.images:
            if image.key == key:
                return image
        raise KeyError(f"components/provider_rules/{self.cloud}.toml has no image {key!r}")


@dataclass(frozen=True, slots=True)
class BashFeature:
    """A bash feature first in release `since`; `pattern` finds it in a script's text."""

    name: str
    since: str
    pattern: str
    unset: tuple[str, ...] = ()


def _read(name: str) -> dict[str, Any]:
    text = resources.files("components").joinpath("provider_rules", name).read_text()
    return tomllib.loads(text)


def _row(data: Mapping[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    """A TOML table's keys that are `fields`, lists as tuples (the dataclasses are frozen)."""
    wanted = set(fields)
    return {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in wanted}


@functools.cache
def rules_for(cloud: str) -> ProviderRules:
    """The rules of `cloud` (aws, gcp, azure); KeyError for a cloud without a rules file."""
    if cloud not in RULE_CLOUDS:
        raise KeyError(f"no provider rules for {cloud!r} — one of {', '.join(RULE_CLOUDS)}")
    data = _read(f"{cloud}.toml")

    def rows(key: str, kind: Any) -> tuple[Any, ...]:
        fields = dataclasses.fields(kind)
        return tuple(kind(**_row(row, (f.name for f in fields))) for row in data.get(key, []))

    return ProviderRules(
        cloud=data["cloud"],
        account=data["account"],
        autoname_suffix=int(data["autoname_suffix"]),
        conflict=data["conflict"],
        names=rows("name", NameRule),
        quotas=rows("quota", Quota),
        sizes=rows("size", SizeLimit),
        labels=LabelRule(**_row(data["labels"], LabelRule.__dataclass_fields__)),
        images=rows("image", Image),
        network_tags=dict(data.get("network_tags", {})),
    )


@functools.cache
def bash_features() -> tuple[BashFeature, ...]:
    """Bash features newer than some node image's bash (bash.toml), oldest release first."""
    fields = BashFeature.__dataclass_fields__
    features = [BashFeature(**_row(row, fields)) for row in _read("bash.toml")["feature"]]
    return tuple(sorted(features, key=lambda f: version(f.since)))


def version(text: str) -> tuple[int, ...]:
    """`"4.2"` → (4, 2), for comparing bash releases."""
    return tuple(int(part) for part in text.split("."))


def features_missing_from(bash: str, script: str) -> list[BashFeature]:
    """The features `script` uses that a bash of release `bash` does not have."""
    return [
        feature
        for feature in bash_features()
        if version(bash) < version(feature.since) and re.search(feature.pattern, script)
    ]


class ScriptTooLarge(ValueError):
    """A rendered start-up script the cloud would refuse for its size; names the job's field."""


def check_size(
    cloud: str, type_: str, property_: str, script: str, fields: Mapping[str, int]
) -> None:
    """ScriptTooLarge when `script` exceeds the cloud's limit on `type_`'s `property_` (bytes of
    the script itself); the message names the largest of `fields` (job field → bytes it adds)."""
    for limit in rules_for(cloud).sizes_of(type_):
        if limit.property != property_:
            continue
        size = len(script.encode())
        if size <= limit.limit_bytes:
            continue
        field, added = max(fields.items(), key=lambda item: item[1], default=("run", 0))
        raise ScriptTooLarge(
            f"{field}: the start-up script would be {size} bytes ({field} adds {added}); "
            f"{limit.what} allows {limit.limit_bytes} — move large values into a file the job "
            f"reads (in the image or the checkpoint bucket) ({limit.source})"
        )
