"""How a spec's problems are told: `SpecProblem` and `SpecError` (`file:line: field: message`),
pydantic's errors rendered as paths in the YAML with the nearest valid key, and values taken
from the environment redacted from every message.
"""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

from streamagents.jobs.spec.schema import JobSpec
from streamagents.jobs.spec.yaml_source import FieldPath, LoadedYaml

__all__ = [
    "SpecError",
    "SpecProblem",
    "dotted",
    "missing_env",
    "raw_at",
    "redacted",
    "validation_problem",
    "yaml_path",
]


@dataclass(frozen=True)
class SpecProblem:
    """One thing wrong with a spec: where it is and what was expected."""

    line: int | None
    field: str
    message: str


class SpecError(ValueError):
    """A spec that cannot be used; `str()` lists each problem as `file:line: field: message`."""

    def __init__(self, file: str, problems: list[SpecProblem]) -> None:
        self.file = file
        self.problems = problems
        super().__init__(str(self))

    def __str__(self) -> str:
        lines = []
        for p in self.problems:
            where = f"{self.file}:{p.line}" if p.line else self.file
            lines.append(f"{where}: {p.field}: {p.message}" if p.field else f"{where}: {p.message}")
        return "\n".join(lines)


def missing_env(
    path: FieldPath, names: list[str], loaded: LoadedYaml, lead: str = ""
) -> SpecProblem:
    """The problem of a value whose `${NAME}` variables are not set (named, never valued)."""
    variables = ", ".join(sorted(set(names)))
    return SpecProblem(
        loaded.source_map.line_of(path),
        dotted(path),
        f"{lead}environment variable {variables} is not set; export it, or write "
        "${NAME:-default} to give a default",
    )


def redacted(problems: list[SpecProblem], loaded: LoadedYaml) -> list[SpecProblem]:
    """`problems` with every value taken from the environment replaced by its `${NAME}`."""
    return [SpecProblem(p.line, p.field, loaded.redact(p.message)) for p in problems]


def validation_problem(error: Mapping[str, Any], loaded: LoadedYaml) -> SpecProblem:
    """One pydantic error as a problem at its line in the YAML, in the spec's words."""
    loc = yaml_path(tuple(error["loc"]), loaded.data)
    kind = error["type"]
    if kind == "extra_forbidden":
        key = str(loc[-1])
        valid = _valid_keys(tuple(error["loc"])[:-1])
        hint = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
        lead = f"unknown key {key!r}" + (f"; did you mean {hint[0]!r}?" if hint else "")
        return SpecProblem(
            loaded.source_map.line_of(loc), dotted(loc), f"{lead} (valid: {', '.join(valid)})"
        )
    if kind == "missing":
        return SpecProblem(
            loaded.source_map.line_of(loc[:-1]),
            dotted(loc),
            f"required key {str(loc[-1])!r} is missing",
        )
    message = str(error["msg"])
    message = re.sub(r"^(Value error|Assertion failed), ", "", message)
    message = re.sub(r"^Input should be ", "expected ", message)
    message = re.sub(r"^String should ", "expected a string that should ", message)
    if kind.endswith("_type") or kind.endswith("_parsing"):
        message += f" (got {_type_name(error.get('input'))})"
    if kind == "literal_error" and isinstance(error.get("input"), str):
        choices = re.findall(r"'([^']*)'", str(error.get("ctx", {}).get("expected", "")))
        hint = difflib.get_close_matches(error["input"], choices, n=1, cutoff=0.5)
        if hint:
            message += f"; did you mean {hint[0]!r}?"
    return SpecProblem(loaded.source_map.line_of(loc), dotted(loc), message)


def _type_name(value: Any) -> str:
    """What kind of YAML value `value` is, for a message."""
    names = {str: "a string", int: "an integer", float: "a number", bool: "true/false"}
    if value is None:
        return "nothing"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return names.get(type(value), type(value).__name__)


def yaml_path(loc: tuple[Any, ...], raw: Any) -> FieldPath:
    """The pydantic error location as a path in the YAML (a single model is not a list)."""
    path: list[str | int] = []
    for element in loc:
        if isinstance(element, int) and isinstance(raw, Mapping):
            continue
        path.append(element)
        if isinstance(raw, Mapping):
            raw = raw.get(element)
        elif isinstance(raw, list) and isinstance(element, int) and element < len(raw):
            raw = raw[element]
        else:
            raw = None
    return tuple(path)


def raw_at(raw: Any, path: FieldPath) -> Any:
    """The value at `path` in the parsed YAML, None where the path leaves the mappings."""
    for element in path:
        raw = raw.get(element) if isinstance(raw, Mapping) else None
    return raw


def _valid_keys(loc: tuple[Any, ...]) -> list[str]:
    """Field names of the spec model found at `loc` (the mapping holding a bad key)."""
    current: Any = JobSpec
    for element in loc:
        if isinstance(element, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return []
        field = current.model_fields.get(str(element))
        if field is None:
            return []
        current = _model_in(field.annotation)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _model_in(annotation: Any) -> Any:
    """The pydantic model class inside an annotation such as `X | None` or `list[X]`."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _model_in(get_args(annotation)[0])
    if origin in (list, Union, types.UnionType):
        for arg in get_args(annotation):
            found = _model_in(arg)
            if isinstance(found, type) and issubclass(found, BaseModel):
                return found
    return annotation


def dotted(path: FieldPath) -> str:
    """A YAML path as the spec's field name (`agent.model[0].options`)."""
    text = ""
    for element in path:
        text += f"[{element}]" if isinstance(element, int) else (f".{element}" if text else element)
    return text
