"""Generated code compiled once and kept across runs (`agent.codecache`): a second process
compiles none of its dataclasses' methods or forward references again, and they behave the
same (annotations too: compiled without this module's `__future__`); a changed class, a damaged
file or another interpreter's file compiles afresh; nothing is written where bytecode is not;
`talaria acp` writes it."""

from __future__ import annotations

import importlib.util
import json
import marshal
import os
import subprocess
import sys
import time
from pathlib import Path

from tests import ROOT

CLASS = """
import json, sys, typing
from talaria.agent import codecache
codecache.install()
codecache.MAX_ENTRIES = int(sys.argv[1])
compiled = []
sys.addaudithook(lambda event, args: compiled.append(1) if event == "compile" else None)
from dataclasses import dataclass, field, FrozenInstanceError

@dataclass(frozen=True)
class Point:
    x: int
    y: int = 2
    tags: tuple[str, ...] = ()
    EXTRA

@dataclass
class Box:
    items: list[int] = field(default_factory=list)

def later(a: "list[Point]", b: "int | None" = None) -> "dict[str, Box]": ...
hints = typing.get_type_hints(later)

made = len(compiled)
p = Point(1)
try:
    p.x = 5
    frozen = False
except FrozenInstanceError:
    frozen = True
box = Box()
box.items.append(3)
print(json.dumps({"compiled": made, "repr": repr(p), "eq": p == Point(1, 2), "ne": p != Point(1, 3),
                  "hash": hash(p) == hash(Point(1)), "frozen": frozen, "box": repr(box),
                  "fresh": Box().items, "file": str(codecache.cache_file()),
                  "init": {k: repr(v) for k, v in Point.__init__.__annotations__.items()},
                  "hints": {k: repr(v) for k, v in hints.items()}}))
"""


def run(tmp_path: Path, extra: str = "", most: int = 4096, **env: str) -> dict[str, object]:
    """One process defining the classes; PYTHONPYCACHEPREFIX keeps its file in `tmp_path`."""
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    environ.update(PYTHONPYCACHEPREFIX=str(tmp_path / "pycache"), **env)
    source = CLASS.replace("EXTRA", extra or "pass")
    out = subprocess.run([sys.executable, "-c", source, str(most)], cwd=ROOT, env=environ,
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


SAME = {"repr": "Point(x=1, y=2, tags=())", "eq": True, "ne": True, "hash": True, "frozen": True,
        "box": "Box(items=[3])", "fresh": [],
        "init": {"x": "<class 'int'>", "y": "<class 'int'>", "tags": "tuple[str, ...]",
                 "return": "None"},
        "hints": {"a": "list[__main__.Point]", "b": "int | None",
                  "return": "dict[str, __main__.Box]"}}


def test_a_second_process_compiles_no_method_again_and_its_classes_behave_the_same(
    tmp_path: Path,
) -> None:
    first = run(tmp_path)
    assert first["compiled"] >= 9  # Point: 6 methods; Box: 3; 3 forward references
    assert {k: first[k] for k in SAME} == SAME
    path = Path(str(first["file"]))
    assert path.is_file() and str(path).startswith(str(tmp_path))  # written at exit
    second = run(tmp_path)
    assert second["compiled"] == 0
    assert {k: second[k] for k in SAME} == SAME


def test_a_changed_class_compiles_afresh(tmp_path: Path) -> None:
    run(tmp_path)
    changed = run(tmp_path, extra="z: int = 9")
    assert changed["compiled"] > 0
    assert changed["repr"] == "Point(x=1, y=2, tags=(), z=9)"
    assert run(tmp_path, extra="z: int = 9")["compiled"] == 0
    assert run(tmp_path)["compiled"] == 0  # the first shape is still there


def test_past_its_bound_the_file_keeps_only_what_the_last_process_used(tmp_path: Path) -> None:
    run(tmp_path)
    path = Path(str(run(tmp_path, extra="z: int = 9")["file"]))
    both = len(marshal.loads(path.read_bytes()[len(importlib.util.MAGIC_NUMBER):]))
    run(tmp_path, extra="w: str = 'new'", most=1)
    kept = marshal.loads(path.read_bytes()[len(importlib.util.MAGIC_NUMBER):])
    assert 0 < len(kept) < both and not any("_type_z" in k for k in kept)
    assert run(tmp_path, extra="w: str = 'new'")["compiled"] == 0


def test_a_damaged_or_foreign_file_is_ignored_and_rewritten(tmp_path: Path) -> None:
    path = Path(str(run(tmp_path)["file"]))
    whole = path.read_bytes()
    magic = importlib.util.MAGIC_NUMBER
    garbled = magic + marshal.dumps({k: b"\xff" for k in marshal.loads(whole[len(magic):])})
    for damaged in (whole[: len(whole) // 2], b"\0\0\0\0" + whole[4:], b"", b"not marshal at all",
                    garbled):
        path.write_bytes(damaged)
        again = run(tmp_path)
        assert again["compiled"] > 0 and {k: again[k] for k in SAME} == SAME
        assert run(tmp_path)["compiled"] == 0  # rewritten whole


def test_nothing_is_written_where_bytecode_is_not(tmp_path: Path) -> None:
    first = run(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert not Path(str(first["file"])).exists()
    assert run(tmp_path, PYTHONDONTWRITEBYTECODE="1")["compiled"] > 0


def test_talaria_acp_keeps_what_its_start_compiled(tmp_path: Path) -> None:
    """Written once the session's warm-up is done, while the server still runs (an editor
    may kill it rather than close its stdin)."""
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    environ.update(PYTHONPYCACHEPREFIX=str(tmp_path / "pycache"), TALARIA_HOME=str(tmp_path / "home"),
                   TALARIA_MODEL="replay:" + str(tmp_path / "turns.json"))
    (tmp_path / "turns.json").write_text(json.dumps({"turns": [{"deltas": ["hi"]}]}))
    agent = subprocess.Popen(
        [sys.executable, "-c", "import sys; from talaria.acp_server.cli.main import main; "
         "sys.exit(main(['acp']))"], cwd=tmp_path, env=environ,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert agent.stdin is not None and agent.stdout is not None
    try:
        for i, (method, params) in enumerate([
            ("initialize", {"protocolVersion": 1, "clientCapabilities": {}}),
            ("session/new", {"cwd": str(tmp_path), "mcpServers": []}),
        ]):
            agent.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method,
                                          "params": params}).encode() + b"\n")
            agent.stdin.flush()
            while json.loads(agent.stdout.readline()).get("id") != i:
                pass
        found: list[Path] = []
        deadline = time.monotonic() + 30
        while not found and time.monotonic() < deadline:
            found = list((tmp_path / "pycache").rglob("generated-code.*.marshal"))
            time.sleep(0.05)
        assert found and found[0].stat().st_size > 10_000
    finally:
        agent.kill()
        agent.wait()
