"""Each setting's default lives in one place: its `Config` field (agent/config.py).

The scan finds what a test of `load_config` alone cannot: a second default for a setting,
written as a dataclass field or a keyword default of the same name anywhere in the package
(a `max_turns: int = 90` on Session, a `threshold=0.8` parameter, a provider's own
`max_tokens=8192`).
"""

from __future__ import annotations

import ast
from pathlib import Path

from talaria.agent.config import FIELDS, load_config
from tests import ROOT

PACKAGES = ("acp_server", "agent", "tools")
ALLOWED = {ROOT / "agent" / "config.py"}


def _defaults(tree: ast.AST) -> list[tuple[str, ast.expr, int]]:
    """(name, default, line) of every annotated class field and keyword default."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) \
                        and item.value is not None:
                    found.append((item.target.id, item.value, item.lineno))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            positional = args.posonlyargs + args.args
            for arg, default in zip(positional[len(positional) - len(args.defaults):],
                                    args.defaults, strict=True):
                found.append((arg.arg, default, node.lineno))
            for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
                if kw_default is not None:
                    found.append((arg.arg, kw_default, node.lineno))
    return found


def _literal(default: ast.expr) -> bool:
    """A value written out (90, "project", 0.8), not None, an empty collection, or a named
    constant (which is then the one source, as `EXEC_MODES[0]` is for config.py)."""
    if isinstance(default, ast.Constant):
        return default.value is not None
    if isinstance(default, ast.Tuple | ast.List):
        return bool(default.elts)
    return False


def test_no_setting_has_a_second_default() -> None:
    names = {f.name for f in FIELDS}
    offenders = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path in ALLOWED or "data" in path.relative_to(ROOT).parts:
                continue
            for name, default, line in _defaults(ast.parse(path.read_text(encoding="utf-8"))):
                if name in names and _literal(default):
                    offenders.append(f"{path.relative_to(ROOT)}:{line} {name} = {ast.unparse(default)}")
    assert not offenders, "settings with a second default:\n" + "\n".join(offenders)


def test_load_config_gives_each_fields_default(tmp_path: Path) -> None:
    config = load_config(env={"TALARIA_HOME": str(tmp_path)})
    for field in FIELDS:
        assert getattr(config, field.name) == field.coerce(field.name, field.default)
        assert config.sources[field.name] == "default"
