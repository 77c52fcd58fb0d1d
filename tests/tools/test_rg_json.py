"""rg's `--json` match records read without a JSON parse where nothing but the line end is
escaped (`rg_json._match`): every other line is decoded as a JSON parse would, whatever the
path before it holds."""

from __future__ import annotations

import base64
import json

import pytest

from talaria.tools.local import rg_json

TEXTS = [
    "plain foo\n",
    "crlf foo\r\n",
    "no line end",
    'quotes "foo" and {"lines":{"text":"x"},"line_number":9}\n',
    "tab\tfoo\n",
    "back\\slash\n",
    "literal \\n at the end\\n\n",
    "ends with a backslash \\",
    "escape \x1b[0m and \x00 nul\n",
    "unicode 日本語 😀 e\u0301\n",
    "mid\rreturn\r\n",
    "\n",
]
PATHS = ["a.py", "dir/日本語.md", 'odd "quoted" \\ path.txt']


def _record(path: str, text: str | None, number: int, raw: bytes | None = None) -> bytes:
    """A match record as rg writes it (compact JSON, UTF-8 as is)."""
    lines = {"text": text} if raw is None else {"bytes": base64.b64encode(raw).decode()}
    data = {"path": {"text": path}, "lines": lines, "line_number": number,
            "absolute_offset": 0, "submatches": [{"match": {"text": "foo"}, "start": 0, "end": 3}]}
    return json.dumps({"type": "match", "data": data}, ensure_ascii=False,
                      separators=(",", ":")).encode()


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("text", TEXTS)
def test_a_match_reads_as_a_json_parse_would(path: str, text: str) -> None:
    found = rg_json._match(_record(path, text, 1234), "shown")
    assert (found.path, found.line) == ("shown", 1234)
    assert found.text == text.removesuffix("\n").removesuffix("\r")


def test_a_line_that_is_not_utf8_comes_as_bytes() -> None:
    found = rg_json._match(_record("a.txt", None, 7, raw=b"caf\xe9 foo\n"), "a.txt")
    assert (found.line, found.text) == (7, "caf\udce9 foo")


def test_a_long_line_is_cut() -> None:
    found = rg_json._match(_record("a.txt", "x" * (rg_json.MAX_LINE_CHARS + 50) + "\n", 1), "a")
    assert found.text == "x" * rg_json.MAX_LINE_CHARS
