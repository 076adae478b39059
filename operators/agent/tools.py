"""Tools: plain Python callables the model may call, with schemas derived from their signatures.

`@tool` (or `Tool.from_function`) turns a function into a `Tool`: its name, the first
paragraph of its docstring as description, and a JSON schema of its parameters built from the
type hints (str, int, float, bool, list, dict, Optional, Literal, enums, pydantic models...)
with per-parameter descriptions taken from the docstring (Google, NumPy or Sphinx style).

A `ToolRegistry` runs a `ToolCall` and always returns a tool-result `ChatMessage`:

- a `str` result is sent as text; JSON-able data (dicts, lists, numbers, pydantic models,
  dataclasses, None) as JSON text;
- media parts (`ImagePart`, ...), a `ChatMessage`, or a list mixing text and parts are sent
  as parts, in order;
- a raised exception, invalid arguments, a timeout, or an unknown tool name become a result
  with `is_error=True` and a message saying what happened.

Async tools are awaited on the caller's loop; sync tools run on threads of the registry
(`_tool_threads.ToolThreads`): at most `max_workers` at once, and a call's timeout counts
only its own running time. A timed-out sync tool's thread runs on until it returns (its
result is discarded) but gives its slot up to a fresh thread, so hung tools cannot starve
healthy ones; at most `max_abandoned` (default: `max_workers`) such threads are tolerated
beyond the running ones before new sync calls fail at once with an error result.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, get_type_hints

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from streamagents.operators.agent._result_or_error import result_or_error
from streamagents.operators.agent._tool_threads import ToolThreads, ToolThreadsExhausted
from streamagents.operators.agent.tool_context import ToolContext
from streamagents.serde.chat import ToolSpec
from streamagents.serde.messages import (
    AudioPart,
    ChatMessage,
    DocumentPart,
    ImagePart,
    TextPart,
    ToolCall,
    VideoPart,
)
from streamagents.serde.safe_text import clip

__all__ = [
    "ApprovalRule",
    "Tool",
    "ToolImportError",
    "ToolRegistry",
    "load_tool",
    "provider_schema",
    "tool",
    "tool_result_content",
]

ApprovalRule = bool | Callable[[dict[str, Any]], bool]
"""Whether a tool's call needs approval: always/never, or a predicate over its arguments."""

_PART_TYPES = (TextPart, ImagePart, AudioPart, VideoPart, DocumentPart)
_MAX_ERROR_CHARS = 2000
DEFAULT_MAX_RESULT_BYTES = 32 * 1024 * 1024
"""Largest tool result (text bytes plus inline media bytes) the model is sent by default."""
_PARAM_SECTIONS = ("Args", "Arguments", "Parameters", "Params")
_GOOGLE_HEADER = re.compile(r"^([A-Z][A-Za-z ]*):$")
_GOOGLE_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_NUMPY_ENTRY = re.compile(r"^(\w+)\s*(?::.*)?$")
_SPHINX_PARAM = re.compile(r"^:(?:param|parameter|arg|argument)\s+(?:[^:]*\s)?(\w+):\s*(.*)$")
_SPHINX_FIELD = re.compile(r"^:\w+")
_SCHEMA_VALUES = frozenset({"default", "enum", "const", "examples"})  # data, not schemas


class ToolImportError(ValueError):
    """A tool import path that does not name an importable callable."""


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _section_at(lines: list[str], i: int) -> tuple[str, int] | None:
    """The (name, lines used) of a Google (`Args:`) or NumPy (`Parameters` + dashes) header."""
    stripped = lines[i].strip()
    google = _GOOGLE_HEADER.match(stripped)
    if google and _indent(lines[i]) == 0:
        return google.group(1), 1
    next_line = lines[i + 1].strip() if i + 1 < len(lines) else ""
    if stripped and _indent(lines[i]) == 0 and re.fullmatch(r"-{3,}", next_line):
        return stripped, 2
    return None


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Return (description, {parameter: description}) from a Google/NumPy/Sphinx docstring."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    mode: str | None = "summary"
    current: str | None = None
    entry_indent: int | None = None
    i = 0
    while i < len(lines):
        line, stripped = lines[i], lines[i].strip()
        section = _section_at(lines, i)
        if section is not None:
            name, used = section
            mode = ("google" if used == 1 else "numpy") if name in _PARAM_SECTIONS else None
            current, entry_indent = None, None
            i += used
            continue
        sphinx = _SPHINX_PARAM.match(stripped)
        if sphinx:
            mode, current = "sphinx", sphinx.group(1)
            params[current] = sphinx.group(2).strip()
        elif _SPHINX_FIELD.match(stripped):
            mode, current = "sphinx", None
        elif mode == "summary":
            summary.append(stripped)
        elif mode in ("google", "numpy") and stripped:
            if entry_indent is None:
                entry_indent = _indent(line)
            entry = (_GOOGLE_ENTRY if mode == "google" else _NUMPY_ENTRY).match(stripped)
            if entry and _indent(line) == entry_indent:
                current = entry.group(1)
                params[current] = entry.group(2).strip() if mode == "google" else ""
            elif current is not None:
                params[current] = f"{params[current]} {stripped}".strip()
        elif mode == "sphinx" and current is not None and stripped:
            params[current] = f"{params[current]} {stripped}".strip()
        i += 1
    paragraphs = "\n".join(summary).strip().split("\n\n")
    description = " ".join(" ".join(p.split()) for p in paragraphs if p.strip())
    return description, params


