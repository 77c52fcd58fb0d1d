"""The rg a search leaves waiting for its next page (`talaria.tools.local.ripgrep`), on real
rg and real files: it waits without using the CPU, the next page reads on from it, and it is
stopped when a search is cancelled, ends, is asked anew, or is one too many; a write or a
command in the workspace makes the next page search again."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import anyio
import pytest

from talaria.tools.local import ripgrep
from talaria.tools.local.workspace import LocalWorkspace
from talaria.tools.workspace import SearchPage, path_order
from tests import processes

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep not installed"),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def no_runs() -> object:
    ripgrep.RUNS.clear()
    yield
    ripgrep.RUNS.clear()


def big_tree(root: Path, dirs: int = 8, files: int = 50) -> int:
    """More output than rg's pipe holds: rg has to wait for a reader. Returns the matches."""
    for d in range(dirs):
        (root / f"d{d}").mkdir()
        for n in range(files):
            (root / f"d{d}" / f"f{n}.txt").write_text(f"hit {d} {n} " + "x" * 200 + "\n" * 2 * 10)
    return dirs * files


def rg_children() -> dict[int, tuple[str, int]]:
    """pid → (state, CPU ticks) of this process's rg children, zombies too. The state is "S"
    only when every thread sleeps: the main thread's own state says nothing of rg's search
    threads, which may still be walking (its ticks count them all)."""
    out = {}
    for proc in processes():
        try:
            stat = (proc / "stat").read_text()
            name, rest = (stat[stat.index("(") + 1:stat.rindex(")")],
                          stat[stat.rindex(")") + 2:].split())
            if name != "rg" or int(rest[1]) != os.getpid():
                continue
            state = rest[0]
            if state == "S":
                for task in (proc / "task").iterdir():
                    thread = (task / "stat").read_text()
                    if (other := thread[thread.rindex(")") + 2:].split()[0]) != "S":
                        state = other
                        break
        except (OSError, ValueError):  # gone meanwhile
            continue
        out[int(proc.name)] = (state, int(rest[11]) + int(rest[12]))
    return out


async def settled_children(count: int | None = None,
                           seconds: float = 10.0) -> dict[int, tuple[str, int]]:
    """The rg children once none runs (every thread asleep, no CPU used since the last look,
    50 ms before) and, given `count`, there are that many (a stopped one goes on the reaper
    thread, a moment later)."""
    deadline = time.monotonic() + seconds
    last: dict[int, tuple[str, int]] | None = None
    while True:
        children = rg_children()
        if (all(state == "S" for state, _ in children.values()) and children == last
                and count in (None, len(children))) or time.monotonic() > deadline:
            return children
        last = children
        await anyio.sleep(0.05)


async def test_a_page_leaves_rg_waiting_idle_and_the_next_reads_on(tmp_path: Path) -> None:
    total = big_tree(tmp_path)
    ws = LocalWorkspace(tmp_path)
    first = await ws.search("hit", root=tmp_path, limit=10)
    assert (len(first.matches), first.total_exact) == (10, False)
    children = await settled_children(1)
    assert len(children) == 1  # waiting on its full pipe
    await anyio.sleep(0.3)
    assert rg_children() == children  # asleep, no CPU used meanwhile
    second = await ws.search("hit", root=tmp_path, limit=10, offset=10)
    assert rg_children().keys() == children.keys()  # the same rg, read on
    assert not set(first.matches) & set(second.matches)
    rest = await ws.search("hit", root=tmp_path, limit=1000, offset=20)
    assert rest.total_exact and rest.total == total == 20 + len(rest.matches)
    assert len(set(first.matches) | set(second.matches) | set(rest.matches)) == total
    assert rg_children() == {}  # it ended: nothing waits


async def test_a_new_first_page_stops_the_old_run(tmp_path: Path) -> None:
    big_tree(tmp_path)
    ws = LocalWorkspace(tmp_path)
    await ws.search("hit", root=tmp_path, limit=5)
    old = set(await settled_children(1))
    await ws.search("hit", root=tmp_path, limit=5)
    new = set(await settled_children(1))
    assert len(old) == len(new) == 1 and old != new


async def test_runs_past_the_most_are_stopped_the_oldest_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big_tree(tmp_path)
    monkeypatch.setattr(ripgrep, "MAX_RUNS", 2)
    ws, other = LocalWorkspace(tmp_path), LocalWorkspace(tmp_path)
    await ws.search("hit", root=tmp_path, limit=5)
    first = set(await settled_children(1))
    await other.search("hit", root=tmp_path, limit=5)  # another workspace: a run of its own
    await ws.search("x+", root=tmp_path, limit=5)
    children = await settled_children(2)
    assert len(children) == 2 and not first & set(children)
    monkeypatch.setattr(ripgrep, "RUN_IDLE_S", 0.0)  # idle too long: stopped at the next search
    await ws.search("nowhere", root=tmp_path)
    assert await settled_children(0) == {}


async def test_a_cancelled_search_stops_its_rg(tmp_path: Path) -> None:
    big_tree(tmp_path)
    ws = LocalWorkspace(tmp_path)
    for delay in (0.0, 0.001, 0.005):
        with anyio.move_on_after(delay):
            await ws.search("hit", root=tmp_path, limit=3000)
        assert len(ripgrep.RUNS) <= 1
        await ws.search("nowhere", root=tmp_path)  # ran to its end: nothing left of either
        assert await settled_children(0) == {}


