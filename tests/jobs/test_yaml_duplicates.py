"""A key given twice in one YAML mapping is refused with both lines: a spec cannot hide a
second value behind the first (YAML itself would keep the last one silently)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamagents.jobs.cli.main import main
from streamagents.jobs.spec.yaml_source import YamlRuleError, load_yaml

HIDDEN_APPROVAL = """\
name: desk
agent:
  tools:
    - ref: "shop:refund"
      approval: required
      approval_timeout_s: 60
      approval: none
"""


def test_a_second_approval_key_is_refused_with_both_lines() -> None:
    with pytest.raises(YamlRuleError) as refused:
        load_yaml(HIDDEN_APPROVAL)
    assert refused.value.line == 7
    assert refused.value.path == ("agent", "tools", 0, "approval")
    assert "given twice, on lines 5 and 7" in refused.value.message


def test_validate_names_the_duplicate_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: a\nparallelism: 1\nname: b\n")
    assert main(["validate", str(spec)]) == 2
    err = capsys.readouterr().err
    assert f"{spec}:3: name: key 'name' is given twice, on lines 1 and 3" in err


@pytest.mark.parametrize(
    "text",
    [
        "a: {x: 1, x: 2}\n",  # flow mapping
        "a: 1\n'a': 2\n",  # quoting does not make another key
        "a:\n  - {k: 1}\n  - {k: 2, k: 3}\n",  # inside a list
    ],
)
def test_every_form_of_a_repeated_key_is_refused(text: str) -> None:
    with pytest.raises(YamlRuleError, match="given twice"):
        load_yaml(text)


def test_equal_keys_in_different_mappings_are_fine() -> None:
    loaded = load_yaml("a: {x: 1}\nb: {x: 2}\nc: [{x: 1}, {x: 2}]\n")
    assert loaded.data == {"a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 1}, {"x": 2}]}
