"""search_files pages: the same order on every call and in every way a search runs (one rg,
several rg processes sharing the tree out, the Python walk), totals that say when they are a
bound, and files over the size limit left out."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from talaria.agent.tool_runner import invoke
from talaria.tools.builtin import load_builtin_tools
from talaria.tools.context import ToolContext
from talaria.tools.local import ordered, plan
from talaria.tools.local import search as local_search
from talaria.tools.local.walk import MAX_FILE_BYTES
from talaria.tools.local.workspace import LocalWorkspace
from tests.conftest import MISSING_TOOL
from tests.exec_helpers import PATIENCE_S

pytestmark = pytest.mark.anyio

HAS_RG = shutil.which("rg") is not None


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["one-rg", "shared", "joined", "python"])
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How the search runs: one `rg --sort path`; three rg processes sharing a tree cut fine
    from the start; one that others join; the Python walk. Small trees are cut as a big one
    would be, so every way meets several parts, sentinels and steals."""
    if request.param == "python":
        monkeypatch.setattr(local_search, "ripgrep_path", lambda: None)
        return request.param
    if not HAS_RG:
        pytest.skip(f"ripgrep {MISSING_TOOL}")
    workers = 1 if request.param == "one-rg" else 3
    monkeypatch.setattr(local_search, "workers", lambda: workers)
    monkeypatch.setattr(plan, "SMALL_TREE", 0)
    monkeypatch.setattr(plan, "UNITS_PER_WORKER", 3)
    monkeypatch.setattr(plan, "HEAD_PER_WORKER", 1)
    monkeypatch.setattr(plan, "PARTS_PER_WORKER", 4)
    monkeypatch.setattr(ordered, "JOIN_AFTER_S", 0.0 if request.param == "shared" else 0.001)
    return request.param


async def call(cwd: Path, **args: Any) -> dict[str, Any]:
    spec = load_builtin_tools().get("search_files")
    assert spec is not None
    return await invoke(spec, args, ToolContext(workspace=LocalWorkspace(cwd)))


def tree(root: Path) -> None:
    """Nested directories with `hit` lines in most files, names that sort differently by
    components than as strings (`a/x` before `a-b`), and a few files without a hit."""
    for top in ("a", "a-b", "b", "docs", "src", "z"):
        for sub in ("x", "y.d", "_u", "m"):
            for n in range(3):
                d = root / top / sub
                d.mkdir(parents=True, exist_ok=True)
                text = "miss\n" if (n + len(sub)) % 4 == 0 else f"hit {top}/{sub} {n}\nmiss\nhit again\n"
                (d / f"f{n}.py").write_text(text)
        (root / top / "top.py").write_text("hit top\n")
    (root / "root.py").write_text("hit root\n")
    (root / "src" / ".hidden").mkdir()
    (root / "src" / ".hidden" / "h.py").write_text("hit hidden\n")
    (root / "src" / "node_modules").mkdir()
    (root / "src" / "node_modules" / "n.py").write_text("hit vendored\n")


async def pages(root: Path, limit: int, **args: Any) -> list[Any]:
    """Every page from offset 0, following next_offset."""
    out: list[Any] = []
    offset = 0
    while True:
        page = await call(root, limit=limit, offset=offset, **args)
        assert "error" not in page, page
        out += page["matches"]
        if page["next_offset"] is None:
            assert page["truncated"] is False
            return out
        assert page["next_offset"] == offset + len(page["matches"]) and page["truncated"]
        offset = page["next_offset"]


async def test_pages_over_offsets_neither_skip_nor_repeat(tmp_path: Path, way: str) -> None:
    tree(tmp_path)
    whole = (await call(tmp_path, pattern="hit", limit=500))["matches"]
    keys = [(m["path"].split("/"), m["line"]) for m in whole]
    assert keys == sorted(keys)  # path components, then line: `a/x/...` before `a-b/...`
    assert len(whole) == len({(m["path"], m["line"]) for m in whole}) == 127
    assert not any("hidden" in m["text"] or "vendored" in m["text"] for m in whole)
    for limit in (7, 30):
        assert await pages(tmp_path, limit, pattern="hit") == whole
    assert await pages(tmp_path, 1, pattern="hit", file_glob="f1.py") == [
        m for m in whole if m["path"].endswith("/f1.py")]
    names = (await call(tmp_path, pattern="*.py", target="files", limit=500))["matches"]
    assert await pages(tmp_path, 9, pattern="*.py", target="files") == names
    assert names == sorted(names, key=lambda p: p.split("/")) and len(names) == 79
    # a glob that matches hidden and vendored names does not bring them in
    assert (await call(tmp_path, pattern="*", target="files", limit=500))["matches"] == names
    assert (await call(tmp_path, pattern="hit", file_glob="*", limit=500))["matches"] == whole


