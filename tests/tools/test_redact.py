"""Secret redaction: every pattern, JSON-escaped text, code that must survive, every format."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from talaria.agent.trajectories.export import FORMATS, ToolCatalog, export
from talaria.agent.trajectories.model import build
from talaria.tools import redact as redact_module
from talaria.tools.redact import MARK, redact, redact_text

SECRETS = [
    # (text holding a secret, the secret, what stays)
    ("key: sk-proj-Zx81kQm2LrT5vW9yB3nC", "Zx81kQm2LrT5vW9yB3nC", "sk-"),
    ("sk-abcdefghijklmnopqrstuvwx", "abcdefghijklmnopqrstuvwx", "sk-"),
    ("anthropic sk-ant-api03-AbCdEfGhIjKlMnOpQrSt_uv", "AbCdEfGhIjKlMnOpQrSt_uv", "sk-ant-"),
    ("git clone https://ghp_0123456789abcdefghijABCDEFGHIJ012345@github.com/x/y",
     "0123456789abcdefghijABCDEFGHIJ012345", "ghp_"),
    ("token github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "0123456789_abcdefghijklmnop", "github_pat_"),
    ("aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE", "AKIA"),
    ("SLACK=xoxb-123456789012-abcdefghijkl", "123456789012-abcdefghijkl", "xoxb-"),
    ("slack user xoxp-2222-3333-abcdefabcdef", "2222-3333-abcdefabcdef", "xoxp-"),
    ("curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.c2ln'", "eyJhbGciOiJIUzI1NiJ9", "Bearer "),
    ("OPENAI_API_KEY=abc123secret", "abc123secret", "OPENAI_API_KEY="),
    ("export GITHUB_TOKEN=\"tok_live_42\"", "tok_live_42", "GITHUB_TOKEN=\""),
    ("DB_PASSWORD=hunter2 ./start", "hunter2", "DB_PASSWORD="),
    ("AWS_SECRET_ACCESS_KEY='wJalrXUtnFEMI/K7MDENG'", "wJalrXUtnFEMI", "AWS_SECRET_ACCESS_KEY='"),
    ("KEY=s3cr3t", "s3cr3t", "KEY="),
    ("STRIPE_SECRET = \"rk_live_51H\"", "rk_live_51H", "STRIPE_SECRET = \""),
    ('{"api_key": "live-123-abc", "name": "x"}', "live-123-abc", '"name": "x"'),
    ("password: 'correct horse battery'", "correct horse", "password: '"),
    # A secret-like word in the prose right before a named value (CI's seed found the first):
    # the word is no name of the value, and must not swallow it.
    ("PASSWORD A_KEY=00000000 ", "00000000", "PASSWORD A_KEY="),
    ("the token  db_password: hunter22", "hunter22", "the token  db_password: "),
    ("set --token abc123def via SECRET=zz99zz99", "zz99zz99", "--token [REDACTED] via SECRET="),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nq1w2e3r4\n-----END RSA PRIVATE KEY-----\nafter",
     "MIIEowIBAAKCAQEA7", "-----END RSA PRIVATE KEY-----\nafter"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nAAAEbm9uZQ",  # cut short
     "b3BlbnNzaC1rZXktdjEAAAAA", "-----BEGIN OPENSSH PRIVATE KEY-----"),
]


@pytest.mark.parametrize(("text", "secret", "kept"), SECRETS)
def test_each_pattern_is_redacted(text: str, secret: str, kept: str) -> None:
    out = redact_text(text)
    assert secret not in out and MARK in out and kept in out, out


@pytest.mark.parametrize(("text", "secret", "kept"), SECRETS)
def test_secrets_in_json_escaped_tool_output_are_redacted(text: str, secret: str, kept: str) -> None:
    # Tool results are JSON text: a line break there is the two characters \ and n.
    content = json.dumps({"output": f"first line\n{text}\nlast line", "exit_code": 0})
    out = redact_text(content)
    assert secret not in out and MARK in out
    assert json.loads(out)["exit_code"] == 0, "redaction must keep the JSON valid"


CODE = '''\
import os

api_key = os.environ["OPENAI_API_KEY"]
client = OpenAI(api_key=api_key, max_tokens=100)
MAX_TOKENS = 4096
TOKEN_LIMIT=5
token = next(tokens)
for key, value in KEYS.items():
    cache[key] = value
self.password = password
headers = {"Authorization": f"Bearer {token}"}
SECRET_KEY=$SECRET_FROM_VAULT
PWD=/home/me/project
MONKEY=3
risk-assessment-framework-version-two and desk-lamp-with-a-long-name
"Bearer authentication" is described in RFC 6750.
-----BEGIN CERTIFICATE-----
MIIBszCCAVmgAwIBAgIU
-----END CERTIFICATE-----
def get_secret(name: str) -> str: ...
'''


def test_normal_code_is_not_mangled() -> None:
    assert redact_text(CODE) == CODE


def test_image_data_is_never_scanned() -> None:
    data = "AKIAABCDEFGHIJKLMNOP" + "A" * 40  # base64 can spell anything
    part = {"type": "image", "mime_type": "image/png", "data": data}
    assert redact(part) == part
    url = f"data:image/png;base64,{data}"
    assert redact_text(url) == url
    assert redact({"text": "AKIAABCDEFGHIJKLMNOP"}) == {"text": "AKIA" + MARK}


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_redacts(fmt: str) -> None:
    secret = "sk-proj-" + "Q" * 24
    rows = [
        {"role": "system", "content": "prompt"},
        {"role": "user", "content": f"my key is {secret}, and DB_PASSWORD=hunter2"},
        {"role": "assistant", "content": "", "reasoning": f"They pasted {secret}.",
         "tool_calls": [{"id": "c1", "name": "terminal",
                         "arguments": json.dumps({"command": f"OPENAI_API_KEY={secret} run"})}]},
        {"role": "tool", "tool_call_id": "c1", "name": "terminal", "status": "completed",
         "content": json.dumps({"output": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n"
                                          "-----END PRIVATE KEY-----\n"})},
        {"role": "assistant", "content": f"Done; rotate {secret}."},
    ]
    out = export([build(rows, None, session_id="s")], fmt, ToolCatalog())
    for leaked in ("QQQQQQQQ", "hunter2", "MIIEvQIBADANBg"):
        assert leaked not in out, (fmt, leaked)
    assert out.count(MARK) >= 5


def _every_pattern(text: str) -> str:
    return redact_module._RUN.sub(redact_module._random, redact_module._shapes(text))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from([s for s, _, _ in SECRETS] + [
    "plain words ", "Sk-", "GHP_", "ApI_KeY", " = ", "\"", "'", ": ", "\\n", "Bearer ", "x" * 20,
    "akIA", "AKIA1234567890ABCDEF", "PaSsWoRd", "tOkEn", "-----BEGIN RSA PRIVATE KEY-----"]),
    max_size=8).map("".join))
def test_the_quick_check_never_skips_text_a_pattern_would_change(text: str) -> None:
    assert redact_text(text) == _every_pattern(text)


def test_a_key_block_longer_than_the_bound_still_loses_its_body() -> None:
    from talaria.tools.redact import MAX_PEM_CHARS

    body = ("QUJD" * (MAX_PEM_CHARS // 4 + 100))
    text = f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----\nafter"
    out = redact_text(text)
    assert "QUJDQUJD" not in out and out.endswith("after")
    hostile = "-----BEGIN PRIVATE KEY-----" * 3000  # many openings, no body: left as it is
    assert redact_text(hostile) == hostile


def test_placeholders_and_short_settings_are_not_secrets() -> None:
    from talaria.tools.redact import PLACEHOLDER_CHARS, PLACEHOLDER_DIGITS

    kept = ['OPENAI_API_KEY="x"', "OPENAI_API_KEY=sk-...", 'token: "…"', "CHARS_PER_TOKEN = 4",
            f"pin_token={'1' * (PLACEHOLDER_DIGITS - 1)}", f'password="{"a" * (PLACEHOLDER_CHARS - 1)}"']
    for text in kept:
        assert redact_text(text) == text, text
    for text in (f"pin_token={'1' * PLACEHOLDER_DIGITS}", f'password="{"a" * PLACEHOLDER_CHARS}"'):
        assert MARK in redact_text(text), text


def test_entropy_judges_runs_from_the_bound() -> None:
    from talaria.tools.redact import ENTROPY_MIN_CHARS

    run = "aZ3kQ9xW2mN7pL4vB8cR1tY6uH5jG0fD" * 3
    assert MARK in redact_text(f"x {run[:ENTROPY_MIN_CHARS]} y")
    assert redact_text(f"x {run[:ENTROPY_MIN_CHARS - 1]} y") == f"x {run[:ENTROPY_MIN_CHARS - 1]} y"
    assert redact_text("sha512-" + run) == "sha512-" + run  # an integrity digest is public


def test_quoted_words_are_the_telling_ones_and_bounded() -> None:
    from talaria.tools.redact import MAX_QUOTED_WORDS, quoted_words, scrub

    words = quoted_words(['{"content": "# SSH-CANARY-8c9d\\ndefault PRIVATE package.json '
                          'hunter2-x b3BlbnNzaC1rZXktdjEAAAAA ab1"}'])
    assert words == {"SSH-CANARY-8c9d", "hunter2-x", "b3BlbnNzaC1rZXktdjEAAAAA"}
    said = {"text": "it ends with SSH-CANARY-8c9d; the default PRIVATE key", "n": 1}
    assert scrub(said, words) == {"text": f"it ends with {MARK}; the default PRIVATE key", "n": 1}
    many = quoted_words([" ".join(f"word{i}x" for i in range(MAX_QUOTED_WORDS + 50))])
    assert len(many) == MAX_QUOTED_WORDS


ADVERSARIAL = (  # shapes the unbounded patterns were quadratic on: a minute per 100 KB
    '"key=" + "a" * 100_000',  # letters after a keyword
    '\'"api_key": "\' + "a" * 100_000',  # an unclosed quoted value
    '"see http://" + "a" * 100_000',  # a run after a scheme
    '"a-" * 50_000',  # dashed words
    '"secret." * 14_000',  # dotted words
)


def test_long_adversarial_text_is_scanned_in_one_pass_and_secrets_in_it_still_go() -> None:
    """The redaction patterns are bounded (name parts, the URL's scheme, user and password):
    every shape that made one quadratic finishes (a child with a generous deadline: a hang,
    not a speed, fails it), and a secret inside such text is still redacted."""
    import subprocess
    import sys

    code = "from talaria.tools.redact import redact_text\n" + "".join(
        f"redact_text({text})\n" for text in ADVERSARIAL)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    glued = "x" * 40 + "https://admin:hunter2-very-secret@db.example.com/x"
    assert "hunter2" not in redact_text(glued)
    assert "S3cr3tValu3xyz" not in redact_text("a-" * 5_000 + "my.app.db.api_key=S3cr3tValu3xyz")
    assert "p4ssw0rd" not in redact_text("a." * 5_000 + 'password: "p4ssw0rd"')
