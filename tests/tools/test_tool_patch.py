"""patch through the registry, on real files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from talaria.agent.tool_runner import invoke
from talaria.tools.builtin import load_builtin_tools
from talaria.tools.context import ToolContext
from talaria.tools.local.workspace import LocalWorkspace

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def call(tmp_path: Path, **args: Any) -> dict[str, Any]:
    spec = load_builtin_tools().get("patch")
    assert spec is not None
    return await invoke(spec, args, ToolContext(workspace=LocalWorkspace(tmp_path)))


SOURCE = """\
def greet(name):
    message = "hello " + name
    print(message)
    return message


def main():
    greet("world")
"""


async def test_exact_replace_with_diff(tmp_path: Path) -> None:
    f = tmp_path / "app.py"
    f.write_text(SOURCE)
    r = await call(tmp_path, path="app.py", old_string='"hello "', new_string='"hi "')
    assert f.read_text() == SOURCE.replace('"hello "', '"hi "')
    assert r["replacements"] == 1 and "note" not in r
    assert r["diff"].startswith("--- a/app.py\n+++ b/app.py\n@@")
    assert '-    message = "hello " + name\n+    message = "hi " + name' in r["diff"]
    assert r["_diff"] == {"path": str(f), "old_text": SOURCE, "new_text": f.read_text()}


async def test_crlf_file_stays_crlf(tmp_path: Path) -> None:
    f = tmp_path / "win.py"
    f.write_bytes(SOURCE.replace("\n", "\r\n").encode())
    r = await call(
        tmp_path,
        path="win.py",
        old_string="    print(message)\n    return message\n",
        new_string="    print(message)\n    log(message)\n    return message\n",
    )
    assert r["replacements"] == 1
    data = f.read_bytes()
    assert b"    log(message)\r\n    return message\r\n" in data
    assert data.count(b"\n") == data.count(b"\r\n")


async def test_ambiguous_names_lines_and_replace_all(tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    f.write_text("x = 1\ny = 2\nx = 1\nz\nx = 1\n")
    r = await call(tmp_path, path="a.txt", old_string="x = 1", new_string="x = 9")
    assert "3 times (lines 1, 3, 5)" in r["error"] and "replace_all" in r["error"]
    assert f.read_text() == "x = 1\ny = 2\nx = 1\nz\nx = 1\n"
    r = await call(tmp_path, path="a.txt", old_string="x = 1", new_string="x = 9", replace_all=True)
    assert r["replacements"] == 3
    assert f.read_text() == "x = 9\ny = 2\nx = 9\nz\nx = 9\n"


async def test_fuzzy_indentation_and_trailing_whitespace(tmp_path: Path) -> None:
    f = tmp_path / "app.py"
    f.write_text(SOURCE.replace("print(message)", "print(message)   "))  # trailing spaces
    r = await call(
        tmp_path,
        path="app.py",
        old_string="message = 'x'\nprint(message)\n".replace("'x'", '"hello " + name'),
        new_string='message = "hey " + name\nif name:\n    print(message)\n',
    )
    assert r["replacements"] == 1 and r["note"] == "matched ignoring whitespace differences"
    assert f.read_text() == SOURCE.replace(
        '    message = "hello " + name\n    print(message)\n',
        '    message = "hey " + name\n    if name:\n        print(message)\n',
    )


async def test_fuzzy_in_crlf_file_with_tabs(tmp_path: Path) -> None:
    f = tmp_path / "t.go"
    f.write_bytes(b"func f() {\r\n\tif x {\r\n\t\treturn 1\r\n\t}\r\n}\r\n")
    r = await call(
        tmp_path,
        path="t.go",
        old_string="    if x {\n        return 1\n    }",
        new_string="    if x {\n        return 2\n    }",
    )
    assert r["replacements"] == 1
    assert f.read_bytes() == b"func f() {\r\n\tif x {\r\n\t    return 2\r\n\t}\r\n}\r\n"


async def test_fuzzy_ambiguous_and_replace_all(tmp_path: Path) -> None:
    f = tmp_path / "a.py"
    f.write_text("if a:\n    go()\nif b:\n  go()\n")
    r = await call(tmp_path, path="a.py", old_string=" go() ", new_string="stop()")
    assert "2 times (lines 2, 4)" in r["error"]
    r = await call(
        tmp_path, path="a.py", old_string=" go() ", new_string="stop()", replace_all=True
    )
    assert r["replacements"] == 2
    assert f.read_text() == "if a:\n    stop()\nif b:\n  stop()\n"


async def test_no_match_names_closest_lines(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(SOURCE)
    r = await call(tmp_path, path="app.py", old_string="def greet(nam, greeting):", new_string="x")
    assert r["error"].startswith("app.py: old_string not found. Closest lines:\n1|def greet(name):")
    r = await call(tmp_path, path="app.py", old_string="zzzzzzzzzzzz", new_string="x")
    assert "No similar lines" in r["error"]


async def test_delete_lines_exact_and_fuzzy(tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    f.write_text("keep\ndrop me\nkeep too\n")
    await call(tmp_path, path="a.txt", old_string="drop me\n", new_string="")
    assert f.read_text() == "keep\nkeep too\n"
    f.write_text("keep\n    drop me  \nkeep too\n")
    r = await call(tmp_path, path="a.txt", old_string="drop me\n", new_string="")
    assert r["replacements"] == 1 and f.read_text() == "keep\nkeep too\n"


async def test_unicode_and_no_trailing_newline(tmp_path: Path) -> None:
    f = tmp_path / "u.txt"
    f.write_text("名前 = 'e\u0301'\nlast 😀")
    await call(tmp_path, path="u.txt", old_string="last 😀", new_string="final 🎉")
    await call(tmp_path, path="u.txt", old_string="名前", new_string="なまえ")
    assert f.read_text() == "なまえ = 'e\u0301'\nfinal 🎉"


async def test_errors(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    assert (await call(tmp_path, path="no.txt", old_string="a", new_string="b"))["error"] == (
        "File not found: no.txt"
    )
    assert "empty" in (await call(tmp_path, path="a.txt", old_string="", new_string="b"))["error"]
    assert (
        "identical" in (await call(tmp_path, path="a.txt", old_string="a", new_string="a"))["error"]
    )
    (tmp_path / "b.bin").write_bytes(b"a\0")
    assert "binary" in (await call(tmp_path, path="b.bin", old_string="a", new_string="b"))["error"]


async def preview(tmp_path: Path, **args: Any) -> dict[str, Any] | None:
    spec = load_builtin_tools().get("patch")
    assert spec is not None and spec.preview is not None
    return await spec.preview(args, ToolContext(workspace=LocalWorkspace(tmp_path)))


async def test_preview_is_the_diff_the_call_makes_and_writes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "greet.py"
    crlf = SOURCE.replace("\n", "\r\n").encode()
    target.write_bytes(crlf)
    args = {"path": "greet.py", "old_string": '    message = "hello " + name\n',
            "new_string": '    message = "hi " + name\n'}
    shown = await preview(tmp_path, **args)
    assert target.read_bytes() == crlf  # untouched
    assert shown is not None and "\r\n" in shown["new_text"]
    assert shown == (await call(tmp_path, **args))["_diff"]
    assert target.read_bytes() == shown["new_text"].encode()


@pytest.mark.parametrize("args", [
    {"path": "greet.py", "old_string": "absent", "new_string": "x"},     # not found
    {"path": "greet.py", "old_string": "message", "new_string": "m"},    # ambiguous
    {"path": "missing.py", "old_string": "a", "new_string": "b"},        # no such file
    {"path": "greet.py", "old_string": "", "new_string": "b"},           # bad arguments
    {"path": "greet.py", "old_string": "a", "new_string": 3},
])
async def test_preview_of_a_call_that_would_fail_is_none(tmp_path: Path, args: dict[str, Any]) -> None:
    (tmp_path / "greet.py").write_text(SOURCE)
    assert await preview(tmp_path, **args) is None
    assert (tmp_path / "greet.py").read_text() == SOURCE
