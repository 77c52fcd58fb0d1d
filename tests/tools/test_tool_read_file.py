"""read_file through the registry, on real files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from talaria.agent.tool_runner import invoke
from talaria.tools import read_file
from talaria.tools.builtin import load_builtin_tools
from talaria.tools.context import ToolContext
from talaria.tools.local.workspace import LocalWorkspace

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def call(tmp_path: Path, **args: Any) -> dict[str, Any]:
    spec = load_builtin_tools().get("read_file")
    assert spec is not None
    return await invoke(spec, args, ToolContext(workspace=LocalWorkspace(tmp_path)))


async def test_numbered_lines_without_phantom_last_line(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("one\ntwo\n\nfour\n")
    r = await call(tmp_path, path="a.py")
    assert r == {
        "path": "a.py",
        "content": "1|one\n2|two\n3|\n4|four",
        "total_lines": 4,
        "truncated": False,
        "next_offset": None,
    }


async def test_no_trailing_newline_empty_file_and_form_feed(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("x\ny")
    (tmp_path / "e").write_text("")
    (tmp_path / "f").write_text("a\fb\u2028c\n")
    assert (await call(tmp_path, path="a"))["content"] == "1|x\n2|y"
    empty = await call(tmp_path, path="e")
    assert (empty["content"], empty["total_lines"], empty["next_offset"]) == ("", 0, None)
    assert (await call(tmp_path, path="f"))["total_lines"] == 1  # only \n starts a line


async def test_crlf_and_unicode(tmp_path: Path) -> None:
    (tmp_path / "w.txt").write_bytes("héllo 😀\r\n漢字\r\ne\u0301\r\n".encode())
    r = await call(tmp_path, path=str(tmp_path / "w.txt"))
    assert r["content"] == "1|héllo 😀\n2|漢字\n3|e\u0301"
    assert r["total_lines"] == 3


async def test_paging_large_file(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 1201)))
    first = await call(tmp_path, path="big.txt")
    assert first["content"].splitlines()[-1] == "500|line 500"
    assert (first["truncated"], first["next_offset"], first["total_lines"]) == (True, 501, 1200)
    last = await call(tmp_path, path="big.txt", offset=1001, limit="500")
    assert last["content"].splitlines()[0] == "1001|line 1001"
    assert (last["truncated"], last["next_offset"]) == (False, None)
    clamped = await call(tmp_path, path="big.txt", limit=100_000)
    assert len(clamped["content"].splitlines()) == 1200  # under MAX_LIMIT anyway
    assert "past the end" in (await call(tmp_path, path="big.txt", offset=5000))["error"]


async def test_limit_is_clamped(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("x\n" * 3000)
    r = await call(tmp_path, path="big.txt", limit=10_000)
    assert r["next_offset"] == read_file.MAX_LIMIT + 1


async def test_long_lines_cut_and_page_char_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "min.js").write_text("a" * 5000 + "\nshort\n")
    r = await call(tmp_path, path="min.js")
    first = r["content"].splitlines()[0]
    assert first.startswith("1|" + "a" * 2000) and first.endswith("[line cut: 5,000 chars]")
    monkeypatch.setattr(read_file, "MAX_PAGE_CHARS", 50)
    (tmp_path / "many.txt").write_text("0123456789\n" * 20)
    page = await call(tmp_path, path="many.txt")
    assert len(page["content"].splitlines()) == 3
    assert (page["truncated"], page["next_offset"]) == (True, 4)


async def test_binary_and_directory_refused(tmp_path: Path) -> None:
    (tmp_path / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
    assert "binary" in (await call(tmp_path, path="img.png"))["error"]
    assert "directory" in (await call(tmp_path, path="."))["error"]


async def test_missing_file_suggests_similar_names(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "config.py").write_text("")
    (tmp_path / "src" / "configs.py").write_text("")
    (tmp_path / "src" / "other.py").write_text("")
    r = await call(tmp_path, path="src/confg.py")
    assert r["error"] == "File not found: src/confg.py"
    assert set(r["similar"]) == {"src/config.py", "src/configs.py"}
    r = await call(tmp_path, path="nowhere/x.py")
    assert r == {"error": "File not found: nowhere/x.py"}


async def test_outside_the_root_still_works(tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("hi\n")
    (tmp_path / "proj").mkdir()
    r = await call(tmp_path / "proj", path="../outside.txt")
    assert (r["content"], r["path"]) == ("1|hi", str(tmp_path / "outside.txt"))
