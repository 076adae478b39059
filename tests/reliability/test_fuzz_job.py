"""Fuzzing through a real job: generated input lines, one mini-cluster job, one record each.

Hypothesis draws a few hundred input lines — JSON shapes with nesting, numbers from tiny
to huge and NaN-like text, unicode with lone surrogates (as JSON escapes, and raw — which
Flink's STRING hand-over from Python turns into U+FFFD before the job sees them), invalid
UTF-8 decoded as text, base64 standard, URL-safe, unpadded and broken, mime types and
part kinds that fit or not, sizes around the input limits — and mixes in known-good
lines. One job (parallelism 2, the Gemini adapter against a loopback stub that always
answers) runs them all. Properties: the job finishes, every line yields exactly one
output or exactly one parse dead letter, and each dead letter names a documented rule
without a traceback or a payload.

Every line that is a JSON object carries its number in an `fz` field, which outputs
pass through in `attributes`; a parse dead letter is matched to its line by `input`,
the line as given.
"""

from __future__ import annotations

import base64
import json
import re
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyflink.common import Configuration, Types
from pyflink.datastream import StreamExecutionEnvironment

from streamagents.connectors.loopback_stub import LoopbackStubServer, StubReply
from streamagents.operators.agent import AgentConfig, InputLimits, InputMedia, ModelSpec
from streamagents.operators.agent.records import InputError, check_media_sources, parse_input
from streamagents.operators.flink import agent_stream, configure_environment

GENERATED = 400
LIMITS = InputLimits(max_line_bytes=6000, max_key_chars=64, max_attributes_bytes=700, max_depth=12)
DOCUMENTED_TYPES = {
    "InvalidJson",
    "MissingKey",
    "InvalidKey",
    "InvalidId",
    "InvalidInput",
    "InvalidPart",
    "InvalidNumber",
    "InvalidText",
    "InputTooLarge",
    "InputTooDeep",
    "MediaStoreError",
    "MediaSourceRefused",
}
"""Parse-stage `error_type`s, as docs/agent-runtime.md ("Input") lists them."""
PAYLOAD_RUN = re.compile(r"[A-Za-z0-9+/_=-]{48,}")
RAW_SURROGATE = re.compile("[\ud800-\udfff]")
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 3

# --- strategies -------------------------------------------------------------------------

NUMBER_TEXT = st.sampled_from(
    ["NaN", "-NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1e308", "4.9e-324",
     "123456789012345678901234567890", "-0", "0.0000", "1E+2", "01", "+1", ".5", "nan"]
)  # fmt: skip
LONE = st.sampled_from(["\\ud800", "\\udfff", "\\udc80x", "\\ud83d", "\\ud83d\\ude00"])
"""JSON escapes: lone surrogates, and one valid pair for contrast."""
INVALID_UTF8 = st.binary(min_size=1, max_size=12).map(
    lambda b: (b + b"\xff\xc3").decode("utf-8", "replace")
)
"""Invalid UTF-8 as a reader that replaces undecodable bytes gives it."""
TEXT = st.one_of(st.text(max_size=40), INVALID_UTF8, st.sampled_from(["", " ", "\x00", "é" * 30]))
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def _b64(raw: bytes, variant: str) -> str:
    if variant == "standard":
        return base64.b64encode(raw).decode()
    if variant == "urlsafe":
        return base64.urlsafe_b64encode(raw).decode()
    if variant == "unpadded":
        return base64.b64encode(raw).decode().rstrip("=")
    if variant == "spaced":
        text = base64.b64encode(raw).decode()
        return " ".join(text[i : i + 76] for i in range(0, len(text), 76))
    if variant == "broken":
        return "!!" + base64.b64encode(raw).decode()[2:]
    return ""


