"""`search_files` over a generated tree of ~20,000 files (benchmarks/search_tree.py), and
(`deps_*` queries) over one copy beside a `.venv/` and a `node_modules/` the search skips,
against raw parallel ripgrep for the same page and, with TALARIA_BENCH_HERMES, Hermes'
search_files.

    search_files_ms   per query: Talaria's median (the tool as the model calls it, all calls
                      in one event loop as in a session), raw parallel
                      `rg ... | head -n offset+limit` (spawn, read the page, kill), and
                      Hermes' `search_tool` when given (a next page: both as a new search); ratios `vs_rg` and `vs_hermes` come
                      from the same rounds (queries take turns, so load drift hits all alike).
                      `cores` and `load_1m` (before, after) say what the machine was doing.

Targets (issue 29): ≤ Hermes on every query, within 1.2× of raw parallel rg.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio

from benchmarks import hermes
from benchmarks.search_tree import NO_MATCH, RARE_TOKEN, make_deps_tree, make_tree

RUNS = 12
QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("common", {"pattern": "def "}),
    ("common_page_3", {"pattern": "def ", "offset": 100}),
    ("common_next_page", {"pattern": "def ", "offset": 50, "after_page_1": True}),
    ("rare", {"pattern": RARE_TOKEN}),
    ("no_match", {"pattern": NO_MATCH}),
    ("no_match_regex", {"pattern": r"class \w+Nope\d+"}),
    ("files_glob", {"pattern": "*.py", "target": "files"}),
    ("content_py_glob", {"pattern": "raise ValueError", "file_glob": "*.py"}),
    ("files_rare", {"pattern": "*.nope", "target": "files"}),
    ("deps_common", {"pattern": "import "}),
    ("deps_md_content", {"pattern": "cache", "file_glob": "*.md"}),
    ("deps_md_no_match", {"pattern": NO_MATCH, "file_glob": "*.md"}),
    ("deps_files_md", {"pattern": "*.md", "target": "files"}),
]
"""(name, arguments); a `deps_` query searches the deps tree. Each of Talaria's calls is a new
search (a new workspace), but `after_page_1`: the page the model asks for after the first, in
the same workspace (the first page is not timed), read on from the search that found it."""

_HERMES_DRIVER = """
from tools.file_tools import search_tool
def search(**args):
    started = time.perf_counter()
    out = search_tool(**args)
    elapsed = time.perf_counter() - started
    head = json.loads(out.split("\\n\\n[Hint")[0])
    return {"s": elapsed, "total": head.get("total_count"), "error": head.get("error")}
OPS = {"search": search}
"""


def _rg_page(rg: str, root: Path, args: dict[str, Any]) -> float:
    """Raw parallel rg: spawn, read offset+limit lines, kill. The floor for one page."""
    want = int(args.get("offset", 0)) + int(args.get("limit", 50))
    argv = [rg, "--no-config", "--no-ignore", "-g", "!node_modules/", "-g", "!__pycache__/"]
    if args.get("target") == "files":
        argv += ["--files", "-g", args["pattern"], str(root)]
    else:
        if args.get("file_glob"):
            argv += ["-g", args["file_glob"]]
        argv += ["-n", "-e", args["pattern"], str(root)]
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    for n, _ in enumerate(proc.stdout, 1):
        if n >= want:
            proc.kill()
            break
    proc.stdout.close()
    proc.wait()
    return time.perf_counter() - started


async def _talaria(root: Path, args: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    from talaria.agent.tool_runner import invoke
    from talaria.tools.builtin import load_builtin_tools
    from talaria.tools.context import ToolContext
    from talaria.tools.local.workspace import LocalWorkspace

    spec = load_builtin_tools().get("search_files")
    assert spec is not None
    ctx = ToolContext(workspace=LocalWorkspace(root))
    args = dict(args)
    if args.pop("after_page_1", False):
        await invoke(spec, {**args, "offset": 0}, ctx)
    started = time.perf_counter()
    result = await invoke(spec, args, ctx)
    return time.perf_counter() - started, result


def search() -> Iterator[dict[str, Any]]:
    hermes_root = hermes.checkout()
    with tempfile.TemporaryDirectory() as tmp:
        roots = {"": Path(tmp) / "tree", "deps_": Path(tmp) / "deps"}
        files = {"": make_tree(roots[""]), "deps_": make_deps_tree(roots["deps_"])}
        driver = (hermes.HermesProcess(hermes_root, _HERMES_DRIVER, cwd=Path(tmp))
                  if hermes_root else None)
        try:
            # One event loop for all of Talaria's calls, as in a session: its worker threads
            # are started once, not on every call.
            load = [round(os.getloadavg()[0], 2)]
            samples, shown = anyio.run(_rounds, roots, driver)
            load.append(round(os.getloadavg()[0], 2))
        finally:
            if driver is not None:
                driver.close()
    for name, args in QUERIES:
        s = samples[name]
        out: dict[str, Any] = {"metric": "search_files_ms", "query": name, **args,
                               "talaria": _ms(s["talaria"]), **shown[name]}
        if s["rg"]:
            out["raw_parallel_rg"] = _ms(s["rg"])
            out["vs_rg"] = round(statistics.median(s["talaria"]) / statistics.median(s["rg"]), 2)
        if s["hermes"]:
            out["hermes"] = _ms(s["hermes"])
            out["vs_hermes"] = round(statistics.median(s["talaria"]) / statistics.median(s["hermes"]), 2)
        yield out | {"files": files[_tree(name)], "runs": RUNS, "cores": len(os.sched_getaffinity(0)),
                     "load_1m": load, "target_vs_rg": 1.2, "target_vs_hermes": 1.0}
    if hermes_root:
        yield {"metric": "search_files_hermes", "hermes_version": hermes.version(hermes_root)}


def _tree(name: str) -> str:
    return "deps_" if name.startswith("deps_") else ""


async def _rounds(roots: dict[str, Path], driver: hermes.HermesProcess | None
                  ) -> tuple[dict[str, dict[str, list[float]]], dict[str, dict[str, Any]]]:
    """Every query in turn, RUNS + 1 times: Talaria and raw parallel rg (each first every
    other round), then Hermes (round 0 warms the page cache and Hermes' terminal and is not
    counted)."""
    rg = shutil.which("rg")
    samples: dict[str, dict[str, list[float]]] = {name: {"talaria": [], "rg": [], "hermes": []}
                                                 for name, _ in QUERIES}
    shown: dict[str, dict[str, Any]] = {}
    for run in range(RUNS + 1):
        for name, args in QUERIES:
            root = roots[_tree(name)]
            args = {"limit": 50, **args}
            cold = {k: v for k, v in args.items() if k != "after_page_1"}
            # Who goes second finds the same files just read: the two take turns at it.
            rg_took = _rg_page(rg, root, cold) if rg and run % 2 else None
            took, result = await _talaria(root, args)
            if rg and not run % 2:
                rg_took = _rg_page(rg, root, cold)
            h = driver.call("search", path=str(root), **cold) if driver else None
            if run == 0:
                shown[name] = {"returned": len(result.get("matches", [])),
                               "total": result.get("total"), "error": result.get("error"),
                               "total_is_bound": result.get("total_is_lower_bound", False),
                               "hermes_total": h and h["total"]}
                continue
            samples[name]["talaria"].append(took)
            if rg_took is not None:
                samples[name]["rg"].append(rg_took)
            if h is not None:
                samples[name]["hermes"].append(h["s"])
    return samples, shown


def _ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 1)


BENCHMARKS = {"search": search}
