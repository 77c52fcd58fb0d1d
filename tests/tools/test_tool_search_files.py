"""search_files through the registry, with ripgrep and with the Python fallback."""

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


async def call(cwd: Path, **args: Any) -> dict[str, Any]:
    spec = load_builtin_tools().get("search_files")
    assert spec is not None
    return await invoke(spec, args, ToolContext(workspace=LocalWorkspace(cwd)))


def tree(root: Path) -> None:
    for rel, text in {
        "src/app.py": "import os\n\ndef run():\n    os.getcwd()  # TODO\n",
        "src/lib/util.py": "def helper():\n    return 'TODO later'\n",
        "README.md": "TODO: docs\n",
        "long.txt": "TODO " + "x" * 1000 + "\n",
        ".git/config": "TODO\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


async def test_content_matches_and_paging(tmp_path: Path, backend: str) -> None:
    tree(tmp_path)
    r = await call(tmp_path, pattern="TODO")
    assert r["total"] == 4 and r["truncated"] is False and r["next_offset"] is None
    assert [(m["path"], m["line"]) for m in r["matches"]] == [
        ("README.md", 1),
        ("long.txt", 1),
        ("src/app.py", 4),
        ("src/lib/util.py", 2),
    ]
    assert r["matches"][1]["text"] == "TODO " + "x" * 295 + "..."
    page = await call(tmp_path, pattern="TODO", limit=2, offset=1)
    paths = [m["path"] for m in page["matches"]]  # a new search: rg's walk finds files in any order
    assert paths == sorted(paths) and len(set(paths)) == 2
    assert set(paths) < {"README.md", "long.txt", "src/app.py", "src/lib/util.py"}
    if backend == "python":  # the walk's order is the path order
        assert paths == ["long.txt", "src/app.py"]
    assert (page["total"], page["truncated"], page["next_offset"]) == (4, True, 3)
    assert page["total_is_lower_bound"] is True  # it stopped one past the page: "at least 4"
    first = await call(tmp_path, pattern="TODO", limit=1)
    assert (first["total"], first["total_is_lower_bound"], first["next_offset"]) == (2, True, 1)
    assert "total_is_lower_bound" not in r  # a search that ran out counted every match


async def test_scoped_path_and_glob_give_cwd_relative_paths(tmp_path: Path, backend: str) -> None:
    tree(tmp_path)
    r = await call(tmp_path, pattern=r"def \w+", path="src", file_glob="*.py")
    assert [(m["path"], m["line"], m["text"]) for m in r["matches"]] == [
        ("src/app.py", 3, "def run():"),
        ("src/lib/util.py", 1, "def helper():"),
    ]
    one = await call(tmp_path, pattern="TODO", path="src/app.py")
    assert [(m["path"], m["line"]) for m in one["matches"]] == [("src/app.py", 4)]
    outside = await call(tmp_path / "src", pattern="TODO", path="..", file_glob="*.md")
    assert [m["path"] for m in outside["matches"]] == [str(tmp_path / "README.md")]


async def test_files_target(tmp_path: Path, backend: str) -> None:
    tree(tmp_path)
    r = await call(tmp_path, pattern="*.py", target="files")
    assert r["matches"] == ["src/app.py", "src/lib/util.py"] and r["total"] == 2
    assert (await call(tmp_path, pattern="util", target="files"))["matches"] == ["src/lib/util.py"]


async def test_errors(tmp_path: Path, backend: str) -> None:
    assert "invalid regex" in (await call(tmp_path, pattern="(oops"))["error"]
    assert (await call(tmp_path, pattern="x", path="nope"))["error"] == "Path not found: nope"
    assert "pattern" in (await call(tmp_path, pattern=""))["error"]
    assert "target" in (await call(tmp_path, pattern="x", target="dirs"))["error"]


async def test_secrets_are_left_out_and_counted(tmp_path: Path, backend: str) -> None:
    from talaria.tools.paths import Sensitive

    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "server.pem").write_text("BEGIN KEY\n")
    (tmp_path / "deploy" / "id_ed25519").write_text("BEGIN KEY\n")
    (tmp_path / "deploy" / "README.md").write_text("BEGIN here\n")
    spec = load_builtin_tools().get("search_files")
    assert spec is not None
    conceal = Sensitive(tmp_path / "home").secret
    ctx = ToolContext(workspace=LocalWorkspace(tmp_path), conceal=conceal)
    for target, pattern in (("content", "BEGIN"), ("files", "*")):
        r = await spec.handler({"pattern": pattern, "target": target}, ctx)
        shown = [m if isinstance(m, str) else m["path"] for m in r["matches"]]
        assert shown == ["deploy/README.md"] and r["sensitive_skipped"] == 2, r
        assert "ask the user" in r["note"] and r["total"] == 3
    plain = await spec.handler({"pattern": "BEGIN"}, ToolContext(workspace=LocalWorkspace(tmp_path)))
    assert len(plain["matches"]) == 3 and "sensitive_skipped" not in plain
