"""The local search cut in two (`talaria.tools.local.ripgrep`): one real `rg --sort path`
over the whole tree, and one over its tail beside it from the start or never, give the pages
one would on real trees of several shapes, compared with the Python walk."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from talaria.tools.local import ripgrep
from talaria.tools.local import search as local_search
from talaria.tools.local.walk import SKIP_DIRS
from talaria.tools.local.workspace import LocalWorkspace
from talaria.tools.workspace import SearchPage

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep not installed"),
]

QUERIES: list[tuple[str, str, str | None, int, int]] = [
    # (pattern, target, file_glob, limit, offset)
    ("hit", "content", None, 7, 0),
    ("hit", "content", None, 5, 11),
    ("hit", "content", None, 500, 0),
    ("hit", "content", None, 5, 60),
    ("hit", "content", "*.py", 500, 0),
    ("hit", "content", "*/x/*.py", 500, 0),
    ("again$", "content", None, 500, 0),
    ("nowhere_at_all", "content", None, 50, 0),
    (r"hit (?=top)", "content", None, 50, 0),  # look-ahead: rg refuses it, Python runs it
    ("*.py", "files", None, 4, 3),
    ("*.py", "files", None, 500, 0),
    ("f1", "files", None, 500, 0),
    ("*.nope", "files", None, 50, 0),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _dirs(root: Path, names: tuple[str, ...]) -> None:
    # "b-c" sorts before "b/" as text but after the directory "b" by component; "é" is past
    # ASCII; hidden, skipped and binary files are in both parts.
    for a in names:
        for b in ("x", "y.d", "_u"):
            for n in range(3):
                (root / a / b).mkdir(parents=True, exist_ok=True)
                (root / a / b / f"f{n}.py").write_text(f"hit {a}{b}{n}\nmiss\nhit again\n")
        (root / a / "top.py").write_text("hit top\n")
        (root / a / ".h.py").write_text("hit hidden\n")
        (root / a / "bin.dat").write_bytes(b"hit\nhit\0binary\n")
        (root / a / "node_modules").mkdir()
        (root / a / "node_modules" / "i.py").write_text("hit module\n")


def several_dirs(root: Path) -> None:
    _dirs(root, ("a", "b-c", "b", "z", "é"))
    (root / "root.py").write_text("hit root\r\nhit again\r\n")
    (root / "zz.txt").write_text("hit after the last directory\n")
    (root / ".hidden").mkdir()
    (root / ".hidden" / "h.py").write_text("hit hidden\n")


def one_dir(root: Path) -> None:
    # The cut is inside pkg/, the only directory at the top.
    _dirs(root / "pkg", ("a", "b", "c"))
    (root / "aa.py").write_text("hit before\n")
    (root / "pkg" / "README").write_text("hit readme\n")


def files_after_the_last_dir(root: Path) -> None:
    # rg would search a file it is given whatever its globs: no cut then.
    _dirs(root, ("a", "b"))
    (root / "zz.py").write_text("hit after\n")


def glob_characters(root: Path) -> None:
    _dirs(root, ("a", "b[1]", "c"))  # a name a glob cannot spell: searched whole


SHAPES: dict[str, Callable[[Path], None]] = {
    "several_dirs": several_dirs,
    "one_dir": one_dir,
    "files_after_the_last_dir": files_after_the_last_dir,
    "glob_characters": glob_characters,
}


async def _pages(root: Path) -> list[SearchPage]:
    ws = LocalWorkspace(root)
    return [await ws.search(p, root=root, target=t, file_glob=g, limit=n, offset=o)
            for p, t, g, n, o in QUERIES]


@pytest.mark.parametrize("tail_after_s", [0.0, 60.0])  # the tail's rg at once, or never
@pytest.mark.parametrize("shape", SHAPES)
async def test_two_parts_give_the_python_walks_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str, tail_after_s: float
) -> None:
    SHAPES[shape](tmp_path)
    monkeypatch.setattr(ripgrep, "TAIL_AFTER_S", tail_after_s)
    with_rg = await _pages(tmp_path)
    monkeypatch.setattr(local_search, "ripgrep_path", lambda: None)
    without = await _pages(tmp_path)
    for got, want, query in zip(with_rg, without, QUERIES, strict=True):
        assert got == want, query
    assert with_rg[2].total_exact and with_rg[2].total > 30


def test_the_cut_is_at_the_last_directory_of_the_first_level_with_two(tmp_path: Path) -> None:
    # (globs that leave the tail out of the whole, the tail's directories)
    several_dirs(tmp_path)
    assert ripgrep.split(str(tmp_path), SKIP_DIRS) == (["!/é"], ["é"])  # past "zz.txt"
    (tmp_path / "one").mkdir()
    one_dir(tmp_path / "one")
    assert ripgrep.split(str(tmp_path / "one"), SKIP_DIRS) == (["!/pkg/c"], ["pkg/c"])
    (tmp_path / "after").mkdir()
    files_after_the_last_dir(tmp_path / "after")
    assert ripgrep.split(str(tmp_path / "after"), SKIP_DIRS) is None
    (tmp_path / "glob").mkdir()
    glob_characters(tmp_path / "glob")
    assert ripgrep.split(str(tmp_path / "glob"), SKIP_DIRS) is None
    (tmp_path / "link").symlink_to(tmp_path)  # rg anchors globs at its real directory
    assert ripgrep.split(str(tmp_path / "link"), SKIP_DIRS) is None


async def test_no_rg_is_left_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A page found in the head kills the tail's rg, a page in the tail the head's: none is
    # left running or a zombie.
    several_dirs(tmp_path)
    monkeypatch.setattr(ripgrep, "TAIL_AFTER_S", 0.0)
    ws = LocalWorkspace(tmp_path)
    for offset in (0, 60, 500):
        await ws.search("hit", root=tmp_path, limit=3, offset=offset)
    assert _rg_children() == []


def _rg_children() -> list[int]:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:]
        if name == "rg" and int(rest.split()[1]) == os.getpid():
            out.append(int(pid))
    return out
