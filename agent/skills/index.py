"""The skills section of the system prompt: names and descriptions only (progressive
disclosure), within a budget.

Listing every skill's full text makes weak models stop loading skills (a Hermes complaint).
The list is `- name: description` lines within `budget_chars(window)` — `PROMPT_SHARE` of the
context window (at 4 characters a token), at most `PROMPT_CHARS_MAX` — and `PROMPT_TOKENS_MAX`
tokens (cl100k). Past the budget, descriptions are shortened to the longest width that fits (not below
`MIN_DESCRIPTION`, else names only);
when names alone do not fit, the list is cut and says how many were left out and to call
`skills_list`.
"""

from __future__ import annotations

from talaria.agent.context import tokens
from talaria.tools.skills.format import Skill

PROMPT_SHARE = 0.02
PROMPT_CHARS_MAX = 8_000
PROMPT_TOKENS_MAX = 1_400
"""Tokens of the list (100 installed skills must cost at most 1,500 with the guidance)."""
CHARS_PER_TOKEN = 4
MIN_DESCRIPTION = 24
"""Shorter descriptions than this say nothing: then names only."""

GUIDANCE = """\
# Skills
Skills are saved procedures: when one below fits the task, skill_view(name) it first and \
follow it. After a hard-won success (many steps, trial and error, a user's correction), save \
it with skill_manage: patch the skill you used (view it first) or create one focused skill \
with checked steps. Never save secrets."""
FIRST_SKILL = """\
# Skills
After a hard-won success (many steps, trial and error, a user's correction), save the \
procedure as a skill with skill_manage: one focused skill with checked steps. Never save \
secrets."""
"""With no skill installed yet: nothing to load, only when to save one."""


def budget_chars(context_window: int) -> int:
    return min(PROMPT_CHARS_MAX, int(context_window * PROMPT_SHARE * CHARS_PER_TOKEN))


def skills_section(skills: list[Skill], context_window: int) -> str:
    """The guidance, then the list of installed skills fitted into the budget."""
    if not skills:
        return FIRST_SKILL
    return f"{GUIDANCE}\nInstalled skills:\n{fit(skills, budget_chars(context_window))}"


def fit(skills: list[Skill], budget: int, token_cap: int = PROMPT_TOKENS_MAX) -> str:
    """`- name: description` lines within `budget` characters and `token_cap` tokens."""
    ordered = sorted(skills, key=lambda s: s.name)

    def render(width: int | None) -> str | None:
        text = "\n".join(_line(s, width) for s in ordered)
        fits = len(text) <= budget and (tokens.bound(text) <= token_cap or tokens.count(text) <= token_cap)
        return text if fits else None  # the bound first: a small list needs no tokenizer

    if (whole := render(None)) is not None:
        return whole
    # The longest description width that fits, by bisection (each try counts tokens once).
    low, high = MIN_DESCRIPTION, max(len(s.description) for s in ordered)
    best = None
    while low <= high:
        middle = (low + high) // 2
        if (text := render(middle)) is not None:
            best, low = text, middle + 1
        else:
            high = middle - 1
    if best is not None or (best := render(0)) is not None:
        return best
    lines: list[str] = []
    used = used_tokens = 0
    for skill in ordered:
        line = _line(skill, 0)
        cost = tokens.count(line) + 1
        # Room is kept for the closing line that counts what was left out.
        if used + len(line) + 1 > budget - 120 or used_tokens + cost > token_cap - 40:
            break
        lines.append(line)
        used, used_tokens = used + len(line) + 1, used_tokens + cost
    left = len(ordered) - len(lines)
    lines.append(f"… and {left} more skills not listed: call skills_list to see them all.")
    return "\n".join(lines)


def _line(skill: Skill, width: int | None) -> str:
    if width == 0:
        return f"- {skill.name}"
    text = skill.description
    if width is not None and len(text) > width:
        text = text[: width - 1].rsplit(" ", 1)[0].rstrip(",.;:") + "…"
    return f"- {skill.name}: {text}"
