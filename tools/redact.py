"""Secret redaction for every export and for recall: one set of rules, applied to every string.

What is caught (each shape has a test; a property test generates them in generated text, and
another checks that the repo's own source mostly survives untouched):

    sk-ant-..., sk-proj-..., sk-...        OpenAI / Anthropic API keys (16+ characters)
    ghp_ gho_ ghu_ ghs_ ghr_ github_pat_   GitHub tokens; glpat- (GitLab), hf_ (Hugging Face),
    npm_, pypi-, AIza (Google), sk_live_ / rk_test_ (Stripe), xox[abposr]- / xapp- (Slack),
    SG. (SendGrid), dop_v1_ (DigitalOcean), shpat_ (Shopify)
    AKIA... / ASIA... / AGPA... ...        AWS key ids
    eyJ....eyJ....sig                      JSON Web Tokens
    Bearer <token>, Authorization: Basic   HTTP authorization headers
    scheme://user:password@host            credentials in URLs (the password part)
    NAME=value, NAME: value, "NAME": "v"   a secret-like NAME in any case and any word-joined
    --NAME value                           form (password, passwd, pwd, passphrase, secret,
                                           token, api_key, client_secret, db_password,
                                           X-Api-Key, ...; `KEY` alone only in UPPER case)
    -----BEGIN ... PRIVATE KEY----- ...    PEM private key blocks (also truncated ones)
    high-entropy runs                      32+ characters of base64 with upper and lower case,
                                           digits, and at least `ENTROPY_BITS` bits per char

A named value is taken for code, not a secret, when it is a reference or a template (`$X`,
`${X}`, `{x}`, `<your token>`, `%(x)s`), a call or subscript (`token = next(tokens)`,
`os.environ["X"]`), a bare identifier or dotted name (`password=password`, `token: str`,
`secret=self.secret`, `True`), a path (`PWD=/home/me`), or a placeholder (shorter than
`PLACEHOLDER_CHARS`, holding `...`, or fewer than `PLACEHOLDER_DIGITS` digits:
`CHARS_PER_TOKEN = 4`). Redaction that mangles code makes training data and recall worse
than no redaction.

Pure hex runs (git SHAs, sha256 digests, UUIDs) are never redacted by entropy: they are in
every transcript (`git log`, lockfiles, checksums) and recall is for finding them again; a hex
secret is caught when it is named (`api_key=...`, `token: ...`); nor are integrity digests
(`sha512-...`).
Image data (`data:` URLs, `{"type": "image", "data"}` parts) is never scanned: base64 can
spell anything. What a secret path held (`~/.ssh/id_rsa`, `.env`) is not found by shape: it is
withheld when the message is stored (`talaria.agent.withheld`, `WITHHELD`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import cache, lru_cache
from typing import Any, Final

MARK = "[REDACTED]"
WITHHELD: Final = "withheld"
"""The message key (and store column) naming the secret path a tool result's content came
from: such content never reaches recall, the search index or an export."""
ENTROPY_MIN_CHARS = 32
"""The shortest unnamed run judged by its entropy."""
MAX_PEM_CHARS = 16_384
"""The longest private key block looked for whole (an RSA 8192 key is ~6,400 characters). Its
body never holds `-----`, so a search stops at the next marker: text made of many BEGIN lines
stays linear. A longer block still loses its body to the cut-short rule."""
PLACEHOLDER_CHARS = 4
"""A named value shorter than this is a placeholder (`"x"`, `""`), not a secret."""
PLACEHOLDER_DIGITS = 6
"""A named value of fewer digits is a setting (`CHARS_PER_TOKEN = 4`); six make a PIN."""
ENTROPY_BITS = 4.0
"""Shannon entropy per character above which such a run is taken for a secret (random base64
of 32 characters has about 4.5; identifiers and words stay well under)."""

# A word start, also right after an escaped newline or tab: tool results are JSON text, where a
# line break is the two characters `\` `n`, and `\b` between "n" and a name would not match.
_B = r"(?:(?<![A-Za-z0-9_])|(?<=\\[nrt]))"
_E = r"(?![A-Za-z0-9_])"
_SECRET_WORD = (r"(?i:api[_-]?key|apikey|access[_-]?key|secret[_-]?key|private[_-]?key"
                r"|signing[_-]?key|client[_-]?secret|secret|password|passwd|passphrase|pwd"
                r"|token|credentials?)")
# Bounded parts: `(?:[A-Za-z0-9]+[_.-])*` tried again from every word start of "a-a-a-..."
# (minified code, a long dotted path) was quadratic: 100 KB held the GIL for a minute.
_NAME = r"(?:[A-Za-z0-9]{1,64}[_.-]){0,8}(?:" + _SECRET_WORD + r"|KEY)"
_Q = r"\\?[\"']"
_VALUE_END = "\\s\"'`\\\\,;()\\[\\]{}<>"
_REFERENCE = re.compile(r"^[$%*]")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z_]*(?:\.[A-Za-z_][A-Za-z_]*)*\.?$")
_PATH = re.compile(r"^(?:/|~/|\./|\.\./)")

# The shape rules are pattern strings here, compiled by `_rules` at the first text that needs
# them: every session's opening imports this module (through the store), and compiling them
# cost it ~4 ms whether or not anything was ever redacted.
_PREFIXED = (  # each after a word start (`_B`)
    (r"sk-ant-[A-Za-z0-9_-]{16,}", "sk-ant-" + MARK),
    (r"sk-[A-Za-z0-9_-]{16,}", "sk-" + MARK),
    (r"((?:sk|rk|pk)_(?:live|test)_)[A-Za-z0-9]{10,}", r"\1" + MARK),
    (r"(gh[pousr]_)[A-Za-z0-9]{20,}", r"\1" + MARK),
    (r"github_pat_[A-Za-z0-9_]{20,}", "github_pat_" + MARK),
    (r"(glpat-|glptt-|gldt-)[A-Za-z0-9_-]{20,}", r"\1" + MARK),
    (r"(hf_)[A-Za-z0-9]{30,}", r"\1" + MARK),
    (r"(npm_)[A-Za-z0-9]{36}", r"\1" + MARK),
    (r"(pypi-)[A-Za-z0-9_-]{50,}", r"\1" + MARK),
    (r"(AIza)[0-9A-Za-z_-]{35}", r"\1" + MARK),
    (r"(AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[0-9A-Z]{16}\b", r"\1" + MARK),
    (r"(xox[abposr]-|xapp-)[A-Za-z0-9-]{10,}", r"\1" + MARK),
    (r"(SG\.)[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}", r"\1" + MARK),
    (r"(dop_v1_|doo_v1_|shpat_|shpss_)[a-fA-F0-9]{32,}", r"\1" + MARK),
    (r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*", "eyJ" + MARK),
)
_PEM = (
    # PEM blocks first, whole; then a block cut short (a truncated read): its base64 body,
    # plain or JSON-escaped, up to the first character that cannot be part of it.
    (r"(-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----)(?:(?!-----)[\s\S]){0,"
     + str(MAX_PEM_CHARS) + r"}?(-----END \2PRIVATE KEY-----)", r"\1" + MARK + r"\3"),
    (r"(-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----)(?:[A-Za-z0-9+/=\s]|\\[nrt])+", r"\1" + MARK),
)
# Bearer <token>: the token has a digit or is long, so "Bearer authentication" survives.
_TOKEN_VALUE = r"(?:(?=[\w.~+/=-]*\d)[\w.~+/=-]{8,}|[\w.~+/=-]{20,})"
_BEARER = _B + r"((?i:bearer)\s+)" + _TOKEN_VALUE
_AUTH = _B + r"((?i:(?:proxy-)?authorization)\\?[\"']?\s*[:=]\s*\\?[\"']?"
_AUTH_SCHEME = _AUTH + r"(?i:basic|bearer|token|digest|negotiate)\s+)[\w.~+/=-]{4,}"
_AUTH_HEADER = _AUTH + r")" + _TOKEN_VALUE
# The scheme bounded too (an unbounded one scanned every run of letters to its end).
_URL_CREDENTIALS = (
    r"(?i)([a-z][a-z0-9+.-]{0,31}://[^\s:/@\"'\\]{1,256}:)[^\s@/\"'\\]{1,1024}(?=@)")
# "NAME": "value", NAME = 'value': everything up to the closing quote.
_QUOTED = (r"(" + _Q + r"?" + _B + _NAME + _E + r"(?:" + _Q + r")?"
           r"\s*(?:=>|:=|=|:)\s*)(" + _Q + r")((?:(?!\2).)+)(?=\2)")
# NAME=value, NAME: value, --NAME value (the value is judged by `_named`).
# Only `--NAME` takes a space for a separator (the conditional): "PASSWORD A_KEY=..." is prose
# before a named value, and a match that took "A_KEY=..." for the value would hide it.
_UNQUOTED = (
    r"((--)?" + _B + _NAME + _E + r")(\s*(?:=>|:=|=|:)\s*|(?(2)\s+|(?!)))"
    r"([^" + _VALUE_END + r"=:][^" + _VALUE_END + r"]*)")


@cache
def _rules() -> tuple[tuple[tuple[re.Pattern[str], str], ...], tuple[re.Pattern[str], ...],
                      re.Pattern[str], re.Pattern[str]]:
    """The shape rules, compiled once: (pattern, replacement) pairs, those whose match keeps
    its first group, then the quoted and the unquoted named values."""
    replaced = (*_PEM, *((_B + pattern, replacement) for pattern, replacement in _PREFIXED))
    return (tuple((re.compile(pattern), replacement) for pattern, replacement in replaced),
            tuple(map(re.compile, (_BEARER, _AUTH_SCHEME, _AUTH_HEADER, _URL_CREDENTIALS))),
            re.compile(_QUOTED), re.compile(_UNQUOTED))
_RUN = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{" + str(ENTROPY_MIN_CHARS) + r",}={0,2}")

_NEEDED = ("sk-", "sk_", "rk_", "pk_", "gh", "github_pat_", "gl", "hf_", "npm_", "pypi-", "aiza",
           "akia", "asia", "agpa", "aida", "aroa", "aipa", "anpa", "anva", "abia", "acca", "xox",
           "xapp-", "sg.", "_v1_", "shp", "eyj", "bearer", "basic", "token", "://", "key",
           "secret", "passw", "passphrase", "pwd", "credential", "private key")
"""Lower-cased text one of the patterns needs: most text holds none, and looking for them
costs a small fraction of running the patterns (the entropy scan runs on all text)."""


CACHED_MAX_CHARS = 256 * 1024
"""Texts up to this size are remembered (the last 128): an export redacts the same system
prompt and tool definitions (~11K characters, ~20 ms of patterns) in every record."""


def redact_text(text: str) -> str:
    """`text` with every secret replaced by a marker that keeps the secret's kind."""
    if len(text) < 64 or len(text) > CACHED_MAX_CHARS:
        return _redact_text(text)
    return _cached(text)


