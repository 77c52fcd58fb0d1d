"""An SDK's type packages imported lazily (`agent.lazytypes`): a submodule imports without its
package's `__init__`; the first other name runs it once, in the module, as the import would
have (also for `import *`, a missing name, and two threads at once); the real OpenAI SDK then
imports without its whole API's models and still has them all; and no SDK package binds a
submodule's name to something else, the one case where lazy would differ."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import ROOT

PACKAGE = {
    "lzpkg/__init__.py": """
        import os, time
        with open(os.environ["LZ_LOG"], "a") as log:
            log.write("init\\n")
        time.sleep(float(os.environ.get("LZ_SLOW", "0")))
        from .things import Thing as Thing
        from . import sub
        from .deep import Deep
        LIMIT = 3
        __all__ = ["Thing", "LIMIT"]
        """,
    "lzpkg/things.py": "class Thing:\n    pass\n",
    "lzpkg/sub.py": "VALUE = 1\n",
    "lzpkg/deep/__init__.py": """
        import os
        with open(os.environ["LZ_LOG"], "a") as log:
            log.write("deep\\n")
        from .leaf import Deep
        """,
    "lzpkg/deep/leaf.py": "class Deep:\n    pass\n",
}


def _run(tmp_path: Path, script: str, **env: str) -> tuple[list[str], list[str]]:
    """The script's printed lines, and what ran `__init__`s, in order."""
    for name, text in PACKAGE.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    log = tmp_path / "log"
    log.write_text("")
    prelude = "from talaria.agent import lazytypes\nlazytypes.install('lzpkg')\n"
    out = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(script)],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(tmp_path), "LZ_LOG": str(log), **env},
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.split(), log.read_text().split()


def test_a_submodule_imports_without_its_package_init(tmp_path: Path) -> None:
    printed, ran = _run(tmp_path, """
        import lzpkg.sub
        from lzpkg import things
        from lzpkg.deep import leaf
        print(lzpkg.sub.VALUE, things.Thing.__name__, leaf.Deep.__name__)
        """)
    assert printed == ["1", "Thing", "Deep"]
    assert ran == []


def test_the_first_other_name_runs_the_init_once(tmp_path: Path) -> None:
    printed, ran = _run(tmp_path, """
        import lzpkg
        import lzpkg.things
        print(lzpkg.LIMIT, lzpkg.Thing is lzpkg.things.Thing, lzpkg.sub.VALUE)
        from lzpkg import Deep
        print(Deep.__module__, lzpkg.LIMIT)
        print("__getattr__" in vars(lzpkg))
        """)
    assert printed == ["3", "True", "1", "lzpkg.deep.leaf", "3", "False"]
    assert ran == ["init", "deep"]


def test_import_star_and_a_missing_name_behave_as_without_it(tmp_path: Path) -> None:
    printed, ran = _run(tmp_path, """
        from lzpkg import *
        print(sorted(k for k in dir() if not k.startswith("_") and k != "lazytypes"))
        import lzpkg
        try:
            lzpkg.NOPE
        except AttributeError as exc:
            print(repr(str(exc)))
        try:
            from lzpkg import nope
        except ImportError as exc:
            print("ImportError")
        """)
    assert printed == ["['LIMIT',", "'Thing']", "\"module", "'lzpkg'", "has", "no", "attribute",
                       "'NOPE'\"", "ImportError"]
    assert ran == ["init", "deep"]


def test_two_threads_share_one_run_of_the_init(tmp_path: Path) -> None:
    printed, ran = _run(tmp_path, """
        import threading, lzpkg
        seen = []
        def ask():
            seen.append(lzpkg.LIMIT)
        threads = [threading.Thread(target=ask) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(seen)
        """, LZ_SLOW="0.3")
    assert printed == ["[3,", "3,", "3,", "3]"]
    assert ran == ["init", "deep"]