async def test_the_same_call_gives_the_same_page(tmp_path: Path, way: str) -> None:
    tree(tmp_path)
    for args in ({"pattern": "hit", "limit": 9, "offset": 20},
                 {"pattern": "*.py", "target": "files", "limit": 6, "offset": 11}):
        first = await call(tmp_path, **args)
        for _ in range(4):
            assert await call(tmp_path, **args) == first


async def test_totals_say_when_they_are_a_bound(tmp_path: Path, way: str) -> None:
    tree(tmp_path)
    page = await call(tmp_path, pattern="hit", limit=10, offset=30)
    # it stopped one match past the page: "at least 41", and there is a next page
    assert (page["total"], page["total_is_lower_bound"], page["next_offset"]) == (41, True, 40)
    last = await call(tmp_path, pattern="hit", limit=10, offset=120)
    assert len(last["matches"]) == 7 and last["total"] == 127 and last["next_offset"] is None
    assert "total_is_lower_bound" not in last  # the search ran out: every match was counted
    none = await call(tmp_path, pattern="nothing_matches_this")
    assert (none["matches"], none["total"], none["truncated"]) == ([], 0, False)
    assert "total_is_lower_bound" not in none


async def test_files_over_the_size_limit_are_left_out(tmp_path: Path, way: str) -> None:
    big = "hit big\n" + "x" * 99 + "\n"
    (tmp_path / "deep" / "er").mkdir(parents=True)
    for path in (tmp_path / "big.log", tmp_path / "deep" / "er" / "big.log"):
        with path.open("w") as f:  # one a search may name, one only its walk finds
            f.write(big * (MAX_FILE_BYTES // len(big) + 1))
        assert path.stat().st_size > MAX_FILE_BYTES
    (tmp_path / "deep" / "er" / "big.bin").write_bytes(b"hit\n\0" + b"y" * MAX_FILE_BYTES)
    (tmp_path / "deep" / "small.log").write_text("hit small\n")
    (tmp_path / "small.log").write_text(big)
    found = await call(tmp_path, pattern="hit")
    assert [(m["path"], m["line"]) for m in found["matches"]] == [
        ("deep/small.log", 1), ("small.log", 1)]
    names = await call(tmp_path, pattern="*.log", target="files")  # names: no size limit
    assert names["matches"] == ["big.log", "deep/er/big.log", "deep/small.log", "small.log"]


@pytest.mark.skipif(not HAS_RG, reason=f"ripgrep {MISSING_TOOL}")
async def test_an_entry_gone_between_the_plan_and_rg_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # rg's error for the missing entry is not the end of a part: the search goes on.
    monkeypatch.setattr(local_search, "workers", lambda: 2)
    monkeypatch.setattr(plan, "SMALL_TREE", 0)
    monkeypatch.setattr(plan, "UNITS_PER_WORKER", 3)
    monkeypatch.setattr(plan, "HEAD_PER_WORKER", 1)
    monkeypatch.setattr(ordered, "JOIN_AFTER_S", 0.0)
    tree(tmp_path)
    rest = plan.Plan.rest

    def rest_then_remove(self: plan.Plan) -> list[list[str]]:
        parts = rest(self)
        assert any(path.startswith(str(tmp_path / "docs")) for part in parts for path in part)
        shutil.rmtree(tmp_path / "docs")
        return parts

    monkeypatch.setattr(plan.Plan, "rest", rest_then_remove)
    found = await call(tmp_path, pattern="hit", limit=500)
    monkeypatch.setattr(plan.Plan, "rest", rest)
    assert found["matches"] == (await call(tmp_path, pattern="hit", limit=500))["matches"]
    assert len(found["matches"]) == 127 - 21


async def test_a_pattern_rg_refuses_runs_in_python_alike(tmp_path: Path, way: str) -> None:
    tree(tmp_path)
    found = await call(tmp_path, pattern=r"(?<=hit )top", limit=500)  # look-behind
    assert [m["path"] for m in found["matches"]] == [
        f"{top}/top.py" for top in ("a", "a-b", "b", "docs", "src", "z")]



def rg_children() -> list[int]:
    """rg processes whose parent is this process and that have not exited."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)
        except OSError:
            continue
        state, ppid = fields[1].split()[:2]
        if fields[0].endswith("(rg") and int(ppid) == os.getpid() and state not in ("Z", "X"):
            out.append(int(stat.parent.name))
    return out


@pytest.mark.skipif(not HAS_RG, reason=f"ripgrep {MISSING_TOOL}")
async def test_a_cancelled_search_leaves_no_rg_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_search, "workers", lambda: 3)
    monkeypatch.setattr(plan, "SMALL_TREE", 0)
    monkeypatch.setattr(plan, "UNITS_PER_WORKER", 4)
    monkeypatch.setattr(ordered, "JOIN_AFTER_S", 0.0)
    for d in range(40):
        (tmp_path / f"d{d:02}").mkdir()
        for f in range(100):
            (tmp_path / f"d{d:02}" / f"f{f}.txt").write_text("nothing to find here\n" * 50)
    with anyio.move_on_after(0.02) as scope:
        await LocalWorkspace(tmp_path).search("never_there", root=tmp_path)
    assert scope.cancelled_caught
    with anyio.fail_after(PATIENCE_S):
        while rg_children():  # the abandoned thread may start one more: it is killed at once
            await anyio.sleep(0.05)


@pytest.mark.skipif(not HAS_RG, reason=f"ripgrep {MISSING_TOOL}")
async def test_a_plan_is_reused_only_while_what_it_read_is_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_search, "workers", lambda: 2)
    monkeypatch.setattr(plan, "SMALL_TREE", 0)
    monkeypatch.setattr(plan, "UNITS_PER_WORKER", 3)
    monkeypatch.setattr(plan, "HEAD_PER_WORKER", 1)
    monkeypatch.setattr(ordered, "JOIN_AFTER_S", 0.0)
    tree(tmp_path)
    (tmp_path / "z" / "huge.txt").write_text("hit huge\n" * (MAX_FILE_BYTES // 9 + 1))
    for path in [tmp_path, *tmp_path.rglob("*")]:  # older than a clock tick: plans are kept
        os.utime(path, (1_000_000_000, 1_000_000_000), follow_symlinks=False)
    whole = (await call(tmp_path, pattern="hit", limit=500))["matches"]
    kept = plan.Plan.of(str(tmp_path), 2)
    assert kept.rest_parts is not None and plan.Plan.of(str(tmp_path), 2) is kept
    assert (await call(tmp_path, pattern="hit", limit=500))["matches"] == whole

    (tmp_path / "z" / "x" / "new.py").write_text("hit new\n")  # a directory the plan read
    assert plan.Plan.of(str(tmp_path), 2) is not kept
    found = (await call(tmp_path, pattern="hit", limit=500))["matches"]
    assert [m["path"] for m in found if m not in whole] == ["z/x/new.py"]

    os.utime(tmp_path / "z" / "x", (1_000_000_000, 1_000_000_000))
    await call(tmp_path, pattern="hit", limit=500)
    kept = plan.Plan.of(str(tmp_path), 2)
    (tmp_path / "z" / "huge.txt").write_text("hit no longer huge\n")  # its directory: as it was
    assert plan.Plan.of(str(tmp_path), 2) is not kept
    found = (await call(tmp_path, pattern="hit", limit=500))["matches"]
    assert ("z/huge.txt", 1) in [(m["path"], m["line"]) for m in found]


def test_a_small_tree_is_one_part_and_a_big_one_is_cut(tmp_path: Path) -> None:
    tree(tmp_path)  # ~80 files: one rg is through before more could start
    assert plan.Plan(str(tmp_path), 4).head() == [str(tmp_path)]
    for n in range(60):  # directories of directories: the guess grows with their links
        for m in range(12):
            (tmp_path / "big" / f"d{n:02}" / f"e{m:02}").mkdir(parents=True)
    head = plan.Plan(str(tmp_path), 4).head()
    assert len(head) > 1 and all(p.startswith(str(tmp_path) + os.sep) for p in head)
    assert plan.Plan(str(tmp_path), 1).head() == [str(tmp_path)]  # one core: one rg
