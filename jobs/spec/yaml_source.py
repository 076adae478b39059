"""YAML loading that remembers where each value came from and fills in `${ENV}` variables.

`load_yaml` returns plain Python data plus a `SourceMap` from field paths to line
numbers, so a validation error can name the line a user must fix. Every string of the
form `${NAME}` or `${NAME:-default}` (alone or inside a longer string) is replaced by the
environment variable's value; the values substituted are remembered so that `redact` can
strip them from any message before it is shown — a secret never reaches a terminal or a
log. A variable that is not set (or set to an empty string, as compose files often do) is
not an error here: its place is recorded in `missing`, and the spec decides whether that
place is in use.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

__all__ = [
    "MAX_DEPTH",
    "FieldPath",
    "LoadedYaml",
    "SourceMap",
    "YamlRuleError",
    "YamlSyntaxError",
    "expand_assignments",
    "expand_env",
    "load_yaml",
]

FieldPath = tuple[str | int, ...]

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass
class SourceMap:
    """Line numbers (1-based) of the keys and values of a YAML document, by field path."""

    lines: dict[FieldPath, int] = field(default_factory=dict)

    def line_of(self, path: FieldPath) -> int | None:
        """The line of `path`, or of its nearest ancestor that has one."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return line
        return None


@dataclass
class LoadedYaml:
    """A parsed YAML document with its source map and the outcome of `${ENV}` substitution."""

    data: Any
    source_map: SourceMap
    missing: dict[FieldPath, list[str]] = field(default_factory=dict)
    """Field paths whose value names environment variables that are not set."""
    substituted: dict[str, str] = field(default_factory=dict)
    """Variable name -> value, for every variable substituted (kept only to redact it)."""
    placed: dict[FieldPath, tuple[str, list[str]]] = field(default_factory=dict)
    """Field path -> its value after substitution and the variables substituted into it
    (to tell which values are secrets by where they went)."""

    def redact(self, text: str) -> str:
        """`text` with every substituted value (of 4 characters or more; shorter ones are
        not secrets and would garble the text) replaced by its `${NAME}` reference."""
        for name, value in sorted(self.substituted.items(), key=lambda kv: -len(kv[1])):
            if len(value) >= 4:
                text = text.replace(value, "${" + name + "}")
        return text


class YamlSyntaxError(ValueError):
    """The file is not valid YAML; the message names the line and column."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


class YamlRuleError(ValueError):
    """Valid YAML that a job spec does not allow (an alias, a tag, a merge key, a list or
    mapping as a key, a key given twice, nesting too deep) or a value that cannot be read
    (a malformed number or date); names the line and field path."""

    def __init__(self, line: int | None, path: FieldPath, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.path = path
        self.message = message


MAX_DEPTH = 32
"""Levels of nested lists and mappings a spec may have (a real spec has fewer than 10)."""

_SCAN_DEPTH = 256  # the scanner's own stop for flow [ and {, far beyond MAX_DEPTH

_TAG = "tag:yaml.org,2002:"
_PLAIN_TAGS = frozenset(
    _TAG + name for name in ("str", "int", "float", "bool", "null", "timestamp", "seq", "map")
)
_MERGE = _TAG + "merge"
_VALUE = _TAG + "value"  # a plain `=`, which is only text in a spec


class _Refused(yaml.ScalarNode):
    """A node the composer did not build, standing where it was, with the reason."""

    def __init__(self, reason: str, event: yaml.Event) -> None:
        super().__init__("", "", event.start_mark, event.end_mark)
        self.reason = reason


class _SpecComposer(yaml.SafeLoader):
    """A safe loader that never expands an alias and never recurses past MAX_DEPTH: an
    alias, or a collection nested too deep, becomes a `_Refused` node (skipped without
    recursion) that `_convert` reports with its field path."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            self.get_event()
            return _Refused(
                f"YAML aliases (*{event.anchor}) are not allowed in a job spec; "
                "write the value out in full",
                event,
            )
        if self._depth >= MAX_DEPTH and isinstance(
            event, yaml.SequenceStartEvent | yaml.MappingStartEvent
        ):
            self._skip_collection()
            return _Refused(
                f"nested more than {MAX_DEPTH} levels deep; a job spec has far fewer", event
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def fetch_flow_sequence_start(self) -> None:
        self._check_flow_level()
        super().fetch_flow_sequence_start()

    def fetch_flow_mapping_start(self) -> None:
        self._check_flow_level()
        super().fetch_flow_mapping_start()

    def _check_flow_level(self) -> None:
        # PyYAML's scanner does work proportional to the open [ and { on every token, so
        # thousands of them take seconds before the composer ever sees the depth.
        if self.flow_level >= _SCAN_DEPTH:
            raise YamlRuleError(
                self.get_mark().line + 1,
                (),
                f"more than {_SCAN_DEPTH} nested [ or {{; a job spec has far fewer",
            )

    def _skip_collection(self) -> None:
        level = 0
        while True:
            event = self.get_event()
            if isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent):
                level += 1
            elif isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent):
                level -= 1
                if level == 0:
                    return


