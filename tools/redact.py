"""Secret redaction for every export: one set of patterns, applied to every string.

What is caught (each pattern has a test, and so does code that must survive untouched):

    sk-ant-..., sk-..., sk-proj-...        OpenAI / Anthropic API keys (16+ characters)
    ghp_ gho_ ghu_ ghs_ ghr_ github_pat_   GitHub tokens
    AKIA... / ASIA...                      AWS access key ids
    xoxb- xoxp- xoxa- xoxr- xoxs-          Slack tokens
    Bearer <token>                         HTTP authorization headers
    OPENAI_API_KEY=..., GITHUB_TOKEN=...   env-style assignments whose UPPER_CASE name ends in
    DB_PASSWORD=..., AWS_SECRET=...        KEY, TOKEN, SECRET, PASSWORD or PASSWD (no spaces
                                           around `=` unless the value is quoted)
    "api_key": "...", "password": "..."    JSON / YAML fields with secret-like names
    -----BEGIN ... PRIVATE KEY----- ...    PEM private key blocks (also truncated ones)

Lower-case code (`api_key = os.environ[...]`, `token = next(tokens)`, `max_tokens=100`) is
left alone: redaction that mangles code makes training data worse than no redaction.
Image data (`data:` URLs, `{"type": "image", "data"}` parts) is never scanned: base64 can
spell anything.
"""

from __future__ import annotations

import re
from typing import Any

MARK = "[REDACTED]"

# A word start, also right after an escaped newline or tab: tool results are JSON text, where a
# line break is the two characters `\` `n`, and `\b` between "n" and a name would not match.
_B = r"(?:(?<![A-Za-z0-9_])|(?<=\\[nrt]))"
_KEY_NAME = r"(?:[A-Z0-9]+_)*(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD)"
_FIELD_NAME = (r"[A-Za-z0-9_-]*(?:api[_-]?key|apikey|secret|password|passwd|access[_-]?token"
               r"|auth[_-]?token|refresh[_-]?token|private[_-]?key)")

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # PEM blocks first, whole; then a block cut short (a truncated read): its base64 body,
    # plain or JSON-escaped, up to the first character that cannot be part of it.
    (re.compile(r"(-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----)[\s\S]*?(-----END \2PRIVATE KEY-----)"),
     r"\1" + MARK + r"\3"),
    (re.compile(r"(-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----)(?:[A-Za-z0-9+/=\s]|\\[nrt])+"),
     r"\1" + MARK),
    (re.compile(_B + r"sk-ant-[A-Za-z0-9_-]{16,}"), "sk-ant-" + MARK),
    (re.compile(_B + r"sk-[A-Za-z0-9_-]{16,}"), "sk-" + MARK),
    (re.compile(_B + r"(gh[pousr]_)[A-Za-z0-9]{20,}"), r"\1" + MARK),
    (re.compile(_B + r"github_pat_[A-Za-z0-9_]{20,}"), "github_pat_" + MARK),
    (re.compile(_B + r"(AKIA|ASIA)[0-9A-Z]{16}\b"), r"\1" + MARK),
    (re.compile(_B + r"(xox[bpars]-)[A-Za-z0-9-]{10,}"), r"\1" + MARK),
    # Bearer <token>: the token has a digit or is long, so "Bearer authentication" survives.
    (re.compile(_B + r"(Bearer\s+)(?:(?=[\w.~+/=-]*\d)[\w.~+/=-]{8,}|[\w.~+/=-]{20,})"),
     r"\1" + MARK),
    # KEY=value, export KEY="value", KEY = 'value'; not KEY=$OTHER (a reference, no secret).
    (re.compile(_B + r"(" + _KEY_NAME + r")(=|\s*[:=]\s*(?=\\?[\"']))(\\?[\"']?)"
                r"(?![\s\"'\\$])[^\s\"'\\]+"),
     r"\1\2\3" + MARK),
    # "api_key": "value" / api_key: "value" (JSON, YAML, Python dict literals).
    (re.compile(r"(\\?[\"']?" + _B + _FIELD_NAME + r"\\?[\"']?\s*:\s*(\\?[\"']))(?!\2)(?:(?!\2).)+",
                re.IGNORECASE),
     r"\1" + MARK),
)

_DATA_URL = re.compile(r"^data:[\w.+-]+/[\w.+-]+;base64,")
_NEEDED = ("sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "akia", "asia", "xox",
           "bearer", "key", "token", "secret", "passw")
"""Lower-cased text one of the patterns above needs: most text holds none, and looking for
them costs a small fraction of running the patterns."""


def redact_text(text: str) -> str:
    """`text` with every secret replaced by a marker that keeps the secret's kind."""
    if _DATA_URL.match(text):
        return text
    lowered = text.lower()
    if not any(needed in lowered for needed in _NEEDED):
        return text
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact(value: Any) -> Any:
    """A copy of a JSON-like value with `redact_text` applied to every string in it."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    if isinstance(value, dict):
        if value.get("type") == "image":  # internal and ATIF image parts: data stays as is
            return {k: v if k in ("data", "source") else redact(v) for k, v in value.items()}
        return {k: redact(v) for k, v in value.items()}
    return value
