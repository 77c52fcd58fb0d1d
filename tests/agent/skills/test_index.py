"""Progressive disclosure: only `name: description` lines enter the prompt, within budget."""

from __future__ import annotations

from pathlib import Path

from talaria.agent.context import tokens
from talaria.agent.skills.index import (
    GUIDANCE,
    PROMPT_CHARS_MAX,
    budget_chars,
    fit,
    skills_section,
)
from talaria.tools.skills.format import DESCRIPTION_MAX, Skill
from tests.fakellm import FakeLLM
from tests.helpers import make_session
from tests.tools.skills.helpers import skill_md

WORDS = ["parse", "configure", "deploy", "migrate", "benchmark", "profile", "refactor", "document", "release", "audit"]


def skills(n: int, description_chars: int = 200) -> list[Skill]:
    out = []
    for i in range(n):
        name = f"{WORDS[i % 10]}-{WORDS[(i // 10) % 10]}-task-{i}"
        text = (f"Use when you {WORDS[i % 10]} a service that needs {WORDS[(i + 3) % 10]} steps; "
                "covers the checks, the commands and the usual failures. ") * 10
        out.append(Skill(name, text[:description_chars], "body never listed", {}, Path(name)))
    return out


def test_budget_is_two_percent_of_the_window_capped() -> None:
    assert budget_chars(32_768) == int(32_768 * 0.02 * 4)
    assert budget_chars(1_000_000) == PROMPT_CHARS_MAX


def test_hundred_skills_cost_at_most_1500_tokens() -> None:
    section = skills_section(skills(100, DESCRIPTION_MAX), 1_000_000)
    assert tokens.count(section) <= 1_500
    assert "body never listed" not in section
    assert all(s.name in section for s in skills(100))  # shortened, but every one is listed


def test_few_skills_keep_whole_descriptions() -> None:
    few = skills(3, 150)
    text = fit(few, budget_chars(128_000))
    assert all(f"- {s.name}: {s.description}" in text for s in few)


def test_too_many_skills_are_cut_with_a_count_and_a_hint() -> None:
    many = skills(1000)
    text = fit(many, budget_chars(128_000))
    listed = [line for line in text.splitlines() if line.startswith("- ")]
    assert len(text) <= budget_chars(128_000) and tokens.count(text) <= 1_400
    assert text.splitlines()[-1] == \
        f"… and {1000 - len(listed)} more skills not listed: call skills_list to see them all."


def test_a_small_window_lists_less() -> None:
    text = fit(skills(100), budget_chars(8_192))
    assert len(text) <= budget_chars(8_192) and "skills_list" in text


def test_a_session_prompt_lists_skills_and_frozen_memory(fake_llm: FakeLLM, tmp_path: Path) -> None:
    folder = tmp_path / ".home/skills/fix-flaky-pytest"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(skill_md("fix-flaky-pytest", "Fix flaky pytest tests", "SECRET BODY"))
    memories = tmp_path / ".home/memories"
    memories.mkdir()
    (memories / "USER.md").write_text("Prefers tabs.\n")
    session = make_session(fake_llm, tmp_path)
    prompt = session.messages[0]["content"]
    assert GUIDANCE in prompt and "- fix-flaky-pytest: Fix flaky pytest tests" in prompt
    assert "SECRET BODY" not in prompt and "- Prefers tabs." in prompt
    assert session.tool("skill_manage") is not None and session.tool("memory") is not None