def load_yaml(text: str, environ: Mapping[str, str] | None = None) -> LoadedYaml:
    """Parse one YAML document, substituting `${ENV}` variables from `environ`.

    Raises `YamlSyntaxError` for text that is not YAML and `YamlRuleError` for YAML a
    spec does not allow: aliases, merge keys, tags other than the plain types (string,
    integer, number, boolean, null, timestamp, list, mapping), lists or mappings as keys,
    a key given twice in one mapping (YAML would keep the last silently), nesting deeper
    than MAX_DEPTH, and values that cannot be read."""
    env = os.environ if environ is None else environ
    composer = None
    try:
        composer = _SpecComposer(text)  # reads the text: a forbidden character fails here
        node = composer.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown place"
        raise YamlSyntaxError(
            f"{where}: {exc.problem or exc}", mark.line + 1 if mark else None
        ) from None
    except yaml.YAMLError as exc:  # e.g. a character YAML does not allow
        raise YamlSyntaxError(str(exc).replace("\n", " ")) from None
    finally:
        if composer is not None:
            composer.dispose()
    result = LoadedYaml(data=None, source_map=SourceMap())
    if node is not None:
        result.data = _convert(node, (), result, env, yaml.SafeLoader(""))
    return result


def expand_env(value: str, environ: Mapping[str, str] | None = None) -> str:
    """`value` with each `${NAME}` / `${NAME:-default}` filled in from the environment, as a
    spec's values are (for command-line options that may carry secrets: `--header`,
    `--kafka-property`); a variable that is not set and has no default is a `ValueError`."""
    loaded = LoadedYaml(None, SourceMap())
    expanded = _substitute(value, (), loaded, os.environ if environ is None else environ)
    if loaded.missing:
        names = ", ".join(name for names in loaded.missing.values() for name in names)
        raise ValueError(f"{names} is not set")
    return expanded


def expand_assignments(items: list[str], flag: str) -> dict[str, str]:
    """Command-line `NAME=VALUE` items (`--header`, `--kafka-property`) as a mapping, each
    value through `expand_env` (so a secret is given as `${NAME}`, not on the command line);
    an item without `=` or with a variable that is not set is a `ValueError` naming `flag`."""
    expanded = {}
    for item in items:
        name, equals, value = item.partition("=")
        if not equals or not name.strip():
            raise ValueError(f"{flag} takes NAME=VALUE, not {name.strip()!r} without '='")
        try:
            expanded[name.strip()] = expand_env(value)
        except ValueError as exc:
            raise ValueError(f"{flag} {name.strip()}: {exc}") from None
    return expanded


def _refuse(node: yaml.Node, path: FieldPath, message: str) -> YamlRuleError:
    return YamlRuleError(node.start_mark.line + 1, path, message)


def _kind(node: yaml.Node) -> str:
    return "a list" if isinstance(node, yaml.SequenceNode) else "a mapping"


def _convert(
    node: yaml.Node,
    path: FieldPath,
    out: LoadedYaml,
    env: Mapping[str, str],
    loader: yaml.SafeLoader,
) -> Any:
    out.source_map.lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, _Refused):
        raise _refuse(node, path, node.reason)
    if node.tag not in _PLAIN_TAGS and node.tag != _VALUE:
        raise _refuse(
            node,
            path,
            f"YAML tag {node.tag.replace(_TAG, '!!')} is not allowed in a job spec; "
            "write a plain string, number, true/false, list or mapping",
        )
    if isinstance(node, yaml.MappingNode):
        mapping: dict[Any, Any] = {}
        first_lines: dict[Any, int] = {}
        for key_node, value_node in node.value:
            if isinstance(key_node, _Refused):
                raise _refuse(key_node, path, key_node.reason)
            if key_node.tag == _MERGE:
                raise _refuse(
                    key_node,
                    path,
                    "merge keys (<<) are not allowed in a job spec; write each key out",
                )
            if not isinstance(key_node, yaml.ScalarNode):
                raise _refuse(
                    key_node, path, f"expected a plain key, got {_kind(key_node)} as a key"
                )
            key = _construct(key_node, path, loader)
            key_path = (*path, str(key))
            line = key_node.start_mark.line + 1
            if key in first_lines:
                raise _refuse(
                    key_node,
                    key_path,
                    f"key {str(key)!r} is given twice, on lines {first_lines[key]} and "
                    f"{line}; YAML would keep only the last silently: keep one",
                )
            first_lines[key] = line
            out.source_map.lines[key_path] = line
            mapping[key] = _convert(value_node, key_path, out, env, loader)
        return mapping
    if isinstance(node, yaml.SequenceNode):
        return [_convert(item, (*path, i), out, env, loader) for i, item in enumerate(node.value)]
    value = node.value if node.tag == _VALUE else _construct(node, path, loader)
    if isinstance(value, str) and "${" in value:
        return _substitute(value, path, out, env)
    return value


def _construct(node: yaml.Node, path: FieldPath, loader: yaml.SafeLoader) -> Any:
    if node.tag not in _PLAIN_TAGS and node.tag != _VALUE:
        raise _refuse(node, path, f"YAML tag {node.tag.replace(_TAG, '!!')} is not allowed")
    try:
        return loader.construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError):
        kind = node.tag.replace(_TAG, "")
        shown = node.value if len(node.value) <= 40 else node.value[:39] + "…"
        what = {"int": "an integer", "float": "a number", "timestamp": "a date"}.get(kind, kind)
        return_msg = f"cannot read {shown!r} as {what}; quote it to make it a string"
        raise _refuse(node, path, return_msg) from None


def _substitute(value: str, path: FieldPath, out: LoadedYaml, env: Mapping[str, str]) -> str:
    names: list[str] = []

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if env.get(name):
            out.substituted[name] = env[name]
            names.append(name)
            return env[name]
        if default is not None:
            return default
        out.missing.setdefault(path, []).append(name)
        return ""

    substituted = _VARIABLE.sub(replace, value)
    if names:
        out.placed[path] = (substituted, names)
    return substituted
