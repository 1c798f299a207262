"""docs/diagnostics.md and the rule table (jaxviz/diagnostics/rules.py) say the same things:
the same rules in the same order, each section opening with its rule's summary and showing
its rule's hints."""
from __future__ import annotations

import pathlib
import re

import pytest

from jaxviz.diagnostics import diagnostic
from jaxviz.diagnostics.rules import RULES, SEVERITIES

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "diagnostics.md"
NOT_RULES = {"Limits"}          # the doc's sections that are not rules


def norm(text: str) -> str:
    """Whitespace runs as one space: the doc may wrap what the code writes on one line."""
    return " ".join(text.split())


def sections() -> dict[str, str]:
    """{heading: body} of the doc's `## ` sections, in the doc's order."""
    parts = re.split(r"(?m)^## (.+)\n", DOC.read_text())
    return dict(zip(parts[1::2], parts[2::2]))


def rule_sections() -> dict[str, str]:
    return {h: b for h, b in sections().items() if h not in NOT_RULES}


def section(name: str) -> str:
    body = rule_sections().get(name)
    assert body is not None, f"{name}: no `## {name}` section in {DOC.name}"
    return body


def blocks(body: str, lang: str) -> list[str]:
    return re.findall(rf"(?ms)^```{lang}\n(.*?)^```$", body)


def test_every_doc_section_is_a_rule_name():
    for heading in rule_sections():
        assert re.fullmatch(r"[a-z][a-z0-9-]*", heading), \
            f"section {heading!r} is neither a rule name nor one of {NOT_RULES}"


def test_doc_lists_the_table_s_rules_in_its_order():
    doc = list(rule_sections())
    missing = [r for r in RULES if r not in doc]
    unknown = [r for r in doc if r not in RULES]
    assert not missing, f"rules without a section in {DOC.name}: {missing}"
    assert not unknown, f"sections of {DOC.name} not in jaxviz/diagnostics/rules.py: {unknown}"
    assert doc == list(RULES)


def test_diagnostic_checks_rules_against_the_table():
    assert diagnostic.RULES == tuple(RULES)
    with pytest.raises(ValueError):
        diagnostic.Diagnostic(rule="no-such-rule", severity="error", message="")


@pytest.mark.parametrize("name", list(RULES))
def test_entry_is_complete(name):
    rule = RULES[name]
    assert rule.name == name
    assert rule.severity in SEVERITIES
    assert rule.summary.strip() and rule.summary.endswith(".")
    assert rule.hint.strip()
    assert "\n    bad:  " in rule.hint and "\n    good: " in rule.hint, \
        f"{name}: the hint has no bad -> good example"
    names = [v for v, _h in rule.variants]
    assert len(set(names)) == len(names) and all(names)
    assert all(h.strip() for _v, h in rule.variants)
    assert rule.hint_for() == rule.hint
    assert [rule.hint_for(v) for v in names] == list(rule.hints[1:])


@pytest.mark.parametrize("name", list(RULES))
def test_doc_section_opens_with_the_summary(name):
    prose = section(name).split("```", 1)[0]
    assert norm(prose).startswith(norm(RULES[name].summary)), \
        f"{name}: the section does not open with the table's summary"


@pytest.mark.parametrize("name", list(RULES))
def test_doc_shows_the_table_s_hints(name):
    texts = blocks(section(name), "text")
    assert len(texts) == 1, f"{name}: expected one ```text block with the rule's hints"
    shown = [norm(p) for p in re.split(r"\n\s*\n", texts[0]) if p.strip()]
    assert shown == [norm(h) for h in RULES[name].hints]