OPENAI = """
import json, sys
from talaria.agent import lazytypes
if sys.argv[1] == "lazy":
    lazytypes.install("openai.types")
import openai
client = openai.AsyncOpenAI(api_key="x", base_url="http://127.0.0.1:9/v1")
client.chat.completions
import openai.types.chat.chat_completion_chunk as chunk
modules = len(sys.modules)
ran = {n: "__getattr__" not in vars(sys.modules[n])
       for n in ("openai.types", "openai.types.responses") if n in sys.modules}
from openai.types import Batch
from openai.types.chat import ChatCompletion
from openai.types.responses import Response
print(json.dumps({"modules": modules, "ran": ran, "all": len(vars(openai.types)),
                  "names": [Batch.__name__, ChatCompletion.__name__, Response.__name__,
                            chunk.ChatCompletionChunk.__name__]}))
"""


def _openai(mode: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", OPENAI, mode], capture_output=True, text=True,
                         timeout=120, check=True)
    return json.loads(out.stdout)


def test_the_openai_sdk_imports_without_its_whole_api_and_keeps_it() -> None:
    eager, lazy = _openai("eager"), _openai("lazy")
    assert lazy["ran"] == {"openai.types": False, "openai.types.responses": False}
    assert lazy["modules"] < eager["modules"] * 0.7, (lazy["modules"], eager["modules"])
    assert lazy["names"] == eager["names"]
    assert lazy["all"] == eager["all"]


def _clashes(package: Path) -> list[str]:
    """Names an `__init__` binds to other than its submodule of that name, and the dunder
    names it binds (a lazy package answers those as missing until its `__init__` has run)."""
    found = []
    for init in package.rglob("__init__.py"):
        here = init.parent
        for node in ast.parse(init.read_text(encoding="utf-8")).body:
            bound: list[tuple[str, bool]] = []  # (name, is the submodule itself)
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    name = alias.asname or alias.name
                    itself = node.level == 1 and not node.module and alias.name == name
                    bound.append((name, itself))
            elif isinstance(node, ast.Import):
                bound = [((a.asname or a.name).split(".")[0], False) for a in node.names]
            elif isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
                bound = [(node.name, False)]
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                bound = [(t.id, False) for t in targets if isinstance(t, ast.Name)]
            for name, itself in bound:
                is_sub = (here / f"{name}.py").is_file() or (here / name / "__init__.py").is_file()
                dunder = name.startswith("__") and name != "__all__"  # asked for: not found
                if (is_sub and not itself) or dunder:
                    found.append(f"{init.relative_to(package)}: {name}")
    return found


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_no_sdk_package_binds_a_submodules_name_to_something_else(sdk: str, tmp_path: Path) -> None:
    import importlib.util

    spec = importlib.util.find_spec(sdk)
    assert spec is not None and spec.origin is not None
    types = Path(spec.origin).parent / "types"
    assert types.is_dir()
    assert _clashes(types) == []
    # the check itself finds one
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "__init__.py").write_text("from .y import y\n")
    (tmp_path / "x" / "y.py").write_text("def y(): ...\n")
    (tmp_path / "z").mkdir()
    (tmp_path / "z" / "__init__.py").write_text("__version__ = '1'\n__all__ = []\n")
    assert sorted(_clashes(tmp_path)) == ["x/__init__.py: y", "z/__init__.py: __version__"]


def test_the_agent_imports_its_sdk_lazily() -> None:
    """What `talaria acp`'s provider warm-up does (`LoopBoundClient`)."""
    script = (
        "import sys\n"
        "from talaria.agent.providers.openai import OpenAIProvider\n"
        "p = OpenAIProvider('m', api_key='x', base_url='http://127.0.0.1:9/v1')\n"
        "p._clients._build()\n"
        "print('__getattr__' in vars(sys.modules['openai.types']))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, check=True, cwd=ROOT)
    assert out.stdout.split() == ["True"]
