"""The one YAML reader for user files (job.yaml, spotroute.yaml): safe, strict, bounded.

Safe YAML (no Python objects), duplicate keys refused (the later one would silently win), at most
MAX_ALIASES aliases (PyYAML's merge keys make a few aliases cost seconds and gigabytes), and every
way the parser or its constructors can fail — deep nesting, integers of thousands of digits,
out-of-range timestamps — turned into one `YamlProblem` with a position and a fix.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_ALIASES = 100


class YamlProblem(Exception):
    """Why a text is not acceptable YAML: `text` (problem — fix) and `where` (line, column)."""

    def __init__(self, text: str, where: str = "") -> None:
        super().__init__(text)
        self.text = text
        self.where = where


class StrictLoader(yaml.SafeLoader):
    """Safe YAML that refuses duplicate keys and alias bombs."""

    _aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                event = self.peek_event()  # type: ignore[no-untyped-call]
                raise yaml.composer.ComposerError(
                    None, None, f"more than {MAX_ALIASES} aliases", event.start_mark
                )
        return super().compose_node(parent, index)


def _construct_mapping(loader: StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[object] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in seen
            seen.add(key)
        except TypeError:
            continue  # unhashable: the constructor below reports it
        if duplicate:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}"[:120], key_node.start_mark
            )
    loader.flatten_mapping(node)
    return dict(loader.construct_pairs(node, deep=True))


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_yaml(text: str, *, what: str = "file") -> object:
    """The data in `text`; raises YamlProblem naming where and how to fix it."""
    try:
        return yaml.load(text, Loader=StrictLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = str(e.problem or e.context or "invalid YAML")[:200]
        raise YamlProblem(f"YAML error: {problem} — {yaml_fix(problem, what)}", where) from None
    except yaml.YAMLError as e:
        raise YamlProblem(f"YAML error: {str(e)[:200]} — check the {what} is YAML") from None
    except (
        ValueError,
        RecursionError,
        OverflowError,
        TypeError,
        MemoryError,
        AttributeError,  # PyYAML's timestamp constructor on a value its regex does not match
        KeyError,
        IndexError,
    ) as e:
        # e.g. an integer with thousands of digits, a timestamp out of range, nesting deeper
        # than Python's stack
        raise YamlProblem(
            f"cannot read the YAML ({type(e).__name__}) — a {what} holds plain short values"
        ) from None


def yaml_fix(problem: str, what: str = "file") -> str:
    if "duplicate key" in problem:
        return "keep only one of them"
    if "aliases" in problem:
        return f"write the values out; a {what} needs few anchors (&) and aliases (*)"
    if "another document" in problem or "single document" in problem:
        one = "job" if what == "job file" else "document"
        return f"keep one {one} per file (remove the second '---' document)"
    if "constructor for the tag" in problem:
        return f"remove the YAML tag (!!...); a {what} holds plain values"
    if "'\\t'" in problem:
        return "indent with spaces, not tabs"
    if "recursive" in problem:
        return "remove the alias that refers to itself"
    return "check indentation, colons and quotes around there"
