"""SKILL.md parsing and checks (the Agent Skills spec), with a real YAML parser."""

from __future__ import annotations

import pytest

from talaria.tools.skills.format import (
    DESCRIPTION_MAX,
    NAME_MAX,
    SkillFormatError,
    check_name,
    parse,
    render,
)


def test_parses_yaml_a_hand_parser_gets_wrong() -> None:
    text = ('---\nname: pdf-tools\ndescription: >-\n  Extract text: tables, forms\n  and "quotes".\n'
            'license: Apache-2.0\nallowed-tools: [Bash, Read]\nmetadata:\n  author: "x: y"\n---\n# Body\n')
    meta, body = parse(text, "pdf-tools")
    assert meta["description"] == 'Extract text: tables, forms and "quotes".'
    assert meta["allowed-tools"] == ["Bash", "Read"]
    assert meta["metadata"] == {"author": "x: y"}
    assert body == "# Body\n"


@pytest.mark.parametrize("name", ["", "Upper", "-lead", "trail-", "dou--ble", "sp ace", "a_b",
                                  "x" * (NAME_MAX + 1)])
def test_bad_names_are_refused_with_the_rule(name: str) -> None:
    with pytest.raises(SkillFormatError):
        check_name(name)


def test_name_limit_is_inclusive() -> None:
    assert check_name("x" * NAME_MAX) == "x" * NAME_MAX


@pytest.mark.parametrize("text, why", [
    ("no frontmatter", "must start with YAML frontmatter"),
    ("---\nname: [unclosed\n---\n", "not valid YAML"),
    ("---\n- a list\n---\n", "mapping"),
    ("---\nname: other\ndescription: d\n---\n", "must equal its folder name"),
    ("---\nname: ok\n---\n", "needs a description"),
    ("---\nname: ok\ndescription: " + "d" * (DESCRIPTION_MAX + 1) + "\n---\n", "at most 1024"),
    ("---\nname: ok\ndescription: d\nmetadata: text\n---\n", "metadata must be a mapping"),
])
def test_format_errors_say_what_to_fix(text: str, why: str) -> None:
    with pytest.raises(SkillFormatError, match=why):
        parse(text, "ok")


def test_render_round_trips() -> None:
    meta = {"metadata": {"created_by": "agent"}, "description": "Does: things", "name": "x-y"}
    again, body = parse(render(meta, "# B\ntext"), "x-y")
    assert again == meta
    assert list(again)[:2] == ["name", "description"]
    assert body == "# B\ntext\n"


def test_a_colon_in_a_plain_description_is_forgiven() -> None:
    meta, _ = parse("---\nname: ok\ndescription: Use when: the build fails\n---\nbody", "ok")
    assert meta["description"] == "Use when: the build fails"