PART = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["image", "audio", "video", "document", "text", "sticker", ""]),
        "mime_type": st.sampled_from(
            [
                "image/png",
                "image/jpeg",
                "audio/wav",
                "video/mp4",
                "application/pdf",
                "text/plain",
                "image/",
                "png",
                "",
                "IMAGE/PNG",
                "application/octet-stream",
            ]
        ),
    },
    optional={
        "data": st.builds(
            _b64,
            st.sampled_from([PNG[:n] for n in (0, 3, 100, 1024, 2000, 4400)]),
            st.sampled_from(["standard", "urlsafe", "unpadded", "spaced", "broken", "empty"]),
        ),
        "url": st.sampled_from(["https://example.invalid/a.png", "gs://b/o.pdf", "", "ftp:x"]),
        "ref": st.sampled_from(["sha256:" + "0" * 64, "sha256:zz", ""]),
        "text": TEXT,
    },
)
GOOD_KEY = st.one_of(st.text(min_size=1, max_size=10), st.integers(-(2**40), 2**40))
KEY = st.one_of(
    GOOD_KEY,
    GOOD_KEY,
    GOOD_KEY,
    st.sampled_from(["", "k" * 64, "k" * 65, "\ud800", "a\udfffb", 1e300, True]),
    st.one_of(st.floats(), st.none(), st.lists(st.integers(), max_size=2)),
)
"""Mostly keys the rules accept, so that lines get on to the rules after the key."""
OBJECT = st.fixed_dictionaries(
    {
        "key": KEY,
        "text": st.one_of(st.text(min_size=1, max_size=40), TEXT, st.integers(), st.just(None)),
    },
    optional={
        "id": st.one_of(st.text(min_size=1, max_size=5), st.sampled_from(["", 0, None, []])),
        "parts": st.one_of(st.lists(PART, max_size=3), st.just("not a list"), JSON_VALUES),
        "meta": JSON_VALUES,
        "blob": st.sampled_from([0, 8, 660, 670, 675, 680, 690, 720, 5960]).map(lambda n: "x" * n),
    },
)


@st.composite
def lines(draw: st.DrawFn) -> tuple[str, Any]:
    """One input line, and its object (before `fz` is added) when it is meant as one."""
    shape = draw(st.sampled_from(["object", "mutated", "object", "nested", "object", "junk"]))
    if shape == "junk":
        return draw(
            st.one_of(st.text(max_size=60), INVALID_UTF8, JSON_VALUES.map(json.dumps))
        ), None
    obj = draw(OBJECT)
    if draw(st.sampled_from(["keep"] * 9 + ["drop"])) == "drop":  # earlier items come first
        del obj["key"]
    if shape == "nested":
        depth = draw(st.sampled_from([10, 11, 12, 13, 40, 300]))
        obj["meta"] = json.loads("[" * depth + "]" * depth)
    mutations = ["number", "lone", "raw", "truncate"] if shape == "mutated" else ["none"]
    return "", (obj, draw(st.sampled_from(mutations)), draw(NUMBER_TEXT), draw(LONE))


