"""What a skill or memory must not contain, and when a new skill is a near-duplicate.

Each check returns a sentence the model can act on, or None. Skills and memories enter future
system prompts, so whatever is saved here is an instruction to every later session: a leaked
key would be repeated, an injected "ignore previous instructions" would be obeyed.

Near-duplicates (Hermes users ended up with 22 never-used near-copies among 152 skills): a new
skill is refused when its name is at least `NAME_SIMILARITY` alike to an existing name
(difflib ratio, hyphens as spaces), or when the words of its description and body overlap an
existing skill's by at least `TEXT_SIMILARITY` (Jaccard index of the sets of words of 3+
letters). The refusal names the skill to patch instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from talaria.tools.redact import redact_text
from talaria.tools.skills.format import Skill

NAME_SIMILARITY = 0.85
TEXT_SIMILARITY = 0.6
_WORD = re.compile(r"[a-z][a-z0-9_]{2,}")

# Prompt-injection and exfiltration phrasings, as they appear in poisoned skills and notes,
# searched case-blind. Strings: `re` compiles (and caches) them at the first check; compiled
# here, they cost every session's opening ~1 ms (the memory tool's store imports this module).
_INJECTION = (
    r"\b(ignore|disregard|forget|override)\b.{0,40}\b(previous|prior|above|earlier|system|all)\b"
    r".{0,20}\b(instructions?|prompts?|rules?|guidelines?)",
    r"\byou are no longer\b|\bnew system prompt\b|\bact as (an? )?unrestricted\b",
    r"\b(send|upload|post|exfiltrate|transmit|leak|forward|email)\b.{0,60}"
    r"(secrets?|credentials?|api[ _-]?keys?|tokens?|passwords?|\.env\b|\.ssh|id_rsa|private keys?)",
    r"\b(curl|wget|nc|netcat)\b[^\n]{0,120}(\$\{?[A-Z_]*(KEY|TOKEN|SECRET|PASSWORD)|\.ssh/|\.env\b"
    r"|/etc/passwd|credentials)",
    r"\b(disable|bypass|turn off|skip|circumvent)\b.{0,30}\b(sandbox|safety|permissions?|"
    r"guardrails?|approvals?|confirmation|security checks?)",
    r"dangerously-skip-permissions|TALARIA_MODE\s*=\s*bypass",
)


def secret_problem(text: str) -> str | None:
    """Why `text` must not be saved because it holds a credential, or None."""
    redacted = redact_text(text)
    if redacted == text:
        return None
    line = next((r for r, o in zip(redacted.splitlines(), text.splitlines(), strict=False) if r != o),
                "[REDACTED]")
    return ("refused: the content contains what looks like a credential "
            f"({line.strip()[:120]}). Never save secrets; refer to an environment variable "
            "by name instead (e.g. $OPENAI_API_KEY).")


def injection_problem(text: str) -> str | None:
    """Why `text` must not be saved because it reads as prompt injection, or None."""
    for pattern in _INJECTION:
        match = re.search(pattern, text, re.IGNORECASE)
        if match:
            return ("refused: the content contains an instruction to exfiltrate data or to "
                    f"override or disable safety ({match.group(0)[:80]!r}). Saved text becomes "
                    "a future prompt; describe the procedure without such instructions.")
    return None


def content_problem(text: str) -> str | None:
    return secret_problem(text) or injection_problem(text)


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def similarity(a: str, b: str) -> float:
    """Jaccard index of the two texts' word sets."""
    wa, wb = words(a), words(b)
    if not wa or not wb:
        return 0.0
    return len(wa & wb) / len(wa | wb)


def name_similarity(a: str, b: str) -> float:
    import difflib  # when a skill is saved: not on every start

    return difflib.SequenceMatcher(None, a.replace("-", " "), b.replace("-", " ")).ratio()


def near_duplicate(name: str, text: str, existing: Iterable[Skill]) -> tuple[Skill, str] | None:
    """The first existing skill the new one nearly duplicates, and how."""
    for skill in existing:
        if skill.name == name:
            continue
        if (ratio := name_similarity(name, skill.name)) >= NAME_SIMILARITY:
            return skill, f"its name is {ratio:.0%} alike"
        if (share := similarity(text, f"{skill.description}\n{skill.body}")) >= TEXT_SIMILARITY:
            return skill, f"{share:.0%} of its words are the same"
    return None
