"""Synthetic sessions for compaction tests and benchmarks: tool-heavy, with planted facts.

`facts_kept` is a plain text check (is each fact still there, word for word). Applied after
stage 1 it is deterministic and honest; `TemplateSummarizer` is a test double, not a model.
"""

from __future__ import annotations

import json
import random
import re

from talaria.agent.context import tokens
from talaria.agent.transcript import Message

# 20 facts a compaction must not lose: (kind, the string that must survive).
FACTS = [
    ("constraint", "never touch the migrations/ folder"),
    ("constraint", "keep Python 3.9 compatibility"),
    ("constraint", "use tabs in the Makefile only"),
    ("constraint", "do not add new dependencies"),
    ("constraint", "the public API of billing.invoice must not change"),
    ("file", "src/billing/ledger_sync.py"),
    ("file", "tests/test_refunds_edgecases.py"),
    ("file", "config/feature_flags.yaml"),
    ("file", "scripts/rebuild_index.sh"),
    ("file", "docs/adr/0007-currency-rounding.md"),
    ("decision", "chose banker's rounding for currency"),
    ("decision", "decided to cache exchange rates for 15 minutes"),
    ("decision", "chose to keep the legacy CSV exporter behind a flag"),
    ("decision", "decided to split RefundService into two classes"),
    ("decision", "chose sqlite for the local test fixtures"),
    ("error", "ZeroDivisionError: division by zero in prorate()"),
    ("error", "AssertionError: expected 1999 cents, got 2000"),
    ("error", "KeyError: 'currency_code'"),
    ("error", "TimeoutError: ledger sync exceeded 30s"),
    ("error", "ImportError: cannot import name 'Money' from 'billing.types'"),
]

FILLER = (
    "def handler_{i}(request, context):\n"
    "    value = compute_total(request.items, context.rates)  # line {i}\n"
    "    if value > LIMIT:\n        raise ValueError('limit exceeded for {i}')\n"
    "    return Response(value, status=200)\n"
)


def _file_text(i: int, lines: int) -> str:
    return "".join(FILLER.format(i=i * 1000 + j) for j in range(lines // 5))


def tool_heavy_session(target_tokens: int = 200_000, seed: int = 7) -> list[Message]:
    """A session of about `target_tokens`, mostly tool output, with FACTS planted across it."""
    rng = random.Random(seed)
    facts = list(FACTS)
    messages: list[Message] = [
        {"role": "system", "content": "You are Talaria, a coding agent."},
        {"role": "user", "content": "Fix the refund rounding bugs in the billing service. "
                                    f"Constraint: {facts[0][1]}."},
    ]
    step, total = 0, 0
    while total < target_tokens:
        step += 1
        # Fact i is planted at step 2i+1, spread over the first 40 steps.
        n = step // 2 if step % 2 and step // 2 < len(facts) else None
        kind, fact = facts[n] if n is not None else ("", "")
        text = f"I {fact} because it matches the ledger semantics." if kind == "decision" \
            else f"Step {step}: looking at the next part."
        calls, results = [], []
        parallel = 3 if step % 4 == 0 else 1
        for k in range(parallel):
            call_id = f"call_{step}_{k}"
            path = fact if kind == "file" and k == 0 else f"src/module_{step}_{k}.py"
            if (step % 3 == 0 or kind == "error") and k == 0 and kind != "file":
                output = "\n".join(f"test_case_{step}_{j} PASSED" for j in range(120))
                if kind == "error":
                    output += f"\nFAILED test_refunds.py::test_{step} - {fact}"
                calls.append({"id": call_id, "name": "terminal",
                              "arguments": json.dumps({"command": "pytest -q tests/"})})
                results.append({"exit_code": 1, "output": output, "omitted_bytes": 0, "timed_out": False})
            elif step % 5 == 0 and k == 0 and kind != "file":
                body = _file_text(step, 80)
                calls.append({"id": call_id, "name": "write_file",
                              "arguments": json.dumps({"path": path, "content": body})})
                results.append({"path": path, "bytes_written": len(body), "created": True})
            else:
                body = _file_text(step, rng.randint(150, 260))
                numbered = "\n".join(f"{j + 1}|{line}" for j, line in enumerate(body.splitlines()))
                calls.append({"id": call_id, "name": "read_file", "arguments": json.dumps({"path": path})})
                results.append({"path": path, "content": numbered, "total_lines": body.count("\n"),
                                "truncated": False, "next_offset": None})
        messages.append({"role": "assistant", "content": text, "tool_calls": calls})
        for call, result in zip(calls, results, strict=True):
            messages.append({"role": "tool", "tool_call_id": call["id"], "name": call["name"],
                             "content": json.dumps(result)})
        if kind == "constraint" and n:
            messages.append({"role": "assistant", "content": "Noted."})
            messages.append({"role": "user", "content": f"Also: {fact}."})
        if step % 25 == 0:
            messages.append({"role": "assistant", "content": "Here is the screenshot check."})
            messages.append({"role": "user", "content": [
                {"type": "text", "text": "This is what the UI shows now."},
                {"type": "image", "mime_type": "image/png", "data": "iVBORw0KGgo" + "A" * 4000}]})
        total = tokens.count_messages(messages) if step % 10 == 0 else total
    messages.append({"role": "assistant", "content": "The rounding fix is in; two refund tests still fail."})
    messages.append({"role": "user", "content": "Continue with the failing refund tests, please."})
    return messages


def facts_kept(messages: list[Message]) -> list[str]:
    text = json.dumps(messages, ensure_ascii=False)
    return [fact for _, fact in FACTS if json.dumps(fact)[1:-1] in text]


class TemplateSummarizer:
    """A test double for the summary model: fills the handoff template by regex extraction.

    It was written knowing the planted FACTS (it copies user lines, file paths and failing
    test lines), so what it keeps measures the harness, not summary quality: use it to test
    the compaction mechanics, never to report retention (benchmarks/compaction.py does not).
    """

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def summarize(self, instructions: str, transcript: str) -> str:
        self.calls.append((instructions, transcript))
        blocks = re.split(r"^### ", transcript, flags=re.M)
        users = [b.split("\n", 1)[1].strip() for b in blocks if b.startswith("user")]
        said = [b.split("\n", 1)[1].split("\n->")[0].strip() for b in blocks if b.startswith("assistant")]
        files = sorted(set(re.findall(r'"path": "([^"]+)"', transcript)))
        errors = sorted(set(re.findall(r'last line: "([^"]+)"', transcript)))
        return "\n".join([
            "## Goal", users[0][:300] if users else "(unknown)",
            "## Constraints and preferences", *[f"- {u[:300]}" for u in users],
            "## Completed actions", f"- {transcript.count('-> ')} tool calls",
            "## Current state", *[f"- {e}" for e in errors],
            "## Open work", "- see the latest user message",
            "## Files touched", *[f"- {f}" for f in files],
            "## Key decisions", *[f"- {s[:200]}" for s in said if not s.startswith("Step ")],
        ])