def _render(index: int, drawn: tuple[str, Any]) -> str:
    """The line as sent: a drawn object gets `fz` first, then its mutation is applied."""
    text, spec = drawn
    if spec is None:
        return text
    obj, mutation, number, lone = spec
    line = json.dumps({"fz": index, **obj}, ensure_ascii=index % 2 == 0)
    if mutation == "number":
        line = line[:-1] + f', "score": {number}}}'
    elif mutation == "lone":
        line = line[:-1] + f', "note": "a{lone}b"}}'
    elif mutation == "raw":
        line = line[:-1] + ', "note": "a\ud800b"}'
    elif mutation == "truncate":
        line = line[: max(1, len(line) // 2)]
    return line


DRAWN: list[tuple[str, Any]] = []


@settings(
    max_examples=GENERATED,
    database=None,
    derandomize=True,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
    deadline=None,
)
@given(lines())
def _collect(drawn: tuple[str, Any]) -> None:
    """Hypothesis draws; the job runs what was drawn (a @given test collects, then one job)."""
    DRAWN.append(drawn)


def good_lines(start: int) -> list[str]:
    """Lines every rule accepts, each with an id and its `fz` number."""
    picture = base64.b64encode(PNG).decode()
    shapes = [
        {"text": "hello"},
        {"text": "with a picture", "parts": [{"kind": "image", "mime_type": "image/png",
                                              "data": picture}]},
        {"parts": [{"kind": "image", "mime_type": "image/png", "url": "https://x.invalid/a.png"}]},
        {"text": "unicode ✓ 😀 \u00e9", "meta": {"deep": [[[1, 2.5, None, True]]]}},
    ]  # fmt: skip
    return [
        json.dumps({"fz": start + i, "id": f"good-{i}", "key": f"g{i % 7}", **shapes[i % 4]})
        for i in range(40)
    ]


def _answer(request: Any) -> StubReply:
    return StubReply(
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]},
                         "finishReason": "STOP"}]}
    )  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Draw the lines, run them all through one job, and return lines and records."""
    root = tmp_path_factory.mktemp("fuzz-job")
    DRAWN.clear()
    _collect()
    sent = [_render(i, drawn) for i, drawn in enumerate(DRAWN)]
    sent += good_lines(len(sent))
    with LoopbackStubServer(_answer) as stub:
        env = StreamExecutionEnvironment.get_execution_environment(
            configure_environment(Configuration())
        )
        env.set_parallelism(2)
        config = AgentConfig(
            job_id="fuzz-job",
            model=ModelSpec(
                provider="gemini",
                model="gemini-3-flash-preview",
                options={"api_key": "test-key", "base_url": stub.url, "max_retries": 0},
            ),
            input_limits=LIMITS,
            media_store=str(root / "media"),
            offload_threshold_bytes=1024,
            event_log_level="off",
        )
        records = env.from_collection(sent, type_info=Types.STRING())
        streams = agent_stream(records, config)
        tagged = streams.outputs.map(lambda s: ("output", s), Types.PICKLED_BYTE_ARRAY()).union(
            streams.dead_letters.map(lambda s: ("dead", s), Types.PICKLED_BYTE_ARRAY())
        )
        with tagged.execute_and_collect("fuzz-job") as results:
            emitted = list(results)
    outputs = [json.loads(text) for kind, text in emitted if kind == "output"]
    dead = [json.loads(text) for kind, text in emitted if kind == "dead"]
    figures = {
        "lines": len(sent),
        "generated": len(DRAWN),
        "outputs": Counter(o["status"] for o in outputs),
        "dead_letters": Counter(d["error_type"] for d in dead),
    }
    print(f"\nfuzzing through a job: {json.dumps(figures)}")
    (root / "fuzz_job.json").write_text(json.dumps(figures, indent=2))
    return {"sent": sent, "outputs": outputs, "dead": dead}


def as_received(line: str) -> str:
    """The line as the job receives it: Flink's STRING type cannot carry a raw lone
    surrogate, and the Python-to-Java hand-over turns each into U+FFFD."""
    return RAW_SURROGATE.sub("\ufffd", line)


def test_every_line_yields_exactly_one_output_or_one_parse_dead_letter(
    run: dict[str, Any],
) -> None:
    outputs = Counter(o["attributes"]["fz"] for o in run["outputs"])
    assert set(outputs.values()) <= {1}, outputs.most_common(3)
    parse_dead = Counter(d["input"] for d in run["dead"] if d["stage"] == "parse")
    expected_dead = Counter(
        as_received(line) for i, line in enumerate(run["sent"]) if i not in outputs
    )
    assert parse_dead == expected_dead


def test_known_good_lines_are_all_answered(run: dict[str, Any]) -> None:
    good = {o["id"]: o for o in run["outputs"] if str(o["id"]).startswith("good-")}
    assert sorted(good) == sorted(f"good-{i}" for i in range(40))
    assert {o["status"] for o in good.values()} == {"ok"}


def test_run_dead_letters_only_come_with_an_error_output(run: dict[str, Any]) -> None:
    errors = {o["run_id"] for o in run["outputs"] if o["status"] == "error"}
    for letter in run["dead"]:
        if letter["stage"] != "parse":
            assert letter["stage"] == "run" and letter["id"] in errors, letter["error_type"]


def test_dead_letters_name_a_documented_rule_without_traceback_or_payload(
    run: dict[str, Any],
) -> None:
    for letter in run["dead"]:
        if letter["stage"] != "parse":
            continue
        assert letter["error_type"] in DOCUMENTED_TYPES, letter
        reason = letter["reason"]
        assert reason.strip(), letter
        assert "Traceback" not in reason and 'File "' not in reason, reason
        assert not PAYLOAD_RUN.search(reason), reason


def test_the_job_applies_the_rules_parse_input_applies(run: dict[str, Any]) -> None:
    answered = {o["attributes"]["fz"] for o in run["outputs"]}
    refused = {d["input"]: d["error_type"] for d in run["dead"] if d["stage"] == "parse"}
    for index, line in enumerate(run["sent"]):
        received = as_received(line)
        try:  # the job's source keeps the default media rules: no refs, https URLs only
            check_media_sources(parse_input(received, "key", LIMITS), InputMedia())
        except InputError as error:
            assert refused.get(received) == error.error_type, (index, str(error))
        else:
            assert index in answered, index