async def test_a_write_or_a_command_makes_the_next_page_search_again(tmp_path: Path) -> None:
    total = big_tree(tmp_path)
    ws = LocalWorkspace(tmp_path)
    for change in ("write", "run"):
        await ws.search("hit", root=tmp_path, limit=5)
        assert len(await settled_children(1)) == 1
        if change == "write":
            await ws.write_text(tmp_path / "new.txt", "hit new\n")
        else:
            await ws.run("echo hit run > run.txt", cwd=tmp_path, timeout=10, output_limit=1000)
        assert await settled_children(0) == {}
        page = await ws.search("hit", root=tmp_path, limit=1000, offset=5)
        total += 1  # new.txt, then run.txt
        assert page.total == total and page.total_exact
        assert page.matches == sorted(page.matches, key=path_order)


@pytest.mark.parametrize("line", ["plain hit", 'a "quoted" \\ back\\slash\ttab hit', "é 日本 😀 hit",
                                  'hit "lines":{"text":"x"} "line_number":9,', "hit\r"])
async def test_a_match_record_reads_as_rg_wrote_it(tmp_path: Path, line: str) -> None:
    # The line's text is decoded alone, not the whole record: escapes, non-ASCII, text that
    # looks like the keys, a CR before the newline, from rg itself.
    (tmp_path / 'we"ird\\name.txt').write_bytes(f"miss\n{line}\n".encode())
    page = await LocalWorkspace(tmp_path).search("hit", root=tmp_path)
    assert [(m.path, m.line, m.text) for m in page.matches] == \
        [('we"ird\\name.txt', 2, line.removesuffix("\r"))]


async def test_pages_asked_at_once_are_whole(tmp_path: Path) -> None:
    # A model's parallel calls: a first page starts a new search in place of the one the
    # other call reads on; that read still gets its whole page, then its rg is stopped.
    total = big_tree(tmp_path)
    ws = LocalWorkspace(tmp_path)
    for _ in range(3):
        await ws.search("hit", root=tmp_path, limit=50)
        pages: dict[int, SearchPage] = {}

        async def page(offset: int, pages: dict[int, SearchPage] = pages) -> None:
            pages[offset] = await ws.search("hit", root=tmp_path, limit=50, offset=offset)

        async with anyio.create_task_group() as tg:
            tg.start_soon(page, 50)
            tg.start_soon(page, 0)
        for offset, got in pages.items():
            assert len(got.matches) == 50 and not got.total_exact and got.total < total, offset
    assert len(await settled_children(1)) == 1  # the latest search's, waiting


@pytest.mark.parametrize("memfd", [True, False])
async def test_a_pattern_rg_refuses_is_told_from_its_errors_and_nothing_is_left_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memfd: bool
) -> None:
    """rg's stderr goes to a memfd, or an unlinked temporary file where the system has none."""
    (tmp_path / "a.txt").write_text("const foo = 1\n")
    if not memfd:
        monkeypatch.delattr(os, "memfd_create")
    ws = LocalWorkspace(tmp_path)
    await ws.search("nowhere", root=tmp_path)  # the reaper thread and what it opens, first
    before = set(os.listdir("/proc/self/fd"))
    for _ in range(3):
        page = await ws.search(r"(?<=const )\w+", root=tmp_path)  # look-behind: rg refuses
        assert [(m.path, m.line, m.text) for m in page.matches] == [("a.txt", 1, "const foo = 1")]
        assert (await ws.search("foo", root=tmp_path)).total == 1
    await settled_children(0)
    assert set(os.listdir("/proc/self/fd")) <= before


async def test_where_rg_needs_subprocess_a_run_pages_and_ends_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without `os.waitid` (macOS), rg starts through `subprocess.Popen`."""
    monkeypatch.delattr(os, "waitid")
    total = big_tree(tmp_path)
    ws = LocalWorkspace(tmp_path)
    first = await ws.search("hit", root=tmp_path, limit=10)
    children = await settled_children(1)
    assert len(children) == 1
    rest = await ws.search("hit", root=tmp_path, limit=1000, offset=10)
    assert rg_children().keys() <= children.keys()  # read on, not started anew
    assert len(set(first.matches) | set(rest.matches)) == total
    await ws.search("hit", root=tmp_path, limit=5)
    with anyio.move_on_after(0.001):
        await ws.search("hit", root=tmp_path, limit=3000)
    ripgrep.RUNS.clear()
    assert await settled_children(0) == {}


async def test_a_page_decodes_only_the_matches_it_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from talaria.tools.local import rg_json

    big_tree(tmp_path)
    decoded: list[str] = []
    real = rg_json._match
    monkeypatch.setattr(rg_json, "_match", lambda raw, path: decoded.append(path) or real(raw, path))
    ws = LocalWorkspace(tmp_path)
    third = await ws.search("hit", root=tmp_path, limit=10, offset=100)
    assert len(third.matches) == 10 and len(decoded) == 10
    second = await ws.search("hit", root=tmp_path, limit=10, offset=50)  # the same run, read on
    assert len(decoded) == 20 and not set(second.matches) & set(third.matches)
    assert all(m.text and m.text.startswith("hit ") for m in [*second.matches, *third.matches])


def test_rg_gets_this_process_environment_as_it_is_now(monkeypatch: pytest.MonkeyPatch) -> None:
    """`posix_spawn` is given `os.environ`'s own bytes: what it holds after a change too."""
    monkeypatch.setenv("TALARIA_SEARCH_PROBE", "é 1")
    monkeypatch.delenv("HOME", raising=False)
    errors = ripgrep._error_file()
    child = ripgrep._spawn([shutil.which("env") or "/usr/bin/env", "-0"], errors)
    try:
        out = b""
        while chunk := os.read(child.stdout, 65536):
            out += chunk
        assert child.wait() == 0
    finally:
        child.close()
        os.close(errors)
    assert dict(v.split("=", 1) for v in out.decode().split("\0") if v) == dict(os.environ)
