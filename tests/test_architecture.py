"""The architecture as a contract (issue 11): layers and independence (import-linter, its
contracts in pyproject.toml), no import circle (counting imports inside functions, where
circles hide), small modules, and every package saying what lives in it and what it may
import."""

from __future__ import annotations

import ast
import subprocess
import sys

import grimp
import pytest

from tests import ROOT

PACKAGES = ("acp_server", "agent", "tools")
MAX_LINES = 400
"""AGENTS.md's guardrail (the team's style guide): a module past ~400 lines is two ideas."""


def test_the_layer_contracts_hold() -> None:
    # This interpreter's import-linter: a `lint-imports` on PATH may belong to another Python,
    # whose `talaria` is another checkout.
    command = [sys.executable, "-c",
               "import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c())"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def test_no_import_circles() -> None:
    graph = grimp.build_graph(*(f"talaria.{p}" for p in PACKAGES))
    circles = _strongly_connected(graph)
    assert not circles, "import circles: " + "; ".join(" <-> ".join(sorted(c)) for c in circles)


def _strongly_connected(graph: grimp.ImportGraph) -> list[set[str]]:
    """Tarjan's algorithm, iterative: the groups of modules that import each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(group)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_the_circle_finder_finds_a_circle() -> None:
    """The check above can fail: a graph with a circle is reported."""
    graph = grimp.ImportGraph()
    for name in ("a", "a.x", "a.y", "a.z"):
        graph.add_module(name)
    graph.add_import(importer="a.x", imported="a.y")
    graph.add_import(importer="a.y", imported="a.x")
    graph.add_import(importer="a.z", imported="a.x")
    assert _strongly_connected(graph) == [{"a.x", "a.y"}]


def _python_files() -> list:
    return sorted(p for folder in (*PACKAGES, "benchmarks", "tests") for p in (ROOT / folder).rglob("*.py")
                  if "data" not in p.relative_to(ROOT).parts)


def test_no_module_is_over_the_line_limit() -> None:
    long = [f"{p.relative_to(ROOT)} ({n} lines)" for p in _python_files()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES]
    assert not long, f"over {MAX_LINES} lines: " + ", ".join(long)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_says_what_lives_there_and_what_it_may_import(package: str) -> None:
    for init in sorted((ROOT / package).rglob("__init__.py")):
        if "data" in init.relative_to(ROOT).parts:
            continue
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        where = init.relative_to(ROOT)
        assert doc, f"{where} has no docstring"
        assert "import" in doc.lower(), f"{where} does not say what it may import"


def test_the_registry_imports_nothing_of_ours() -> None:
    tree = ast.parse((ROOT / "tools" / "registry.py").read_text(encoding="utf-8"))
    ours = [ast.unparse(node) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("talaria")
            or isinstance(node, ast.Import) and any(a.name.startswith("talaria") for a in node.names)]
    assert not ours, ours


def test_benchmarks_import_no_test_code() -> None:
    """Benchmarks ship their own endpoints and scripted models: a figure must not depend on a
    test helper changing under it (tests may use the benchmarks' fixtures, not the reverse)."""
    found = []
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [f"{path.name}: {n}" for n in names if n == "tests" or n.startswith("tests.")]
    assert not found, found


def test_the_sandbox_launcher_runs_without_the_package() -> None:
    """tools/sandbox/launch.py runs with -I -S (no site, no installed talaria): it may import
    only the standard library and its two siblings."""
    tree = ast.parse((ROOT / "tools" / "sandbox" / "launch.py").read_text(encoding="utf-8"))
    modules = {a.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
               for a in node.names}
    modules |= {(node.module or "").split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.level == 0}
    allowed = set(sys.stdlib_module_names) | {"landlock", "seccomp", "early", "_frozen_importlib_external"}
    assert modules <= allowed, modules - allowed
