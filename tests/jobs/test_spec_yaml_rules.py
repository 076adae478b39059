"""YAML a job spec refuses: every case exits 2 with one `file:line: field: message` line,
never a traceback, and never expands an alias."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamagents.jobs.cli.main import main

EXAMPLE = Path(__file__).resolve().parents[2] / "jobs" / "examples" / "support_tickets.yaml"

BILLION_LAUGHS = "\n".join(
    ["name: lol", 'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
)

CASES = {
    "billion_laughs": (BILLION_LAUGHS, 3, "a1[0]", "YAML aliases (*a0) are not allowed"),
    "alias": (
        "name: x\nagent: &agent {max_in_flight: 1}\nother: *agent\n",
        3,
        "other",
        "YAML aliases (*agent) are not allowed",
    ),
    "merge_key": (
        "name: x\nagent:\n  <<: {max_in_flight: 1}\n",
        3,
        "agent",
        "merge keys (<<) are not allowed",
    ),
    "python_tag": (
        "name: x\nkey: !!python/object:os.system {}\n",
        2,
        "key",
        "YAML tag !!python/object:os.system is not allowed",
    ),
    "custom_tag": ("name: x\nagent:\n  model: !custom x\n", 3, "agent.model", "tag !custom"),
    "list_key": ("name: x\n? [a, b]\n: 1\n", 2, "", "expected a plain key, got a list as a key"),
    "mapping_key": ("name: x\nagent:\n  {a: 1}: 2\n", 3, "agent", "got a mapping as a key"),
    "deep_nesting": (
        "name: x\nagent: " + "[" * 200 + "]" * 200 + "\n",
        2,
        "agent" + "[0]" * 31,
        "nested more than 32 levels",
    ),
    "thousands_of_brackets": (
        "name: x\nagent: " + "[" * 20000 + "]" * 20000 + "\n",
        2,
        "",
        "more than 256 nested [ or {",
    ),
    "deep_mappings": (
        "name: x\nsinks: " + "{a: " * 200 + "1" + "}" * 200 + "\n",
        2,
        "sinks" + ".a" * 31,
        "nested more than 32 levels",
    ),
    "hex_number": ("name: x\nparallelism: 0x_\n", 2, "parallelism", "cannot read '0x_' as an"),
    "tagged_number": ("name: x\nparallelism: !!int ten\n", 2, "parallelism", "as an integer"),
    "bad_date": ("name: x\nkey: 2024-13-45\n", 2, "key", "cannot read '2024-13-45' as a date"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_refused_yaml_exits_2_with_one_located_line(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, line, field, message = CASES[case]
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    assert main(["validate", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[0] == "invalid job spec:" and len(lines) == 2, err
    where = f"{spec}:{line}: " + (f"{field}: " if field else "")
    assert lines[1].startswith(where) and message in lines[1], lines[1]


def test_yaml_syntax_error_is_located(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: x\nsinks: [unclosed\n")
    assert main(["validate", str(spec)]) == 2
    assert re.search(
        rf"^{re.escape(str(spec))}:\d+: not valid YAML: line", capsys.readouterr().err, re.M
    )


def test_a_file_that_is_not_utf8_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_bytes(b"name: \xff\xfe\n")
    assert main(["validate", str(spec)]) == 2
    assert "not UTF-8 text" in capsys.readouterr().err


def test_plain_yaml_types_and_quoted_values_still_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    text = EXAMPLE.read_text().replace("max_in_flight: 16", "max_in_flight: !!int 16")
    spec = EXAMPLE.parent / "_tmp_rules_spec.yaml"  # relative paths resolve next to the example
    spec.write_text(text)
    try:
        assert main(["validate", str(spec)]) == 0
    finally:
        spec.unlink()


_YAMLISH = st.lists(
    st.sampled_from(
        [
            "name: x\n",
            "key: a.b\n",
            "agent:\n",
            "  model: {provider: demo, model: d}\n",
            "  - ",
            "- ",
            ": ",
            "? ",
            "&a ",
            "*a ",
            "<<: ",
            "!!python/object ",
            "!x ",
            "[",
            "]",
            "{",
            "}",
            ",",
            "0x_",
            "1e9",
            "2024-13-45",
            "'",
            '"',
            "#",
            "\n",
            "  ",
            "\t",
            "${X}",
            "|\n",
            ">\n",
            "---\n",
            "...\n",
            "%YAML 1.1\n",
            "null",
            "~",
            "=",
            "\x00",
            "\ufeff",
        ]
    ),
    max_size=30,
).map("".join)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.one_of(st.text(max_size=200), _YAMLISH))
def test_validate_never_raises_on_any_text(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "fuzz.yaml"
    spec.write_text(text, encoding="utf-8", errors="surrogatepass")
    assert main(["validate", str(spec)]) in (0, 2)
    assert "Traceback" not in capsys.readouterr().err