def _redact_text(text: str) -> str:
    if _DATA_URL.match(text):
        return text
    lowered = text.lower()
    if any(needed in lowered for needed in _NEEDED):
        text = _shapes(text)
    return _RUN.sub(_random, text)


_cached = lru_cache(maxsize=128)(_redact_text)


def _shapes(text: str) -> str:
    """Every rule but the entropy scan, in order (names last: a key they hold is gone)."""
    replaced, keep_first, quoted, unquoted = _rules()
    for pattern, replacement in replaced:
        text = pattern.sub(replacement, text)
    for pattern in keep_first:
        text = pattern.sub(_keep_first, text)
    text = quoted.sub(_quoted, text)
    return unquoted.sub(_unquoted, text)


def _keep_first(match: re.Match[str]) -> str:
    return match[1] + MARK


def _quoted(match: re.Match[str]) -> str:
    head, value = match[1], match[3]
    if MARK in value or value.startswith(("$", "{", "<", "%(")) or _placeholder(value):
        return match[0]  # already redacted, a reference / template or a placeholder
    return head + match[2] + MARK


def _placeholder(value: str) -> bool:
    """`"x"`, `"..."`, `sk-...`, `4`: what docs and configs put where a secret goes."""
    return (len(value) < PLACEHOLDER_CHARS or "..." in value or "\u2026" in value
            or (value.isdigit() and len(value) < PLACEHOLDER_DIGITS))