def _clean_schema(node: Any) -> Any:
    """Drop pydantic's `title` noise from a JSON schema, keeping property names intact."""
    if isinstance(node, list):
        return [_clean_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    cleaned: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "properties" and isinstance(value, dict):
            cleaned[key] = {name: _clean_schema(sub) for name, sub in value.items()}
        elif key in _SCHEMA_VALUES:
            cleaned[key] = value
        else:
            cleaned[key] = _clean_schema(value)
    return cleaned


class _SchemaTooLarge(ValueError):
    """Inlining a schema's `$ref`s built more nodes than its size cap allows."""


def _inline_refs(
    node: Any, defs: dict[str, Any], budget: list[int], seen: tuple[str, ...] = ()
) -> Any:
    """Replace local `$ref`s by the definitions they name, for providers without `$ref`;
    each node built spends one of `budget[0]` (a ValueError when none is left)."""
    budget[0] -= 1
    if budget[0] < 0:
        raise _SchemaTooLarge
    if isinstance(node, list):
        return [_inline_refs(item, defs, budget, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref[len("#/$defs/") :]
        if name in seen:
            raise ValueError(f"recursive type {name!r} cannot be used as a tool parameter")
        target = _inline_refs(defs[name], defs, budget, (*seen, name))
        extra = {k: v for k, v in node.items() if k != "$ref"}
        return {**target, **extra}
    return {k: _inline_refs(v, defs, budget, seen) for k, v in node.items() if k != "$defs"}


def provider_schema(schema: dict[str, Any], max_bytes: int | None = None) -> dict[str, Any]:
    """A JSON schema as every provider takes it: local `$ref`s inlined, pydantic titles
    dropped, `properties` present (raises ValueError for a recursive type, and for one
    whose inlined JSON would be over `max_bytes`: inlining stops as soon as it has built
    more nodes than that, each being at least a byte, so a small schema of nested `$ref`s
    never grows in memory)."""
    schema = dict(schema)
    defs = schema.pop("$defs", {})
    budget = [max_bytes if max_bytes is not None else sys.maxsize]
    too_large = f"the schema inlines to more than {max_bytes} bytes"
    try:
        cleaned = _clean_schema(_inline_refs(schema, defs, budget))
    except _SchemaTooLarge:
        raise ValueError(too_large) from None
    cleaned.setdefault("properties", {})
    if max_bytes is not None and len(json.dumps(cleaned)) > max_bytes:
        raise ValueError(too_large)
    return cleaned


def _parameter_model(
    func: Callable[..., Any], name: str, docs: dict[str, str]
) -> tuple[type[BaseModel], list[str], str | None]:
    """Build a pydantic model of `func`'s parameters the model fills; returns it, their
    names, and the name of the parameter annotated `ToolContext` (None: no such one)."""
    signature = inspect.signature(func)
    try:
        hints = get_type_hints(func, include_extras=True)
    except Exception as exc:
        raise TypeError(f"tool {name!r}: cannot resolve its type hints ({exc})") from None
    fields: dict[str, Any] = {}
    names: list[str] = []
    context_parameter = None
    for index, (pname, param) in enumerate(signature.parameters.items()):
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.kind is param.POSITIONAL_ONLY:
            raise TypeError(f"tool {name!r}: positional-only parameter {pname!r} is not supported")
        annotation = hints.get(pname, Any)
        if annotation is ToolContext:
            if context_parameter is not None:
                raise TypeError(f"tool {name!r}: two parameters are annotated ToolContext")
            context_parameter = pname
            continue
        default = ... if param.default is param.empty else param.default
        fields[f"p{index}"] = (
            annotation,
            Field(default, alias=pname, description=docs.get(pname) or None),
        )
        names.append(pname)
    model = create_model(  # type: ignore[call-overload]
        f"{name}_arguments",
        __config__=ConfigDict(extra="forbid", populate_by_name=False),
        **fields,
    )
    return model, names, context_parameter


@dataclass(frozen=True)
class Tool:
    """A callable the model may call: name, description, JSON-schema parameters, function."""

    name: str
    description: str
    parameters: dict[str, Any]
    func: Callable[..., Any] = field(repr=False)
    arguments_model: type[BaseModel] = field(repr=False)
    argument_names: tuple[str, ...] = field(repr=False)
    requires_approval: ApprovalRule = False
    """Whether a call waits for a person's decision: always, or when a predicate over the
    call's arguments says so (see `needs_approval`)."""
    approval_timeout_s: float | None = None
    """How long a call waits for its decision; None: the agent's `approval_timeout_s`."""
    allow_edits: bool = False
    """Whether an approving decision may change the call's arguments."""
    by_tool_name: bool = False
    """Whether a decision may name the call by this tool's name instead of its call_id."""
    context_parameter: str | None = None
    """The parameter annotated `ToolContext`, given the call's context (not the model's)."""

    @classmethod
    def from_function(
        cls,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        requires_approval: ApprovalRule | None = None,
        approval_timeout_s: float | None = None,
        allow_edits: bool = False,
        by_tool_name: bool = False,
    ) -> Tool:
        """Describe `func` as a tool; name and description default to its name and docstring.

        `requires_approval` (True, or a predicate over the call's arguments) makes its calls
        wait for a person's decision, for at most `approval_timeout_s` (default: the
        agent's); given for a `Tool`, they replace its own. `allow_edits` lets an approving
        decision change a call's arguments, `by_tool_name` lets a decision name its call by
        the tool instead of its call_id (for a `Tool`: in addition to its own)."""
        if isinstance(func, Tool):
            return replace(
                func,
                requires_approval=func.requires_approval
                if requires_approval is None
                else requires_approval,
                approval_timeout_s=approval_timeout_s or func.approval_timeout_s,
                allow_edits=func.allow_edits or allow_edits,
                by_tool_name=func.by_tool_name or by_tool_name,
            )
        if not callable(func):
            raise TypeError(f"a tool must be callable, not {type(func).__name__}")
        tool_name = name or getattr(func, "__name__", None) or type(func).__name__
        doc_description, docs = _parse_docstring(inspect.getdoc(func))
        model, names, context_parameter = _parameter_model(func, tool_name, docs)
        parameters = provider_schema(model.model_json_schema(by_alias=True))
        ToolSpec(name=tool_name, description="", parameters=parameters)  # validates the name
        return cls(
            name=tool_name,
            description=description if description is not None else doc_description,
            parameters=parameters,
            func=func,
            arguments_model=model,
            argument_names=tuple(names),
            requires_approval=bool(requires_approval)
            if requires_approval is None or isinstance(requires_approval, bool)
            else requires_approval,
            approval_timeout_s=approval_timeout_s,
            allow_edits=allow_edits,
            by_tool_name=by_tool_name,
            context_parameter=context_parameter,
        )

    def needs_approval(self, arguments: dict[str, Any]) -> bool:
        """Whether this call waits for a decision; a predicate that raises means it does."""
        rule = self.requires_approval
        if isinstance(rule, bool):
            return rule
        try:
            return bool(rule(dict(arguments)))
        except Exception:
            return True  # when in doubt, a person decides

    def origin(self) -> dict[str, str]:
        """The event-log attributes that say where a call of it runs (none for a Python
        tool; an MCP tool names its server and its tool there)."""
        return {}

    @property
    def is_async(self) -> bool:
        """Whether calling the function returns an awaitable to be awaited on the loop."""
        target = self.func
        return inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(
            getattr(target, "__call__", None)  # noqa: B004 - callable objects with async __call__
        )

    def spec(self) -> ToolSpec:
        """The tool as the model sees it."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    def bind(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Validate the model's arguments against the schema; return keyword arguments."""
        validated = self.arguments_model.model_validate(arguments)
        fields = self.arguments_model.model_fields
        return {
            pname: getattr(validated, key)
            for key, pname in zip(fields, self.argument_names, strict=True)
        }

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly (a decorated function stays usable)."""
        return self.func(*args, **kwargs)


def tool(
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: ApprovalRule = False,
    approval_timeout_s: float | None = None,
    allow_edits: bool = False,
    by_tool_name: bool = False,
) -> Any:
    """Decorator making a function a `Tool`: `@tool` or `@tool(name=..., description=...)`.

    `requires_approval=True` (or a predicate over the call's arguments, e.g.
    `lambda args: args["amount"] > 100`) makes the model's calls wait for a person's
    decision, for at most `approval_timeout_s` (default: the agent's); `allow_edits` and
    `by_tool_name` let a decision change the arguments and name the call by the tool."""
    options: dict[str, Any] = {
        "name": name,
        "description": description,
        "requires_approval": requires_approval,
        "approval_timeout_s": approval_timeout_s,
        "allow_edits": allow_edits,
        "by_tool_name": by_tool_name,
    }
    if func is not None:
        return Tool.from_function(func, **options)
    return lambda f: Tool.from_function(f, **options)


def load_tool(path: str) -> Tool:
    """Import a tool from `"package.module:attribute"` (a `Tool` or a plain callable)."""
    module_name, sep, attribute = path.partition(":")
    if not sep or not module_name or not attribute:
        raise ToolImportError(f"tool path {path!r} must look like 'package.module:function'")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ToolImportError(
            f"tool path {path!r}: cannot import {module_name!r} ({exc})"
        ) from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ToolImportError(f"tool path {path!r}: {module_name!r} has no {attribute!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ToolImportError(f"tool path {path!r} names a {type(target).__name__}, not a callable")
    return Tool.from_function(target)


def _json_text(value: Any) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        raise TypeError(
            "returned raw bytes; return a media part such as ImagePart(data=..., mime_type=...) "
            "so the mime type is known"
        )
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    try:
        return pydantic_core.to_json(value, bytes_mode="base64").decode()
    except pydantic_core.PydanticSerializationError:
        raise TypeError(
            f"returned a {type(value).__name__}, which is neither text, JSON data nor media parts"
        ) from None


def _message_parts(message: ChatMessage) -> list[Any]:
    return list(message.parts) if message.parts else [TextPart(text=message.content)]


def tool_result_content(value: Any) -> str | list[Any]:
    """Turn what a tool returned into tool-result content: text, or text and media parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, ChatMessage):
        return list(value.parts) if value.parts else value.content
    if isinstance(value, _PART_TYPES):
        return [value]
    if isinstance(value, list | tuple) and any(
        isinstance(item, (*_PART_TYPES, ChatMessage)) for item in value
    ):
        parts: list[Any] = []
        for item in value:
            if isinstance(item, _PART_TYPES):
                parts.append(item)
            elif isinstance(item, ChatMessage):
                parts.extend(_message_parts(item))
            elif isinstance(item, str):
                parts.append(TextPart(text=item))
            else:
                parts.append(TextPart(text=_json_text(item)))
        return parts
    return _json_text(value)


def result_bytes(message: ChatMessage) -> int:
    """The size of a tool result: the UTF-8 bytes of its text plus its inline media bytes."""
    if not message.parts:
        return len(message.content.encode("utf-8", "surrogatepass"))
    return sum(
        len(p.text.encode("utf-8", "surrogatepass"))
        if isinstance(p, TextPart)
        else len(p.data or b"")
        for p in message.parts
    )


class ToolRegistry:
    """The tools of one agent, by name; runs the model's tool calls and returns their results."""

    def __init__(
        self,
        tools: Iterable[Tool | Callable[..., Any] | str] = (),
        *,
        timeout_s: float = 60.0,
        max_workers: int = 32,
        max_abandoned: int | None = None,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    ) -> None:
        self.timeout_s = timeout_s
        self.max_result_bytes = max_result_bytes
        self._threads = ToolThreads(max_workers, max_abandoned)
        self._tools: dict[str, Tool] = {}
        self._specs: list[ToolSpec] | None = None
        self._releases: list[Callable[[], None]] = []
        for item in tools:
            self.add(item)

    @classmethod
    def from_paths(
        cls,
        paths: Sequence[str],
        *,
        timeout_s: float = 60.0,
        max_workers: int = 32,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    ) -> ToolRegistry:
        """Registry of the tools named by import paths `"package.module:function"`."""
        return cls(
            [load_tool(p) for p in paths],
            timeout_s=timeout_s,
            max_workers=max_workers,
            max_result_bytes=max_result_bytes,
        )

    def add(self, item: Tool | Callable[..., Any] | str) -> Tool:
        """Register a tool, a plain callable, or an import path; names must be unique."""
        new = load_tool(item) if isinstance(item, str) else Tool.from_function(item)
        if new.name in self._tools:
            raise ValueError(f"two tools are named {new.name!r}; tool names must be unique")
        self._tools[new.name] = new
        self._specs = None
        return new

    @property
    def names(self) -> list[str]:
        """Registered tool names, in registration order."""
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def get(self, name: str) -> Tool | None:
        """The tool called `name`, or None."""
        return self._tools.get(name)

    def origin(self, name: str) -> dict[str, str]:
        """Where a call of the tool called `name` runs, as event-log attributes (`origin`
        of the tool; none for an unknown name)."""
        found = self._tools.get(name)
        return {} if found is None else found.origin()

    def specs(self) -> list[ToolSpec]:
        """What the model is told about each tool."""
        if self._specs is None:
            self._specs = [t.spec() for t in self._tools.values()]
        return list(self._specs)

    async def run(self, call: ToolCall, context: ToolContext | None = None) -> ChatMessage:
        """Run one call; never raises: failures become results with `is_error=True`. A tool
        that asks for a `ToolContext` is given `context` (an error result without one)."""
        found = self._tools.get(call.name)
        if found is None:
            available = ", ".join(self._tools) or "none"
            return self.error_result(
                call, f"unknown tool {call.name!r}; available tools: {available}"
            )
        try:
            kwargs = found.bind(call.arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(arguments)'}: {err['msg']}"
                for err in exc.errors(include_input=False, include_url=False)
            )
            return self.error_result(call, f"invalid arguments for tool {call.name!r}: {problems}")
        if found.context_parameter is not None:
            if context is None:
                return self.error_result(call, f"tool {call.name!r} was given no ToolContext")
            kwargs[found.context_parameter] = context
        try:
            if found.is_async:
                value, raised = await asyncio.wait_for(
                    result_or_error(found.func(**kwargs)), self.timeout_s
                )
            else:
                value, raised = await self._threads.call(
                    lambda: found.func(**kwargs), self.timeout_s
                )
                if raised is None and inspect.isawaitable(value):
                    value, raised = await asyncio.wait_for(result_or_error(value), self.timeout_s)
        except asyncio.TimeoutError:
            return self.error_result(
                call, f"tool {call.name!r} timed out after {self.timeout_s:g} s"
            )
        except ToolThreadsExhausted as exc:
            return self.error_result(call, f"tool {call.name!r} was not started: {exc}")
        if raised is not None:
            detail = str(raised)
            kind = type(raised).__name__
            return self.error_result(call, f"{kind}: {detail}" if detail else f"{kind} raised")
        try:
            result = ChatMessage.tool_result(call.id, call.name, tool_result_content(value))
        except Exception as exc:  # a return value that is neither text, JSON nor media
            return self.error_result(call, f"{type(exc).__name__}: {exc}")
        size = result_bytes(result)
        if size > self.max_result_bytes:
            return self.error_result(
                call,
                f"tool {call.name!r} returned {size} bytes, more than max_tool_result_bytes="
                f"{self.max_result_bytes}; return less, or media by URL",
            )
        return result

    async def run_all(
        self, calls: Sequence[ToolCall], contexts: Sequence[ToolContext | None] = ()
    ) -> list[ChatMessage]:
        """Run the calls of one model turn concurrently, each with its context (`contexts`
        in the calls' order, or none); results keep the calls' order."""
        given = list(contexts) or [None] * len(calls)
        runs = (self.run(call, context) for call, context in zip(calls, given, strict=True))
        return list(await asyncio.gather(*runs))

    @staticmethod
    def error_result(call: ToolCall, message: str) -> ChatMessage:
        """An error result for `call` saying `message` (clipped), for the model to read."""
        return ChatMessage.tool_result(
            call.id, call.name, clip(message, _MAX_ERROR_CHARS), is_error=True
        )

    def close_with(self, release: Callable[[], None]) -> None:
        """Have `close` call `release` (a tool source's sessions, for one)."""
        self._releases.append(release)

    def close(self) -> None:
        """Release what the tools hold (each sync call's thread ends when its tool returns)."""
        releases, self._releases = self._releases, []
        for release in releases:
            release()
