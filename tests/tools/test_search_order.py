"""The local search's pages on real rg and real files: the same page on every call, offset
pages that neither overlap nor skip, and globs that do not bring back what the walk skips."""

from __future__ import annotations

from pathlib import Path

import pytest

from talaria.tools.local.workspace import LocalWorkspace
from talaria.tools.workspace import SearchMatch, path_order

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def make_tree(root: Path) -> None:
    # "b-c" sorts before "b/" as text but after the directory "b" by component; "é" is past
    # ASCII; hidden files and node_modules match the globs below by name.
    for a in ("a", "b-c", "b", "z", "é"):
        for b in ("x", "y.d", "_u"):
            for n in range(3):
                (root / a / b).mkdir(parents=True, exist_ok=True)
                (root / a / b / f"f{n}.py").write_text(f"hit {a}{b}{n}\nmiss\nhit again\n")
        (root / a / "top.py").write_text("hit top\n")
    (root / "root.py").write_text("hit root\r\nhit again\r\n")
    (root / "nodes.txt").write_text("hit nodes\n")
    (root / "z" / "app.js").write_text("hit app\n")
    (root / "b" / ".hidden").mkdir()
    (root / "b" / ".hidden" / "h.py").write_text("hit hidden\n")
    (root / "b" / ".h.py").write_text("hit hidden file\n")
    (root / ".eslintrc.js").write_text("hit\n")
    (root / "node_modules" / "m").mkdir(parents=True)
    (root / "node_modules" / "m" / "i.py").write_text("hit module\n")
    (root / "a" / "__pycache__").mkdir()
    (root / "a" / "__pycache__" / "c.py").write_text("hit cache\n")


async def test_offset_pages_neither_overlap_nor_skip(tmp_path: Path, backend: str) -> None:
    make_tree(tmp_path)
    ws = LocalWorkspace(tmp_path)
    for target, pattern in (("content", "hit"), ("files", "*.py")):
        whole = await ws.search(pattern, root=tmp_path, target=target, limit=500)
        assert whole.total_exact and whole.total == len(whole.matches)
        assert whole.matches == sorted(whole.matches, key=path_order)  # one page: path order
        paged = await _paged(ws, tmp_path, target, pattern, 7)
        assert sorted(paged, key=path_order) == whole.matches


async def _paged(ws: LocalWorkspace, root: Path, target: str, pattern: str,
                 limit: int) -> list[SearchMatch]:
    """Every page of a search in turn: each in path order, a page asked for again the same."""
    paged: list[SearchMatch] = []
    while True:
        page = await ws.search(pattern, root=root, target=target, limit=limit, offset=len(paged))
        assert page.matches == sorted(page.matches, key=path_order)
        if paged:  # a first page asked again starts a new search (files may have changed)
            again = await ws.search(pattern, root=root, target=target, limit=limit,
                                    offset=len(paged))
            assert page == again  # the same page on every call
        paged += page.matches
        if page.total_exact:
            return paged
        assert page.total > len(paged)  # a bound, and it says there is more


async def test_pages_of_a_big_tree_follow_one_search(tmp_path: Path, backend: str) -> None:
    # rg's parallel walk finds files in no fixed order: the pages of one search read on from
    # where the last stopped, so together they hold every match once.
    for d in range(12):
        for n in range(40):
            (tmp_path / f"d{d}").mkdir(exist_ok=True)
            (tmp_path / f"d{d}" / f"f{n}.txt").write_text("hit\nmiss\nhit again\n" * 2)
    ws = LocalWorkspace(tmp_path)
    for target, pattern, limit in (("content", "hit", 50), ("content", "again", 37),
                                   ("files", "*.txt", 45)):
        whole = await _paged(ws, tmp_path, target, pattern, 500)
        paged = await _paged(ws, tmp_path, target, pattern, limit)
        assert len(paged) == len(set(paged)) == 12 * 40 * (4 if pattern == "hit" else
                                                           2 if pattern == "again" else 1)
        assert set(paged) == set(whole)


@pytest.mark.parametrize(("pattern", "target", "glob"), [
    ("*", "files", None),
    ("*.py", "files", None),
    ("*.js", "files", None),
    ("node*", "files", None),
    ("hit", "content", "*.py"),
    ("hit", "content", "*"),
    ("hit", "content", "*.{js,py}"),
])
async def test_a_glob_brings_back_nothing_the_walk_skips(
    tmp_path: Path, backend: str, pattern: str, target: str, glob: str | None
) -> None:
    # rg's last matching glob wins, over its hidden-file rule too: `*.js` listed .eslintrc.js
    # and `*` the files in node_modules until the skipped names came after the given glob.
    make_tree(tmp_path)
    page = await LocalWorkspace(tmp_path).search(pattern, root=tmp_path, target=target,
                                                 file_glob=glob, limit=500)
    paths = {m.path for m in page.matches}
    assert page.total_exact and paths
    for skipped in ("b/.h.py", "b/.hidden/h.py", ".eslintrc.js", "node_modules/m/i.py",
                    "a/__pycache__/c.py"):
        assert skipped not in paths


def test_a_page_is_arranged_in_path_order_however_it_was_found() -> None:
    from talaria.tools.workspace import SearchPage

    found = [SearchMatch("a-b.py", 3, "x"), SearchMatch("a/x.py", 9, "x"), SearchMatch("a/x.py", 2, "x"),
             SearchMatch("a-b.py", 1, "x"), SearchMatch("b.py", 1, "x"), SearchMatch("a/x.py", 5, "x"),
             SearchMatch("names.txt"), SearchMatch("a/names.txt")]
    page = SearchPage.arranged(found, total=20, complete=False)
    assert page.matches == sorted(found, key=path_order)
    assert (page.total, page.total_exact) == (20, False)