def _unquoted(match: re.Match[str]) -> str:
    name, separator, value = match[1], match[3], match[4]
    following = match.string[match.end():match.end() + 1]
    if (MARK in value or following in ("(", "[") or _REFERENCE.match(value)
            or _IDENTIFIER.match(value) or _PATH.match(value) or _placeholder(value)):
        return match[0]  # a call, a subscript, a reference, a name or a path: code
    return name + separator + MARK


def entropy(text: str) -> float:
    """Shannon entropy of `text`, in bits per character."""
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _random(match: re.Match[str]) -> str:
    run = match[0]
    # Right after a backslash the first character belongs to a JSON escape (`\n`): kept.
    escape = run[0] if match.start() > 0 and match.string[match.start() - 1] == "\\" else ""
    core = run[len(escape):].rstrip("=")
    if (len(core) < ENTROPY_MIN_CHARS or core.startswith(_DIGESTS) or not any(c.isupper() for c in core)
            or not any(c.islower() for c in core) or not any(c.isdigit() for c in core)
            or entropy(core) < ENTROPY_BITS):
        return run
    return escape + MARK


_DATA_URL = re.compile(r"^data:[\w.+-]+/[\w.+-]+;base64,")
_DIGESTS = ("sha1-", "sha256-", "sha384-", "sha512-")
"""Subresource-integrity digests (`package-lock.json`): public checksums, not secrets."""


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


