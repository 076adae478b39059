"""Tools: schemas from type hints and docstrings, result conversion, errors, concurrency."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import threading
import time
from collections.abc import Iterator
from typing import Literal, Optional

import pytest
from pydantic import BaseModel, Field

from streamagents.operators.agent.tools import (
    Tool,
    ToolImportError,
    ToolRegistry,
    load_tool,
    tool,
    tool_result_content,
)
from streamagents.serde.messages import ChatMessage, ImagePart, TextPart, ToolCall

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


class Address(BaseModel):
    """A postal address."""

    street: str = Field(description="Street and number.")
    zip_code: str


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def google_style(
    city: str,
    days: int,
    ratio: float,
    metric: bool,
    tags: list[str],
    extra: dict[str, int],
    note: Optional[str] = None,  # noqa: UP045 - Optional spelled out on purpose
    unit: Literal["C", "F"] = "C",
    address: Address | None = None,
    color: Color = Color.RED,
) -> str:
    """Forecast the weather.

    Looks the city up first.

    Args:
        city: The city name.
        days (int): How many days
            to forecast.
        ratio: A ratio.
        metric: Use metric units.
        tags: Labels.
        extra: More numbers.
        note: A note.
        unit: Temperature unit.
        address: Where exactly.
        color: A color.

    Returns:
        The forecast.
    """
    return city


def numpy_style(city: str, days: int = 3) -> str:
    """Numpy documented tool.

    Parameters
    ----------
    city : str
        The city name.
    days : int
        How many days.

    Returns
    -------
    str
    """
    return city


def sphinx_style(city: str, days: int = 3) -> str:
    """Sphinx documented tool.

    :param city: The city name.
    :param int days: How many days.
    :returns: text
    """
    return city


def test_schema_covers_basic_types_optional_literal_enum_and_models() -> None:
    spec = Tool.from_function(google_style).spec()
    params = spec.parameters
    props = params["properties"]
    assert spec.name == "google_style"
    assert spec.description == "Forecast the weather. Looks the city up first."
    assert params["type"] == "object"
    assert params["required"] == ["city", "days", "ratio", "metric", "tags", "extra"]
    assert props["city"] == {"type": "string", "description": "The city name."}
    assert props["days"] == {"type": "integer", "description": "How many days to forecast."}
    assert props["ratio"]["type"] == "number"
    assert props["metric"]["type"] == "boolean"
    assert props["tags"]["type"] == "array" and props["tags"]["items"] == {"type": "string"}
    assert props["extra"]["type"] == "object"
    assert props["extra"]["additionalProperties"] == {"type": "integer"}
    assert {"type": "null"} in props["note"]["anyOf"] and props["note"]["default"] is None
    assert props["unit"]["enum"] == ["C", "F"] and props["unit"]["default"] == "C"
    assert props["color"]["enum"] == ["red", "blue"]
    address = next(s for s in props["address"]["anyOf"] if s.get("type") == "object")
    assert address["properties"]["street"]["description"] == "Street and number."
    assert address["required"] == ["street", "zip_code"]
    assert "$ref" not in str(params) and "$defs" not in params
    assert not _schema_keys(params) & {"title", "$ref"}


def _schema_keys(node: object) -> set[str]:
    """Keywords used anywhere in a schema (property names are not keywords)."""
    if isinstance(node, list):
        return set().union(*(_schema_keys(n) for n in node)) if node else set()
    if not isinstance(node, dict):
        return set()
    keys = set(node)
    for key, value in node.items():
        subs = value.values() if key == "properties" else [value]
        keys |= set().union(*(_schema_keys(sub) for sub in subs)) if subs else set()
    return keys


@pytest.mark.parametrize("func", [numpy_style, sphinx_style])
def test_numpy_and_sphinx_docstrings_describe_parameters(func: object) -> None:
    spec = Tool.from_function(func).spec()  # type: ignore[arg-type]
    assert spec.description.endswith("documented tool.")
    assert spec.parameters["properties"]["city"]["description"] == "The city name."
    assert spec.parameters["properties"]["days"]["description"] == "How many days."
    assert spec.parameters["required"] == ["city"]


def test_decorator_sets_name_and_description_and_keeps_function_callable() -> None:
    @tool(name="lookup", description="Find a thing.")
    def find(query: str) -> str:
        return query.upper()

    assert isinstance(find, Tool)
    assert (find.name, find.description) == ("lookup", "Find a thing.")
    assert find("abc") == "ABC"

    @tool
    def plain(x: int) -> int:
        """Double x."""
        return 2 * x

    assert plain.spec().description == "Double x."


def test_invalid_tool_name_is_refused() -> None:
    with pytest.raises(ValueError, match="name"):
        Tool.from_function(lambda: 1, name="has space")


def test_load_tool_from_import_path_and_clear_errors() -> None:
    loaded = load_tool("json:dumps")
    assert loaded.name == "dumps"
    with pytest.raises(ToolImportError, match=r"package\.module:function"):
        load_tool("json.dumps")
    with pytest.raises(ToolImportError, match="cannot import"):
        load_tool("no_such_module_xyz:f")
    with pytest.raises(ToolImportError, match="has no"):
        load_tool("json:nope")


def test_duplicate_tool_names_are_refused() -> None:
    def same(x: int) -> int:
        return x

    with pytest.raises(ValueError, match="unique"):
        ToolRegistry([same, same])


def run(
    registry: ToolRegistry, name: str, args: dict | None = None, cid: str = "c1"
) -> ChatMessage:
    return asyncio.run(registry.run(ToolCall(id=cid, name=name, arguments=args or {})))


def test_text_result_is_sent_as_text() -> None:
    def greet(name: str) -> str:
        return f"hello {name}"

    result = run(ToolRegistry([greet]), "greet", {"name": "ann"})
    assert (result.role, result.tool_call_id, result.name) == ("tool", "c1", "greet")
    assert result.content == "hello ann" and not result.is_error and result.parts == []


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"a": 1, "b": [1.5, None]}, '{"a":1,"b":[1.5,null]}'),
        ([1, 2], "[1,2]"),
        (3, "3"),
        (None, "null"),
        (Address(street="Main 1", zip_code="9"), '{"street":"Main 1","zip_code":"9"}'),
    ],
)
def test_json_data_is_sent_as_json_text(value: object, text: str) -> None:
    assert tool_result_content(value) == text


def test_media_results_become_parts_in_order() -> None:
    image = ImagePart(data=PNG, mime_type="image/png")
    assert tool_result_content(image) == [image]
    mixed = tool_result_content(["caption", image, {"n": 1}])
    assert mixed == [TextPart(text="caption"), image, TextPart(text='{"n":1}')]
    message = ChatMessage.user([TextPart(text="look"), image])
    assert tool_result_content(message) == list(message.parts)
    assert tool_result_content(ChatMessage.user("just text")) == "just text"


def test_tool_returning_an_image_gives_a_tool_result_with_the_image_part() -> None:
    def snapshot(camera: str) -> list:
        return [f"camera {camera}", ImagePart(data=PNG, mime_type="image/png")]

    result = run(ToolRegistry([snapshot]), "snapshot", {"camera": "north"})
    assert result.content == "camera north"
    assert [p.kind for p in result.parts] == ["text", "image"]
    assert result.parts[1].data == PNG


def test_a_result_over_max_result_bytes_is_an_error_naming_the_limit_not_the_payload() -> None:
    def dump(n: int) -> str:
        return "x" * n

    def photo() -> list:
        return ["a photo", ImagePart(data=PNG, mime_type="image/png")]

    registry = ToolRegistry([dump, photo], max_result_bytes=len(PNG))
    assert run(registry, "dump", {"n": len(PNG)}).content == "x" * len(PNG)
    too_long = run(registry, "dump", {"n": len(PNG) + 1})
    assert too_long.is_error and f"returned {len(PNG) + 1} bytes" in too_long.content
    assert f"max_tool_result_bytes={len(PNG)}" in too_long.content and "xxx" not in too_long.content
    too_big = run(registry, "photo")
    assert too_big.is_error and too_big.parts == [] and "photo" in too_big.content
    assert f"returned {len(PNG) + len('a photo')} bytes" in too_big.content


def test_raw_bytes_result_is_an_error_naming_the_rule() -> None:
    def raw() -> bytes:
        return PNG

    result = run(ToolRegistry([raw]), "raw")
    assert result.is_error and "ImagePart" in result.content
    assert "\\x89" not in result.content and "PNG" not in result.content


def test_raised_exception_becomes_error_result_with_the_message() -> None:
    def broken(city: str) -> str:
        raise RuntimeError(f"no weather station in {city}")

    result = run(ToolRegistry([broken]), "broken", {"city": "Oz"})
    assert result.is_error
    assert result.content == "RuntimeError: no weather station in Oz"


def test_a_tool_s_own_timeout_error_is_not_mistaken_for_the_call_timeout() -> None:
    async def upstream() -> str:
        raise TimeoutError("the weather service did not answer")

    result = run(ToolRegistry([upstream]), "upstream")
    assert result.is_error
    assert result.content == "TimeoutError: the weather service did not answer"


def test_schema_keeps_defaults_that_look_like_schema_keywords() -> None:
    def labelled(meta: dict = {"title": "kept"}) -> str:  # noqa: B006 - a default to inspect
        return "x"

    assert Tool.from_function(labelled).parameters["properties"]["meta"]["default"] == {
        "title": "kept"
    }


def test_invalid_arguments_become_error_result_naming_the_field() -> None:
    def count(n: int, unit: Literal["a", "b"] = "a") -> int:
        return n

    registry = ToolRegistry([count])
    result = run(registry, "count", {"n": "many", "unit": "z"})
    assert result.is_error and "invalid arguments for tool 'count'" in result.content
    assert "n:" in result.content and "unit:" in result.content
    extra = run(registry, "count", {"n": 1, "bogus": 2})
    assert extra.is_error and "bogus" in extra.content


def test_pydantic_model_argument_arrives_as_model_instance() -> None:
    seen: list[object] = []

    def ship(to: Address, express: bool = False) -> str:
        seen.append(to)
        return "ok"

    result = run(ToolRegistry([ship]), "ship", {"to": {"street": "Main 1", "zip_code": "9"}})
    assert result.content == "ok"
    assert seen == [Address(street="Main 1", zip_code="9")]


@dataclasses.dataclass
class Window:
    start: int
    end: int = 10


def test_dataclass_argument_arrives_as_dataclass_instance() -> None:
    seen: list[Window] = []

    def scan(window: Window) -> str:
        seen.append(window)
        return "ok"

    props = Tool.from_function(scan).parameters["properties"]["window"]
    assert props["required"] == ["start"] and props["properties"]["end"]["default"] == 10
    assert run(ToolRegistry([scan]), "scan", {"window": {"start": 3}}).content == "ok"
    assert seen == [Window(start=3)]


def test_unknown_tool_becomes_error_result_listing_known_tools() -> None:
    def known() -> str:
        return "x"

    result = run(ToolRegistry([known]), "unknown_one")
    assert result.is_error and result.name == "unknown_one"
    assert "unknown tool 'unknown_one'" in result.content and "known" in result.content


def test_async_tool_is_awaited_on_the_loop_and_sync_tool_runs_in_a_thread() -> None:
    where: dict[str, str] = {}

    async def async_tool() -> str:
        where["async"] = threading.current_thread().name
        await asyncio.sleep(0)
        return "a"

    def sync_tool() -> str:
        where["sync"] = threading.current_thread().name
        return "s"

    registry = ToolRegistry([async_tool, sync_tool])

    async def both() -> list[ChatMessage]:
        where["loop"] = threading.current_thread().name
        return await registry.run_all(
            [ToolCall(id="1", name="async_tool"), ToolCall(id="2", name="sync_tool")]
        )

    results = asyncio.run(both())
    assert [r.content for r in results] == ["a", "s"]
    assert where["async"] == where["loop"]
    assert where["sync"] != where["loop"] and where["sync"].startswith("tool")
    registry.close()


def test_tool_calls_of_one_turn_run_concurrently_and_keep_call_order() -> None:
    barrier = threading.Barrier(3, timeout=5)
    gate = asyncio.Event()

    def sync_waiter(name: str) -> str:
        barrier.wait()  # only passes when both sync calls run at the same time as the main
        return name

    async def async_opener() -> str:
        gate.set()
        return "opened"

    async def async_waiter() -> str:
        await asyncio.wait_for(gate.wait(), 5)  # needs async_opener to run meanwhile
        return "waited"

    registry = ToolRegistry([sync_waiter, async_opener, async_waiter])
    calls = [
        ToolCall(id="1", name="async_waiter"),
        ToolCall(id="2", name="sync_waiter", arguments={"name": "first"}),
        ToolCall(id="3", name="sync_waiter", arguments={"name": "second"}),
        ToolCall(id="4", name="async_opener"),
    ]

    async def main() -> list[ChatMessage]:
        pending = asyncio.ensure_future(registry.run_all(calls))
        await asyncio.to_thread(barrier.wait)
        return await pending

    results = asyncio.run(main())
    assert [r.content for r in results] == ["waited", "first", "second", "opened"]
    assert [r.tool_call_id for r in results] == ["1", "2", "3", "4"]
    assert not any(r.is_error for r in results)
    registry.close()


def test_slow_tool_times_out_with_an_error_result() -> None:
    release = threading.Event()

    def stuck() -> str:
        release.wait(5)
        return "late"

    async def stuck_async() -> str:
        await asyncio.sleep(5)
        return "late"

    registry = ToolRegistry([stuck, stuck_async], timeout_s=0.05)
    for name in ("stuck", "stuck_async"):
        result = run(registry, name)
        assert result.is_error and result.content == f"tool {name!r} timed out after 0.05 s"
    release.set()
    registry.close()


@pytest.fixture()
def loop_thread() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop running in its own thread, as the engine runs one per subtask."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


@pytest.mark.parametrize("exit_kind", [SystemExit, KeyboardInterrupt])
def test_a_tool_raising_system_exit_or_keyboard_interrupt_is_an_error_and_the_loop_lives_on(
    loop_thread: asyncio.AbstractEventLoop, exit_kind: type[BaseException]
) -> None:
    def quits_sync() -> str:
        raise exit_kind(2)

    async def quits_async() -> str:
        raise exit_kind(2)

    def fine() -> str:
        return "still here"

    registry = ToolRegistry([quits_sync, quits_async, fine], timeout_s=5)

    def call(name: str) -> ChatMessage:
        coroutine = registry.run(ToolCall(id="c1", name=name, arguments={}))
        return asyncio.run_coroutine_threadsafe(coroutine, loop_thread).result(timeout=5)

    for name in ("quits_sync", "quits_async"):
        result = call(name)
        assert result.is_error
        assert result.content == f"{exit_kind.__name__}: 2"
    later = call("fine")
    assert later.content == "still here" and not later.is_error
    registry.close()


def test_hung_sync_tools_do_not_starve_a_healthy_tool_of_a_thread() -> None:
    release = threading.Event()

    def hangs() -> str:
        release.wait(30)  # bounded, and released at the end of the test
        return "late"

    def healthy() -> str:
        return "fine"

    registry = ToolRegistry([hangs, healthy], timeout_s=0.2, max_workers=2)
    try:

        async def main() -> list[ChatMessage]:
            hung = [ToolCall(id=f"h{i}", name="hangs", arguments={}) for i in range(2)]
            stuck = await registry.run_all(hung)  # both threads of the pool now hang
            return [*stuck, await registry.run(ToolCall(id="ok", name="healthy", arguments={}))]

        *stuck, result = asyncio.run(main())
        assert all(r.is_error and "timed out" in r.content for r in stuck)
        assert (result.content, result.is_error) == ("fine", False)
    finally:
        release.set()
        registry.close()


def test_a_healthy_tool_s_timeout_does_not_count_its_wait_for_a_thread() -> None:
    def slowish() -> str:
        threading.Event().wait(0.3)
        return "done"

    registry = ToolRegistry([slowish], timeout_s=0.5, max_workers=1)
    calls = [ToolCall(id=str(i), name="slowish", arguments={}) for i in range(3)]
    results = asyncio.run(registry.run_all(calls))  # the third waits ~0.6 s, runs 0.3 s
    assert [(r.content, r.is_error) for r in results] == [("done", False)] * 3


def test_abandoned_tool_threads_are_bounded_and_new_calls_then_fail_at_once() -> None:
    release = threading.Event()

    def hangs() -> str:
        release.wait(30)
        return "late"

    registry = ToolRegistry([hangs], timeout_s=0.1, max_workers=1, max_abandoned=2)
    try:
        results = [run(registry, "hangs", cid=str(i)) for i in range(4)]
        assert [("timed out" in r.content) for r in results] == [True, True, True, False]
        assert results[3].is_error and "not started" in results[3].content
        assert "3 timed-out sync tool calls are still running" in results[3].content
    finally:
        release.set()
    deadline = time.monotonic() + 5
    while registry._threads.abandoned and time.monotonic() < deadline:
        time.sleep(0.01)
    assert registry._threads.abandoned == 0
    assert run(registry, "hangs").content == "late"
    registry.close()
