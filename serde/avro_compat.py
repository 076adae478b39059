"""Avro schema compatibility: what stops two schema versions reading each other's data.

`check_compatible(old, new)` walks both schemas together and reports, with the path of the
field, every change that breaks readers in either direction: a field removed or renamed
without an alias, a field added without a default, a type changed other than by widening
a union, an enum symbol added without an enum default (or removed without one).
"""

from __future__ import annotations

from typing import Any

__all__ = ["check_compatible"]

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})


def _named_types(schema: Any, namespace: str | None, found: dict[str, Any]) -> None:
    """Collect every named type (record, enum, fixed) under its full and short name."""
    if isinstance(schema, list):
        for branch in schema:
            _named_types(branch, namespace, found)
        return
    if not isinstance(schema, dict):
        return
    kind = schema["type"]
    if kind in ("record", "error", "enum", "fixed"):
        name = schema["name"]
        space = schema.get("namespace", namespace) if "." not in name else name.rpartition(".")[0]
        full = name if "." in name else (f"{space}.{name}" if space else name)
        found[full] = schema
        found.setdefault(full.rpartition(".")[2], schema)
        if kind in ("record", "error"):
            for field in schema["fields"]:
                _named_types(field["type"], space, found)
    elif kind == "array":
        _named_types(schema["items"], namespace, found)
    elif kind == "map":
        _named_types(schema["values"], namespace, found)
    elif isinstance(kind, dict | list):
        _named_types(kind, namespace, found)


class _Resolver:
    """Compares an old and a new schema both ways and collects the problems."""

    def __init__(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.old_names: dict[str, Any] = {}
        self.new_names: dict[str, Any] = {}
        _named_types(old, old.get("namespace"), self.old_names)
        _named_types(new, new.get("namespace"), self.new_names)
        self.problems: list[str] = []
        self.seen: set[tuple[int, int]] = set()

    def _expand(self, schema: Any, names: dict[str, Any]) -> Any:
        if isinstance(schema, str) and schema not in _PRIMITIVES:
            return names.get(schema, names.get(schema.rpartition(".")[2], schema))
        if isinstance(schema, dict) and isinstance(schema["type"], dict | list):
            return self._expand(schema["type"], names)
        if isinstance(schema, dict) and schema["type"] in _PRIMITIVES and len(schema) == 1:
            return schema["type"]
        return schema

    @staticmethod
    def _describe(schema: Any) -> str:
        if isinstance(schema, str):
            return schema
        if isinstance(schema, list):
            return "[" + ", ".join(_Resolver._describe(s) for s in schema) + "]"
        if schema["type"] in ("record", "enum", "fixed", "error"):
            return f"{schema['type']} {schema['name']}"
        if schema["type"] in ("array", "map"):
            inner = schema["items"] if schema["type"] == "array" else schema["values"]
            return f"{schema['type']}<{_Resolver._describe(inner)}>"
        logical = schema.get("logicalType")
        return f"{schema['type']}({logical})" if logical else schema["type"]

    def compare(self, old: Any, new: Any, path: str) -> None:
        old = self._expand(old, self.old_names)
        new = self._expand(new, self.new_names)
        if isinstance(old, list) or isinstance(new, list):
            self._compare_unions(old, new, path)
            return
        if self._kind(old) != self._kind(new):
            self.problems.append(
                f"{path}: type changed from {self._describe(old)} to {self._describe(new)}"
            )
            return
        kind = self._kind(old)
        old_logical, new_logical = self._logical(old), self._logical(new)
        if old_logical != new_logical:
            self.problems.append(
                f"{path}: logical type changed from {old_logical} to {new_logical}"
            )
        if kind in ("record", "error"):
            self._compare_records(old, new, path)
        elif kind == "enum":
            self._compare_enums(old, new, path)
        elif kind == "array":
            self.compare(old["items"], new["items"], f"{path}[]")
        elif kind == "map":
            self.compare(old["values"], new["values"], f"{path}{{}}")
        elif kind == "fixed" and old["size"] != new["size"]:
            self.problems.append(f"{path}: fixed size changed from {old['size']} to {new['size']}")

    @staticmethod
    def _kind(schema: Any) -> str:
        return schema if isinstance(schema, str) else schema["type"]

    @staticmethod
    def _logical(schema: Any) -> str | None:
        return schema.get("logicalType") if isinstance(schema, dict) else None

    def _compare_unions(self, old: Any, new: Any, path: str) -> None:
        old_branches = old if isinstance(old, list) else [old]
        new_branches = new if isinstance(new, list) else [new]
        if not isinstance(new, list):
            self.problems.append(
                f"{path}: union {self._describe(old)} narrowed to {self._describe(new)}"
            )
            return
        for branch in old_branches:
            expanded = self._expand(branch, self.old_names)
            match = next(
                (
                    b
                    for b in new_branches
                    if self._same_branch(expanded, self._expand(b, self.new_names))
                ),
                None,
            )
            if match is None:
                self.problems.append(
                    f"{path}: union branch {self._describe(expanded)} removed "
                    f"(new type {self._describe(new)})"
                )
            else:
                self.compare(branch, match, path)

    @staticmethod
    def _same_branch(old: Any, new: Any) -> bool:
        old_kind = old if isinstance(old, str) else old["type"]
        new_kind = new if isinstance(new, str) else new["type"]
        if old_kind != new_kind:
            return False
        if old_kind in ("record", "enum", "fixed", "error"):
            return old["name"] == new["name"] or old["name"] in new.get("aliases", ())
        return True

    def _compare_records(self, old: dict[str, Any], new: dict[str, Any], path: str) -> None:
        marker = (id(old), id(new))
        if marker in self.seen:
            return
        self.seen.add(marker)
        if old["name"] != new["name"] and old["name"] not in new.get("aliases", ()):
            self.problems.append(
                f"{path}: record {old['name']} renamed to {new['name']} without an alias"
            )
        new_by_name = {f["name"]: f for f in new["fields"]}
        new_by_alias = {a: f for f in new["fields"] for a in f.get("aliases", ())}
        matched: set[str] = set()
        for field in old["fields"]:
            name = field["name"]
            here = f"{path}.{name}"
            counterpart = new_by_name.get(name) or new_by_alias.get(name)
            if counterpart is None:
                self.problems.append(f"{here}: field removed or renamed without an alias")
                continue
            matched.add(counterpart["name"])
            if counterpart["name"] != name and "default" not in field:
                self.problems.append(
                    f"{here}: renamed to {counterpart['name']}, but readers of the old "
                    "schema need a default for it"
                )
            self.compare(field["type"], counterpart["type"], here)
        for field in new["fields"]:
            if field["name"] not in matched and "default" not in field:
                self.problems.append(f"{path}.{field['name']}: field added without a default")

    def _compare_enums(self, old: dict[str, Any], new: dict[str, Any], path: str) -> None:
        added = [s for s in new["symbols"] if s not in old["symbols"]]
        removed = [s for s in old["symbols"] if s not in new["symbols"]]
        if added and "default" not in old:
            self.problems.append(
                f"{path}: enum {old['name']} gained symbols {added} but has no default "
                "for older readers to fall back on"
            )
        if removed and "default" not in new:
            self.problems.append(
                f"{path}: enum {new['name']} lost symbols {removed} and has no default "
                "for reading older data"
            )


def check_compatible(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Problems that stop `new` being backward and forward compatible with `old` (none: [])."""
    resolver = _Resolver(old, new)
    resolver.compare(old, new, old.get("name", "schema"))
    return resolver.problems
