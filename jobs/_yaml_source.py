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

__all__ = ["FieldPath", "LoadedYaml", "SourceMap", "YamlSyntaxError", "load_yaml"]

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

    def redact(self, text: str) -> str:
        """`text` with every substituted value (of 4 characters or more; shorter ones are
        not secrets and would garble the text) replaced by its `${NAME}` reference."""
        for name, value in sorted(self.substituted.items(), key=lambda kv: -len(kv[1])):
            if len(value) >= 4:
                text = text.replace(value, "${" + name + "}")
        return text


class YamlSyntaxError(ValueError):
    """The file is not valid YAML; the message names the line and column."""


def load_yaml(text: str, environ: Mapping[str, str] | None = None) -> LoadedYaml:
    """Parse one YAML document, substituting `${ENV}` variables from `environ`."""
    env = os.environ if environ is None else environ
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown place"
        raise YamlSyntaxError(f"{where}: {exc.problem or exc}") from None
    result = LoadedYaml(data=None, source_map=SourceMap())
    if node is not None:
        result.data = _convert(node, (), result, env, yaml.SafeLoader(""))
    return result


def _convert(
    node: yaml.Node,
    path: FieldPath,
    out: LoadedYaml,
    env: Mapping[str, str],
    loader: yaml.SafeLoader,
) -> Any:
    out.source_map.lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        mapping: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            key_path = (*path, str(key))
            out.source_map.lines[key_path] = key_node.start_mark.line + 1
            mapping[key] = _convert(value_node, key_path, out, env, loader)
        return mapping
    if isinstance(node, yaml.SequenceNode):
        return [_convert(item, (*path, i), out, env, loader) for i, item in enumerate(node.value)]
    value = loader.construct_object(node, deep=True)
    if isinstance(value, str) and "${" in value:
        return _substitute(value, path, out, env)
    return value


def _substitute(value: str, path: FieldPath, out: LoadedYaml, env: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if env.get(name):
            out.substituted[name] = env[name]
            return env[name]
        if default is not None:
            return default
        out.missing.setdefault(path, []).append(name)
        return ""

    return _VARIABLE.sub(replace, value)
