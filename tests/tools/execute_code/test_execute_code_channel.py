"""The kernel channel: every frame is checked before anything reaches a tool.

The first test plays the kernel itself over a real socketpair, to send what a broken or
hostile script could; the others go through a real kernel."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from talaria.tools.execute_code import kernel as kernel_module
from talaria.tools.execute_code import output as exec_output
from talaria.tools.execute_code.env import ExecSettings
from talaria.tools.execute_code.kernel import Kernel
from talaria.tools.execute_code.output import PipeReader
from talaria.tools.execute_code.pool import CACHE_TTL_S, prune_cache
from tests.exec_helpers import configure, execute, output_json
from tests.helpers import make_session, recorded


def play_kernel(sock: socket.socket, out_w: int, err_w: int, replies: list[dict[str, Any]]) -> None:
    reader = sock.makefile("rb")
    run = json.loads(reader.readline())
    cell = run["cell"]

    def send(raw: bytes) -> None:
        sock.sendall(raw)
        replies.append(json.loads(reader.readline()))

    def call(**frame: Any) -> None:
        send(json.dumps({"op": "call", "id": 7, "cell": cell, "tool": "read_file",
                         "args": {"path": "f"}, **frame}).encode() + b"\n")

    send(b"not json\n")
    send(b"[1, 2]\n")
    send(b"x" * 3000 + b"\n")                      # longer than MAX_FRAME_BYTES (patched)
    send(json.dumps({"op": "hello", "id": 1}).encode() + b"\n")
    call(args="not an object")
    call(id=True)
    call(id="i" * 100)
    call(cell=cell - 1)                             # a late frame: its cell has ended
    call(tool="execute_code")
    call(tool="todo")
    sock.sendall(json.dumps({"op": "done", "cell": cell - 1, "exit_code": 9}).encode() + b"\n")
    call(id="ok")                                   # the one valid call
    os.write(out_w, b"printed" + run["marker"].encode() + b"after the marker")
    os.write(err_w, run["marker"].encode())
    sock.sendall(json.dumps({"op": "done", "cell": cell, "exit_code": 0}).encode() + b"\n")


def test_forged_and_malformed_frames_never_reach_a_tool(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(kernel_module, "MAX_FRAME_BYTES", 1000)
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    kernel = Kernel(proc, ours, PipeReader(os.fdopen(out_r, "rb", 0)),
                    PipeReader(os.fdopen(err_r, "rb", 0)), "test", (), tmp_path / "scratch", "tag")
    replies: list[dict[str, Any]] = []
    dispatched: list[tuple[str, dict[str, Any]]] = []

    async def dispatch(name: str, args: dict[str, Any]) -> dict[str, Any]:
        dispatched.append((name, args))
        return {"content": "1|x"}

    player = threading.Thread(target=play_kernel, args=(theirs, out_w, err_w, replies))
    player.start()
    try:
        cell = anyio.run(kernel.run, "code", ExecSettings(timeout=10), dispatch,
                         frozenset({"read_file"}), tmp_path / "spill")
    finally:
        player.join(5)
        kernel.kill()
        proc.wait()
    assert dispatched == [("read_file", {"path": "f"})]
    assert cell.status == "success" and cell.tool_calls == 1
    assert cell.stdout.result() == ("printed", 0)
    errors = [r.get("error", "") for r in replies[:-1]]
    expected = ["malformed frame: not JSON", "malformed frame: not a JSON object",
                "malformed frame: longer than 1000 bytes", "malformed frame: unknown op 'hello'",
                "`args` an object", "`id` must be", "`id` must be", "has ended; the call was not run",
                "'execute_code' cannot be called", "'todo' cannot be called"]
    assert len(errors) == len(expected)
    for error, want in zip(errors, expected, strict=True):
        assert want in error
    assert [r["id"] for r in replies[:4]] == [None, None, None, 1]
    assert replies[-1] == {"op": "result", "id": "ok", "result": {"content": "1|x"}}


def test_a_call_made_after_its_cell_ended_is_refused(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    first = execute(session, textwrap.dedent("""\
        import threading, time
        from hermes_tools import write_file
        late = []
        def later():
            time.sleep(0.3)
            late.append(write_file("late.txt", "x"))
        threading.Thread(target=later).start()
        print("cell done")
    """))
    assert first["output"] == "cell done\n"
    time.sleep(0.5)  # the thread calls while no cell runs
    events = recorded(session)
    events.events.clear()  # only what follows
    second = execute(session, textwrap.dedent("""\
        import json, time
        deadline = time.time() + 5
        while not late and time.time() < deadline:
            time.sleep(0.01)
        print(json.dumps(late))
    """), events)
    [refused] = output_json(second)
    assert "has ended; the call was not run" in refused["error"]
    assert second["tool_calls"] == 0
    assert not (session.cwd / "late.txt").exists()
    assert [s.name for s in events.of("ToolCallStarted")] == ["execute_code"]


def test_garbage_written_by_a_script_does_not_break_the_channel(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    (session.cwd / "f.txt").write_text("fine\n")
    events = recorded(session)
    events.events.clear()  # only what follows
    result = execute(session, textwrap.dedent("""\
        import os, socket
        from hermes_tools import read_file
        # The channel's own descriptor, from the kernel's command line (`--fd N`): not the
        # first socket found, which may be another one the kernel holds.
        argv = open("/proc/self/cmdline", "rb").read().split(b"\\0")
        raw = socket.socket(fileno=os.dup(int(argv[argv.index(b"--fd") + 1])))
        raw.sendall(b"garbage\\n" + b'{"op": "call", "id": 99, "cell": 1, "tool": "write_file"}\\n')
        print(read_file("f.txt")["content"])
    """), events)
    assert result["status"] == "success" and result["output"] == "1|fine\n", result
    assert [s.name for s in events.of("ToolCallStarted")] == ["execute_code", "read_file"]


@pytest.mark.parametrize("size", [0, 1, 65_535, 150_000])
def test_output_is_exact_whatever_the_pipe_reads(fake_llm, tmp_path: Path, size: int) -> None:
    session = make_session(fake_llm, tmp_path)
    configure(session, stdout_limit=200_000)
    result = execute(session, f"import sys\nsys.stdout.write('z' * {size})")
    assert result["output"] == "z" * size
    assert execute(session, "print('next')")["output"] == "next\n"


def test_spill_file_is_bounded(fake_llm, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(exec_output, "SPILL_LIMIT", 3000)
    session = make_session(fake_llm, tmp_path)
    configure(session, stdout_limit=1000)
    result = execute(session, "print('x' * 9999)")
    assert result["stdout_bytes"] == 10_000
    assert Path(result["output_path"]).stat().st_size == 3000


def test_a_cell_whose_end_marker_never_comes_still_ends(fake_llm, tmp_path: Path,
                                                        monkeypatch) -> None:
    monkeypatch.setattr(kernel_module, "MARKER_WAIT_S", 0.3)
    session = make_session(fake_llm, tmp_path)
    execute(session, "pass")
    started = time.monotonic()
    result = execute(session, "import os\nprint('before', flush=True)\nkept = os.dup(1)\n"
                              "os.dup2(os.open(os.devnull, os.O_WRONLY), 1)")  # marker lost
    assert result["status"] == "success" and result["output"] == "before\n"
    assert time.monotonic() - started >= 0.3, "it waited MARKER_WAIT_S for the marker"


def test_old_spills_and_scratch_dirs_are_pruned(tmp_path: Path) -> None:
    old_file, new_file, old_dir = tmp_path / "a.out", tmp_path / "b.out", tmp_path / "talaria-kernel-1"
    old_dir.mkdir()
    (old_dir / "x").write_text("x")
    old_file.write_text("old")
    new_file.write_text("new")
    stale = time.time() - CACHE_TTL_S - 10
    for path in (old_file, old_dir):
        os.utime(path, (stale, stale))
    prune_cache(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.out"]
    prune_cache(tmp_path / "missing")  # nothing to do, no error
