"""LocalWorkspace on real files and real subprocesses."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import anyio
import pytest

from talaria.tools import workspace as workspace_seam
from talaria.tools.local import search as local_search
from talaria.tools.local import workspace as local
from talaria.tools.local.workspace import MAX_READ_BYTES, LocalWorkspace
from talaria.tools.workspace import WorkspaceError, path_order
from tests.exec_helpers import PATIENCE_S

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie (this container's init does not reap)."""
    try:
        os.kill(pid, 0)
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (ProcessLookupError, FileNotFoundError):
        return False
    return state not in ("Z", "X")


# --- read_text / write_text ---------------------------------------------------------------


async def test_read_text_utf8_bom_and_crlf_kept(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"\xef\xbb\xbfh\xc3\xa9\r\n\xf0\x9f\x98\x80\r\n")
    assert await LocalWorkspace(tmp_path).read_text(tmp_path / "a.txt") == "hé\r\n😀\r\n"


async def test_read_text_refusals(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    (tmp_path / "nul.bin").write_bytes(b"abc\0def")
    (tmp_path / "latin1.txt").write_bytes(b"caf\xe9\n")
    with (tmp_path / "huge.txt").open("wb") as f:
        f.truncate(MAX_READ_BYTES + 1)  # sparse: cheap to make
    with pytest.raises(WorkspaceError, match="binary"):
        await ws.read_text(tmp_path / "nul.bin")
    with pytest.raises(WorkspaceError, match="binary"):
        await ws.read_text(tmp_path / "latin1.txt")
    with pytest.raises(WorkspaceError, match="too large"):
        await ws.read_text(tmp_path / "huge.txt")
    with pytest.raises(WorkspaceError, match="directory"):
        await ws.read_text(tmp_path)
    with pytest.raises(FileNotFoundError):
        await ws.read_text(tmp_path / "missing.txt")


async def test_write_text_creates_parents_and_replaces_atomically(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    target = tmp_path / "a" / "b" / "c.txt"
    await ws.write_text(target, "one\n")
    await ws.write_text(target, "two 😀\n")
    assert target.read_text(encoding="utf-8") == "two 😀\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["c.txt"]  # no temp left


async def test_write_text_keeps_mode_and_new_files_follow_umask(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    await ws.write_text(script, "#!/bin/sh\necho hi\n")
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    old = os.umask(0o022)
    try:
        await ws.write_text(tmp_path / "new1.txt", "x")
        os.umask(0o002)
        await ws.write_text(tmp_path / "new2.txt", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new1.txt").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "new2.txt").stat().st_mode) == 0o664


async def test_write_text_through_symlink_keeps_link_and_bom(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    real = tmp_path / "real.txt"
    real.write_bytes(b"\xef\xbb\xbfold\n")
    (tmp_path / "link.txt").symlink_to(real)
    await ws.write_text(tmp_path / "link.txt", "new\n")
    assert (tmp_path / "link.txt").is_symlink()
    assert real.read_bytes() == b"\xef\xbb\xbfnew\n"


async def test_write_text_onto_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="directory"):
        await LocalWorkspace(tmp_path).write_text(tmp_path, "x")


# --- search: ripgrep and the Python fallback agree ------------------------------------------


def make_tree(root: Path) -> None:
    files = {
        "a.py": "def foo():\n    return 1  # TODO\n",
        "b.txt": "foo bar\nnothing\nFOO\n",
        "a-b.py": "foo = 2\n",
        "a.txt": "foo in a.txt\n",
        "src/main.py": "import foo\n\ndef main():\n    foo.run()  # FIXME\n",
        "src/util/helpers.py": "def helper():\n    pass\n",
        "src/web/app.ts": "const foo = 1;\n",
        "src/web/view.tsx": "export const Foo = () => null; // foo\n",
        "docs/readme.md": "# Foo\nUse foo here.\n",
        "docs/日本語.md": "日本語のテキスト foo\n",
        "unicode.txt": "emoji 😀 foo\nCJK 漢字 foo\ncombining e\u0301 foo\n",
        "crlf.txt": "line end\r\nfoo end\r\n",
        "nonewline.txt": "last foo",
        "escapes.txt": 'tab\tfoo "quoted" back\\slash foo\nfoo \x1b[0m\\n\nfoo\rmid\r\nfoo ends \\',
        "empty.txt": "",
        "build/out.js": "foo()\n",
        ".gitignore": "*.txt\nbuild/\n",
        ".env": "FOO=1\n",
        ".hidden/x.py": "foo\n",
        "node_modules/pkg/index.js": "foo\n",
        "src/node_modules/x.js": "foo\n",
    }
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text.encode("utf-8"))
    (root / "bin.dat").write_bytes(b"foo\0binary\n")
    (root / "late.bin").write_bytes(b"foo early\n" + b"x" * 200_000 + b"\0")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "a.py").write_text("foo\n")
    (root / "link.py").symlink_to(root / "a.py")
    (root / "linkdir").symlink_to(root / "src")


CONTENT_QUERIES = [
    ("foo", None),
    (r"^def \w+", None),
    ("TODO|FIXME", None),
    ("日本|漢字", None),
    ("end$", None),
    (r"(?<=const )\w+", None),  # look-behind: rg rejects it, Python runs it
    ("foo", "*.py"),
    ("foo", "*.{ts,tsx}"),
    ("foo", "src/*.py"),
    ("foo", "**/*.py"),
    ("nomatch_anywhere", None),
]
FILE_QUERIES = [
    ("*.py", None),
    ("helpers", None),
    ("*.{ts,md}", None),
    ("src/**/*.py", None),
    ("*", "*.txt"),
]


async def _run_queries(ws: LocalWorkspace, root: Path) -> list[object]:
    out: list[object] = []
    for pattern, glob in CONTENT_QUERIES:
        out.append(await ws.search(pattern, root=root, file_glob=glob, limit=1000))
    for pattern, glob in FILE_QUERIES:
        out.append(await ws.search(pattern, root=root, target="files", file_glob=glob))
    out.append(await ws.search("foo", root=root / "src" / "main.py"))
    # A page short of the end: the backends may find other matches first (rg's walk is
    # parallel); it holds as many, in path order, of the ones the whole search finds.
    page, whole = (await ws.search("foo", root=root, limit=3, offset=2),
                   await ws.search("foo", root=root, limit=1000))
    assert set(page.matches) <= set(whole.matches)
    assert page.matches == sorted(page.matches, key=path_order)
    out.append((len(page.matches), page.total >= 6, page.total_exact))
    return out


@pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep not installed")
async def test_ripgrep_and_python_fallback_agree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_tree(tmp_path)
    ws = LocalWorkspace(tmp_path)
    with_rg = await _run_queries(ws, tmp_path)
    monkeypatch.setattr(local_search, "ripgrep_path", lambda: None)
    without = await _run_queries(ws, tmp_path)
    for a, b, q in zip(with_rg, without, CONTENT_QUERIES + FILE_QUERIES + [0, 0], strict=True):
        assert a == b, q


async def test_search_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_tree(tmp_path)
    monkeypatch.setattr(local_search, "ripgrep_path", lambda: None)
    ws = LocalWorkspace(tmp_path)
    page = await ws.search("foo", root=tmp_path, limit=1000)
    found, total = page.matches, page.total
    paths = [m.path for m in found]
    assert total == len(found)
    assert paths == sorted(paths, key=lambda p: p.split("/"))  # by components: a/x before a-b
    assert "build/out.js" in paths and "a.txt" in paths  # .gitignore is not honoured
    for skipped in (
        ".env",
        ".hidden/x.py",
        "node_modules/pkg/index.js",
        "src/node_modules/x.js",
        "__pycache__/a.py",
        "bin.dat",
        "late.bin",
        "link.py",
        "linkdir/main.py",
    ):
        assert skipped not in paths
    assert ("crlf.txt", 2, "foo end") in [(m.path, m.line, m.text) for m in found]
    assert ("nonewline.txt", 1, "last foo") in [(m.path, m.line, m.text) for m in found]
    found = (await ws.search("end$", root=tmp_path)).matches
    assert [(m.path, m.line) for m in found] == [("crlf.txt", 1), ("crlf.txt", 2)]
    found = (await ws.search("*.py", root=tmp_path, target="files")).matches
    assert [m.path for m in found] == ["a-b.py", "a.py", "src/main.py", "src/util/helpers.py"]
    found = (await ws.search("foo", root=tmp_path / "src" / "main.py")).matches
    assert [(m.path, m.line) for m in found] == [(".", 1), (".", 4)]
    with pytest.raises(WorkspaceError, match="invalid regex"):
        await ws.search("(unclosed", root=tmp_path)
    with pytest.raises(FileNotFoundError):
        await ws.search("x", root=tmp_path / "missing")


async def test_search_stops_past_the_page_and_says_its_total_is_a_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(20):
        (tmp_path / f"f{n:02}.txt").write_text("hit\n")
    (tmp_path / "many.txt").write_text("hit\n" * 30)
    for rg in (shutil.which("rg"), None):
        monkeypatch.setattr(local_search, "ripgrep_path", lambda rg=rg: rg)
        ws = LocalWorkspace(tmp_path)

        async def page(pattern: str = "hit", ws: LocalWorkspace = ws,
                       **kw: int) -> tuple[int, int, bool]:
            found = await ws.search(pattern, root=tmp_path, file_glob="f*", **kw)
            return len(found.matches), found.total, found.total_exact

        assert await page(limit=2) == (2, 3, False)  # stopped at one past the page
        assert await page(limit=5, offset=14) == (5, 20, False)
        assert await page(limit=5, offset=15) == (5, 20, True)  # ran out
        assert await page(limit=50) == (20, 20, True)
        # A file's matches are read whole: one past the page may be 30 past it.
        found = await ws.search("hit", root=tmp_path, file_glob="many.txt", limit=2)
        assert ([m.line for m in found.matches], found.total) == ([1, 2], 30 if rg else 3)
        monkeypatch.setattr(workspace_seam, "MAX_SEARCH_MATCHES", 5)
        assert await page(limit=2, offset=10, ws=LocalWorkspace(tmp_path)) == (0, 5, False)
        monkeypatch.undo()  # a far offset collects 5


# --- run ---------------------------------------------------------------------------------


async def run(ws: LocalWorkspace, command: str, **kw: float) -> local.CommandResult:
    opts = {"timeout": 10.0, "output_limit": 10_000.0} | kw
    return await ws.run(
        command, cwd=ws.cwd, timeout=opts["timeout"], output_limit=int(opts["output_limit"])
    )


async def test_run_exit_codes_merged_output_and_no_stdin(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    r = await run(ws, "echo out; echo err >&2; exit 3")
    assert (r.exit_code, r.output, r.timed_out, r.omitted_bytes) == (3, "out\nerr\n", False, 0)
    assert (await run(ws, "cat")).output == ""  # stdin is /dev/null: cat does not hang
    assert (await run(ws, "pwd")).output.strip() == str(tmp_path)


async def test_run_caps_output_head_and_tail(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    r = await run(
        ws,
        "printf 'H%.0s' $(seq 500); head -c 100000 /dev/zero | tr '\\0' m; "
        "printf 'T%.0s' $(seq 700)",
        output_limit=1000,
    )
    total = 500 + 100_000 + 700
    assert r.exit_code == 0
    assert r.omitted_bytes == total - 1000
    head, tail = r.output.split(f"\n... [{total - 1000:,} bytes omitted] ...\n")
    assert head == "H" * 400 and tail == "T" * 600


async def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    with anyio.fail_after(PATIENCE_S):  # not the 100 s the command would take
        r = await run(ws, "sleep 100 & echo $!; sleep 100 & echo $!; sleep 100", timeout=0.5)
    assert r.timed_out and r.exit_code is None
    pids = [int(p) for p in r.output.split()]
    assert len(pids) == 2 and not any(alive(p) for p in pids)


async def test_term_ignoring_group_gets_sigkill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local, "TERM_GRACE_S", 0.3)
    ws = LocalWorkspace(tmp_path)
    r = await run(
        ws, "trap '' TERM; sh -c \"trap '' TERM; sleep 100\" & echo $!; sleep 100", timeout=0.3
    )
    assert r.timed_out and not alive(int(r.output.split()[0]))


async def test_background_children_die_when_the_shell_exits(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    with anyio.fail_after(PATIENCE_S):  # not the 100 s the child would take
        r = await run(ws, "sleep 100 & echo $!; echo done")
    assert r.exit_code == 0 and r.output.endswith("done\n")
    assert not alive(int(r.output.split()[0]))


async def test_cancellation_kills_children_and_propagates(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    pidfile = tmp_path / "pids"
    cmd = f"sleep 100 & echo $! >> {pidfile}; sleep 100 & echo $! >> {pidfile}; wait"
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, ws, cmd)
            with anyio.fail_after(5):
                while len(pidfile.read_text().split()) < 2 if pidfile.exists() else True:
                    await anyio.sleep(0.02)
            scope.cancel()
    assert scope.cancelled_caught
    pids = [int(p) for p in pidfile.read_text().split()]
    assert pids and not any(alive(p) for p in pids)


@pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep not installed")
async def test_a_deep_tree_pages_as_the_python_walk_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pages cut anywhere in a nested tree, past and short of the end: the same matches in the
    # same order from rg (stopped one past the page) and from the Python walk.
    for a in ("a", "b-c", "b", "z"):
        for b in ("x", "y.d", "_u"):
            for n in range(3):
                (tmp_path / a / b).mkdir(parents=True, exist_ok=True)
                (tmp_path / a / b / f"f{n}.py").write_text(f"hit {a}{b}{n}\nmiss\nhit again\n")
        (tmp_path / a / "top.py").write_text("hit top\n")
    (tmp_path / "root.py").write_text("hit root\n")
    (tmp_path / "b" / ".hidden").mkdir()
    (tmp_path / "b" / ".hidden" / "h.py").write_text("hit hidden\n")
    ws = LocalWorkspace(tmp_path)
    queries = [("hit", "content", 7, 0), ("hit", "content", 5, 11), ("hit", "content", 500, 0),
               ("*.py", "files", 4, 3), ("f1", "files", 500, 0)]
    with_rg = [await ws.search(p, root=tmp_path, target=t, limit=n, offset=o) for p, t, n, o in queries]
    monkeypatch.setattr(local_search, "ripgrep_path", lambda: None)
    without = [await ws.search(p, root=tmp_path, target=t, limit=n, offset=o) for p, t, n, o in queries]
    for got, want, (_, _, limit, _) in zip(with_rg, without, queries, strict=True):
        if want.total_exact and want.total <= limit:  # the whole result: the same page
            assert got == want
        else:  # as many, of the same matches, in path order
            assert len(got.matches) == len(want.matches)
            assert got.matches == sorted(got.matches, key=path_order)
    whole = {m for page in without[2:3] for m in page.matches}
    assert all(set(page.matches) <= whole for page in with_rg[:2])
    assert with_rg[2].total == 2 * 4 * 3 * 3 + 4 + 1 and with_rg[2].total_exact


async def test_a_file_over_the_size_limit_is_skipped_by_both_backends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from talaria.tools.local import rg_json, walk

    monkeypatch.setattr(walk, "MAX_FILE_BYTES", 1000)
    monkeypatch.setattr(rg_json, "MAX_FILE_BYTES", 1000)
    (tmp_path / "at.txt").write_text("hit\n" + "x" * 996)  # 1,000 bytes: searched
    (tmp_path / "over.txt").write_text("hit\n" + "x" * 997)  # 1,001: skipped, matches too
    for rg in (shutil.which("rg"), None):
        monkeypatch.setattr(local_search, "ripgrep_path", lambda rg=rg: rg)
        page = await LocalWorkspace(tmp_path).search("hit", root=tmp_path)
        assert [m.path for m in page.matches] == ["at.txt"], rg
