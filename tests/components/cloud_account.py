"""A mock cloud account that knows the provider's rules (components/provider_rules/<cloud>.toml).

The placement program runs under the harness's Pulumi mocks as usual; the account admits every
resource it registers the way the real account would, or refuses it with the provider's error:

- names: each rule's length and characters, the autonamed and prefixed names Pulumi and the
  providers generate (the logical name or prefix plus unique characters), and uniqueness in the
  rule's scope across every stack the account holds at that moment;
- default quotas of a fresh account (what is already in use, e.g. the default VPC, counts);
- size limits (user data, metadata, custom data), labels/tags and GCP network tags.

    account = CloudAccount("gcp")
    account.up("llm", config)        # the job's first stack
    account.up("llm.2", moved)       # a move's new stack while the old one lives
    account.destroy("llm")           # resources kept on destroy (retain_on_delete) stay

A refusal raises ProviderRefusal (its text is the provider's message, as the engine would show
it), and the stack keeps what it had before. Stacks of different accounts that share a `world`
dict share the global names (S3 buckets, Cloud Storage buckets, storage accounts, Key Vaults).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness import CallAnswer, CapturedStack, StateFiller, run_program

from components.provider_rules import NameRule, ProviderRules, Quota, rules_for


class ProviderRefusal(Exception):
    """The mock account refused a resource as the real provider would; str() is its message."""


@dataclass(frozen=True)
class Held:
    """A physical resource the account holds: which stack made it, its type and logical name,
    the scoped names it takes and the quota scopes it counts in."""

    stack: str
    type: str
    logical: str
    names: tuple[tuple[Any, ...], ...]
    quota_keys: tuple[tuple[str, tuple[str, ...]], ...]
    physical: str  # its name, for messages


@dataclass
class CloudAccount:
    """One AWS account, GCP project or Azure subscription, fresh: default quotas, nothing held
    but what a new account has. `quotas` raises (or lowers) a quota by name."""

    cloud: str
    account_id: str = "acct-1"
    quotas: Mapping[str, int] = field(default_factory=dict)
    world: dict[tuple[Any, ...], str] = field(default_factory=dict)  # global name → holder
    held: dict[str, list[Held]] = field(default_factory=dict)  # stack → what it holds

    @property
    def rules(self) -> ProviderRules:
        return rules_for(self.cloud)

    def stacks(self) -> list[str]:
        return [stack for stack, held in self.held.items() if held]

    def holding(self) -> list[Held]:
        return [h for held in self.held.values() for h in held]

    # --- what Pulumi does to the account ----------------------------------------------------

    def up(
        self,
        stack: str,
        config: Mapping[str, object],
        *,
        calls: Mapping[str, CallAnswer] | None = None,
        states: Mapping[str, StateFiller] | None = None,
    ) -> CapturedStack:
        """`pulumi up` of `stack` with this config: what the stack held is replaced by what the
        program registers now; on a refusal the stack keeps what it had."""
        before = self.held.pop(stack, [])
        for held in before:
            self._release(held)
        admitted: list[Held] = []
        place = (str(config.get("region", "")), str(config.get("zone", "")))
        try:
            captured = run_program(
                config,
                calls=calls,
                states=states,
                stack=stack,
                admit=lambda type_, name, inputs: self._admit(
                    stack, place, type_, name, inputs, admitted
                ),
            )
        except BaseException:
            self.held[stack] = before
            self._claim_global(before)
            raise
        kept = {r.name for r in captured.resources if r.retain_on_delete}
        self.held[stack] = [
            Held(**{**h.__dict__, "stack": f"{stack} (kept)"}) if h.logical in kept else h
            for h in admitted
        ]
        self._claim_global(self.held[stack])
        return captured

    def destroy(self, stack: str) -> None:
        """`pulumi destroy`: everything of the stack goes but what it retains on delete."""
        for held in self.held.pop(stack, []):
            if held.stack == stack:
                self._release(held)
            else:
                self.held.setdefault(held.stack, []).append(held)

    # --- admission --------------------------------------------------------------------------

    def _admit(
        self,
        stack: str,
        place: tuple[str, str],
        type_: str,
        logical: str,
        inputs: dict[str, Any],
        admitted: list[Held],
    ) -> dict[str, Any]:
        rules = self.rules
        inputs = dict(inputs)
        names: list[tuple[Any, ...]] = []
        physical = logical
        for rule in rules.names_of(type_):
            name = self._physical_name(stack, rule, logical, inputs)
            if rule.property not in inputs:
                inputs[rule.property] = name  # what the provider reports back
            physical = physical if names else name
            key = (type_, rule.property, self._scope(rule.scope, place, inputs), _fold(rule, name))
            if self._holder(key) is not None or any(key in h.names for h in admitted):
                raise ProviderRefusal(rules.conflict.format(type=type_, name=name))
            names.append(key)
        quota_keys = []
        for quota in rules.quotas:
            if type_ not in quota.types:
                continue
            scope = self._scope(quota.scope, place, inputs)
            used = quota.in_use + sum(
                (quota.name, scope) in h.quota_keys for h in [*self.holding(), *admitted]
            )
            if used + 1 > self.limit(quota):
                raise ProviderRefusal(quota.message)
            quota_keys.append((quota.name, scope))
        self._check_sizes(type_, inputs)
        self._check_labels(type_, inputs)
        admitted.append(Held(stack, type_, logical, tuple(names), tuple(quota_keys), physical))
        return inputs

    def limit(self, quota: Quota) -> int:
        return self.quotas.get(quota.name, quota.limit)

    def _physical_name(
        self, stack: str, rule: NameRule, logical: str, inputs: Mapping[str, Any]
    ) -> str:
        """The name the provider gives: explicit, a prefix plus unique characters, or autonamed
        (the logical name plus Pulumi's random suffix); ProviderRefusal when it breaks the rule."""
        unique = hashlib.sha256(f"{self.account_id}/{stack}/{logical}".encode()).hexdigest()
        explicit = inputs.get(rule.property)
        prefix = inputs.get(rule.prefix_property) if rule.prefix_property else None
        if isinstance(explicit, str):
            name, what = explicit, "name"
        elif isinstance(prefix, str):
            if len(prefix) > rule.prefix_max:
                raise ProviderRefusal(
                    f"{rule.type}: {rule.prefix_property} {prefix!r} is {len(prefix)} characters,"
                    f" at most {rule.prefix_max} ({rule.source})"
                )
            name, what = (prefix + unique)[: rule.max], rule.prefix_property
        else:
            suffix = self.rules.autoname_suffix
            name, what = f"{logical}-{unique[: suffix - 1]}", "autonamed name"
        problem = rule.problem(name)
        if problem is not None:
            raise ProviderRefusal(f"{rule.type}: {what} {name!r}: {problem} ({rule.source})")
        return name

    def _scope(
        self, words: tuple[str, ...], place: tuple[str, str], inputs: Mapping[str, Any]
    ) -> tuple[str, ...]:
        values = []
        for word in words:
            if word == "global":
                values.append("*")
            elif word == "account":
                values.append(self.account_id)
            elif word == "region":
                values.append(str(inputs.get("region") or inputs.get("location") or place[0]))
            elif word == "zone":
                values.append(str(inputs.get("zone") or inputs.get("availabilityZone") or place[1]))
            else:
                values.append(str(inputs.get(word, "")))
        return tuple(values)

    def _holder(self, key: tuple[Any, ...]) -> str | None:
        if "*" in key[2]:
            return self.world.get(key)
        return next((h.stack for h in self.holding() if key in h.names), None)

    def _claim_global(self, admitted: list[Held]) -> None:
        for held in admitted:
            for key in held.names:
                if "*" in key[2]:
                    self.world[key] = held.stack

    def _release(self, held: Held) -> None:
        for key in held.names:
            if self.world.get(key) == held.stack:
                del self.world[key]

    def _check_sizes(self, type_: str, inputs: Mapping[str, Any]) -> None:
        for limit in self.rules.sizes_of(type_):
            value: Any = inputs
            for part in limit.property.split("."):
                value = value.get(part) if isinstance(value, Mapping) else None
            if value is None:
                continue
            size = limit.size_of(value)
            if size > limit.limit_bytes:
                raise ProviderRefusal(
                    f"{type_}: {limit.what} is {size} bytes, at most {limit.limit_bytes}"
                    f" ({limit.source})"
                )

    def _check_labels(self, type_: str, inputs: Mapping[str, Any]) -> None:
        rules = self.rules
        for prop in rules.labels.properties:
            labels = inputs.get(prop)
            if isinstance(labels, Mapping):
                problems = rules.labels.problems(labels)
                if problems:
                    raise ProviderRefusal(f"{type_}: {prop}: {problems[0]} ({rules.labels.source})")
        tags = rules.network_tags
        if tags and tags.get("type") == type_:
            import re

            values = inputs.get(str(tags["property"])) or []
            bad = [t for t in values if not re.fullmatch(str(tags["pattern"]), str(t))]
            if len(values) > int(tags["max_count"]) or bad:
                raise ProviderRefusal(f"{type_}: network tags {values!r} ({tags['source']})")


def _fold(rule: NameRule, name: str) -> str:
    return name.lower() if rule.case_insensitive else name