def withheld_note(path: str) -> str:
    """What recall and exports show instead of a secret path's content."""
    return f"[content of a sensitive read withheld: {path}]"


def withhold(message: dict[str, Any]) -> dict[str, Any]:
    """`message` with its content replaced by `withheld_note` when it is marked `WITHHELD`,
    and the same for the subagent transcripts filed under it; else `message` itself."""
    subagents = message.get("subagents")
    if not message.get(WITHHELD) and not subagents:
        return message
    out = dict(message)
    if path := message.get(WITHHELD):
        out["content"] = withheld_note(str(path))
        out["display"] = [{"type": "text", "text": withheld_note(str(path))}]
    if isinstance(subagents, list):
        out["subagents"] = [
            {**run, "messages": [withhold(m) for m in run.get("messages") or ()]}
            if isinstance(run, dict) else run for run in subagents]
    return out


QUOTED_MIN_CHARS = 6
"""The shortest word of a withheld result looked for elsewhere in its session (a model's
answer quoting the key it read): shorter words are too common to take out."""
MAX_QUOTED_WORDS = 2_000
"""Words of a session's withheld contents looked for (the first ones; a pattern past that
costs more than it finds)."""
_QUOTABLE = re.compile(r"[^\s\"'`,;:=()\[\]{}<>\\]+")


def quoted_words(texts: list[str]) -> frozenset[str]:
    """The words of withheld contents that would give them away if quoted: at least
    `QUOTED_MIN_CHARS` long with letters and digits (`SSH-CANARY-8c9d`, `hunter2-x`), or 16
    and more of mixed kinds (a key's body); not `default`, `PRIVATE` or `package.json`."""
    found: set[str] = set()
    for text in texts:
        for word in _QUOTABLE.findall(text.replace("\\n", " ").replace("\\t", " ")):
            word = word.strip(".")
            digit, alpha = any(c.isdigit() for c in word), any(c.isalpha() for c in word)
            mixed = digit + alpha + any(not c.isalnum() for c in word) >= 2
            if MARK[1:-1] not in word and (
                    (len(word) >= QUOTED_MIN_CHARS and digit and alpha) or (len(word) >= 16 and mixed)):
                found.add(word)
                if len(found) >= MAX_QUOTED_WORDS:
                    return frozenset(found)
    return frozenset(found)


def scrub(value: Any, words: frozenset[str]) -> Any:
    """A copy of a JSON-like value with every occurrence of `words` replaced by `MARK`."""
    if not words:
        return value
    pattern = re.compile("|".join(map(re.escape, sorted(words, key=len, reverse=True))))

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return pattern.sub(MARK, item)
        if isinstance(item, list | tuple):
            return [walk(x) for x in item]
        if isinstance(item, dict):
            return {k: walk(v) for k, v in item.items()}
        return item

    return walk(value)
