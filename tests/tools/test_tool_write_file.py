"""write_file through the registry, on real files."""

from __future__ import annotations

import os
import stat
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
    spec = load_builtin_tools().get("write_file")
    assert spec is not None
    return await invoke(spec, args, ToolContext(workspace=LocalWorkspace(tmp_path)))


async def test_new_file_with_parents(tmp_path: Path) -> None:
    r = await call(tmp_path, path="a/b/new.txt", content="héllo 😀\n")
    target = tmp_path / "a" / "b" / "new.txt"
    assert target.read_text(encoding="utf-8") == "héllo 😀\n"
    assert r == {
        "path": "a/b/new.txt",
        "bytes_written": len("héllo 😀\n".encode()),
        "created": True,
        "_diff": {"path": str(target), "old_text": None, "new_text": "héllo 😀\n"},
    }


async def test_overwrite_reports_old_text(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("old\n")
    r = await call(tmp_path, path="a.txt", content="new\n")
    assert r["created"] is False and r["_diff"]["old_text"] == "old\n"
    assert (tmp_path / "a.txt").read_text() == "new\n"


async def test_keeps_crlf_of_existing_file(tmp_path: Path) -> None:
    (tmp_path / "win.txt").write_bytes(b"a\r\nb\r\n")
    r = await call(tmp_path, path="win.txt", content="x\ny\nz\n")
    assert (tmp_path / "win.txt").read_bytes() == b"x\r\ny\r\nz\r\n"
    assert r["bytes_written"] == 9
    (tmp_path / "unix.txt").write_bytes(b"a\nb\n")
    await call(tmp_path, path="unix.txt", content="x\r\ny\r\n")
    assert (tmp_path / "unix.txt").read_bytes() == b"x\ny\n"
    await call(tmp_path, path="fresh.txt", content="x\r\ny\n")  # a new file is written as given
    assert (tmp_path / "fresh.txt").read_bytes() == b"x\r\ny\n"


async def test_mode_kept_and_umask_default_for_new_files(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o750)
    await call(tmp_path, path="run.sh", content="#!/bin/sh\necho hi\n")
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    old = os.umask(0o022)
    try:
        await call(tmp_path, path="new.txt", content="x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o644


async def test_binary_file_can_be_replaced(tmp_path: Path) -> None:
    (tmp_path / "blob").write_bytes(b"\0\1\2")
    r = await call(tmp_path, path="blob", content="text\n")
    assert (r["created"], r["_diff"]["old_text"]) == (False, None)
    assert (tmp_path / "blob").read_text() == "text\n"


async def test_errors_are_results(tmp_path: Path) -> None:
    assert "string" in (await call(tmp_path, path="a.txt", content=3))["error"]
    (tmp_path / "d").mkdir()
    assert "directory" in (await call(tmp_path, path="d", content="x"))["error"]
    (tmp_path / "f").write_text("")
    assert "error" in await call(tmp_path, path="f/child.txt", content="x")  # parent is a file


async def preview(tmp_path: Path, **args: Any) -> dict[str, Any] | None:
    spec = load_builtin_tools().get("write_file")
    assert spec is not None and spec.preview is not None
    return await spec.preview(args, ToolContext(workspace=LocalWorkspace(tmp_path)))


async def test_preview_shows_the_write_without_making_it(tmp_path: Path) -> None:
    assert await preview(tmp_path, path="a/new.txt", content="x\n") == {
        "path": str(tmp_path / "a" / "new.txt"), "old_text": None, "new_text": "x\n"}
    assert not (tmp_path / "a").exists()
    (tmp_path / "crlf.txt").write_bytes(b"old\r\n")
    shown = await preview(tmp_path, path="crlf.txt", content="new\nlines\n")
    assert shown == {"path": str(tmp_path / "crlf.txt"), "old_text": "old\r\n",
                     "new_text": "new\r\nlines\r\n"}  # the line endings the write will keep
    assert (tmp_path / "crlf.txt").read_bytes() == b"old\r\n"
    assert (await call(tmp_path, path="crlf.txt", content="new\nlines\n"))["_diff"] == shown


async def test_no_preview_for_a_binary_file_or_bad_content(tmp_path: Path) -> None:
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\xff" * 10)
    assert await preview(tmp_path, path="blob.bin", content="text") is None  # not "a new file"
    assert await preview(tmp_path, path="x.txt", content=None) is None
