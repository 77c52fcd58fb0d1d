"""A generated source tree of a large project's shape, for the search benchmark.

Deterministic (one seed, no download): three copies of a Django-sized project, ~6,800 files
each (~20,400 in all): Python packages with tests, locale folders with a text `.po` and a
binary `.mo` per language, HTML templates, JavaScript and CSS, and reStructuredText docs.
The Python is made of real-looking parts (imports, classes, methods, docstrings, comments) so
a common pattern (`def `, `import`) is common, a rare one (`RARE_TOKEN`) is in a handful of
files, and nothing contains `NO_MATCH`.
"""

from __future__ import annotations

import random
from pathlib import Path

COPIES = 3
RARE_TOKEN = "frobnicate_ledger_entry"
"""Planted in RARE_FILES files per copy, once each."""
RARE_FILES = 4
DEP_PACKAGES = 150
"""Packages in the deps tree's `.venv` and `node_modules` (~6,000 files each side)."""
NO_MATCH = "zq_nothing_here_xv"



def _list(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_WORDS = _list("model field query form view request response cache session user admin auth "
          "template context middleware signal storage backend manager widget validator "
          "serializer migration schema index lookup expression aggregate filter page "
          "token header cookie locale timezone handler router resolver")
_APPS = _list("admin auth contenttypes flatpages gis humanize messages postgres redirects sessions "
         "sitemaps sites staticfiles syndication")
_LANGS = _list("af ar ast az be bg bn br bs ca ckb cs cy da de dsb el en en_AU en_GB eo es es_AR "
          "es_CO es_MX es_VE et eu fa fi fr fy ga gd gl he hi hr hsb hu hy ia id ig io is it "
          "ja ka kab kk km kn ko ky lb lt lv mk ml mn mr ms my nb ne nl nn os pa pl pt pt_BR "
          "ro ru sk sl sq sr sr_Latn sv sw ta te tg th tk tr tt udm ug uk ur uz vi zh_Hans "
          "zh_Hant")


def _name(rng: random.Random, parts: int = 2) -> str:
    return "_".join(rng.choice(_WORDS) for _ in range(parts))


def _python(rng: random.Random, rare: bool) -> str:
    lines = ['"""' + " ".join(rng.choice(_WORDS) for _ in range(8)).capitalize() + '."""', ""]
    for _ in range(rng.randint(2, 7)):
        lines.append(f"from .{_name(rng, 1)} import {_name(rng).title().replace('_', '')}")
    lines += ["import os", "import re", ""]
    for _ in range(rng.randint(1, 4)):
        cls = _name(rng).title().replace("_", "")
        lines += ["", f"class {cls}({rng.choice(['object', 'Base', 'Mixin', 'Field'])}):",
                  f'    """The {_name(rng, 1)} {_name(rng, 1)} of a {_name(rng, 1)}."""', ""]
        for _ in range(rng.randint(2, 9)):
            fn = _name(rng)
            arg = _name(rng, 1)
            lines += [f"    def {fn}(self, {arg}, **kwargs):",
                      f"        # {' '.join(rng.choice(_WORDS) for _ in range(6))}",
                      f"        if {arg} is None:",
                      f"            raise ValueError('{fn}: {arg} is required')",
                      f"        value = self.{_name(rng)}({arg}, **kwargs)",
                      "        return value", ""]
    if rare:
        lines += ["", f"def {RARE_TOKEN}(entry):", "    return entry", ""]
    return "\n".join(lines) + "\n"


def _po(rng: random.Random, lang: str) -> str:
    out = [f'msgid ""\nmsgstr ""\n"Language: {lang}\\n"\n']
    for _ in range(rng.randint(40, 120)):
        text = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 9)))
        out.append(f'#: {_name(rng, 1)}/{_name(rng, 1)}.py:{rng.randint(1, 900)}\n'
                   f'msgid "{text.capitalize()}"\nmsgstr "{text.upper()}"\n')
    return "\n".join(out)


def _mo(rng: random.Random) -> bytes:
    return b"\xde\x12\x04\x95\x00\x00\x00\x00" + rng.randbytes(rng.randint(2_000, 9_000))


def _html(rng: random.Random) -> str:
    rows = "\n".join(f'  <div class="{_name(rng, 1)}">{{{{ {_name(rng)} }}}}</div>'
                     for _ in range(rng.randint(5, 40)))
    return f"{{% extends 'base.html' %}}\n{{% block content %}}\n{rows}\n{{% endblock %}}\n"


def _js(rng: random.Random) -> str:
    return "\n".join(f"function {_name(rng).replace('_', '')}(el) {{ return el.{_name(rng, 1)}; }}"
                     for _ in range(rng.randint(10, 80))) + "\n"


def _rst(rng: random.Random) -> str:
    paras = ("\n\n".join(" ".join(rng.choice(_WORDS) for _ in range(rng.randint(20, 80)))
                         for _ in range(rng.randint(5, 30))))
    return f"{_name(rng).title()}\n{'=' * 20}\n\n{paras}\n"


def _copy(root: Path, rng: random.Random) -> int:
    files: dict[str, str | bytes] = {}
    packages = ["core", "db", "db/models", "db/backends", "forms", "http", "middleware", "template",
                "test", "urls", "utils", "views", "views/generic", "conf", "dispatch", "apps"]
    packages += [f"contrib/{app}" for app in _APPS]
    packages += [f"contrib/{app}/{sub}" for app in _APPS for sub in ("migrations", "management")]
    for pkg in packages:
        for _ in range(rng.randint(10, 40)):
            files[f"src/{pkg}/{_name(rng)}.py"] = ""
    for app in [*_APPS, "conf"]:
        base = f"src/contrib/{app}" if app != "conf" else "src/conf"
        for lang in _LANGS:
            files[f"{base}/locale/{lang}/LC_MESSAGES/django.po"] = _po(rng, lang)
            files[f"{base}/locale/{lang}/LC_MESSAGES/django.mo"] = _mo(rng)
        for _ in range(rng.randint(3, 15)):
            files[f"{base}/templates/{app}/{_name(rng)}.html"] = _html(rng)
    for _ in range(120):
        files[f"src/contrib/admin/static/admin/js/{_name(rng).replace('_', '-')}.js"] = _js(rng)
    for area in ("topics", "ref", "howto", "intro", "releases", "internals"):
        for _ in range(rng.randint(60, 110)):
            files[f"docs/{area}/{_name(rng).replace('_', '-')}.txt"] = _rst(rng)
    for _ in range(270):
        suite = _name(rng)
        for _ in range(rng.randint(3, 9)):
            files[f"tests/{suite}/test_{_name(rng)}.py"] = ""
    python = sorted(k for k, v in files.items() if v == "")
    rare = set(rng.sample(python, RARE_FILES))
    for rel in python:
        files[rel] = _python(rng, rel in rare)
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return len(files)


def make_tree(root: Path, seed: int = 29) -> int:
    """Write the tree under `root` (COPIES copies, `copy0/`...); returns its file count."""
    return sum(_copy(root / f"copy{i}", random.Random(seed)) for i in range(COPIES))


def make_deps_tree(root: Path, seed: int = 29) -> int:
    """One copy with what a checkout carries beside its sources: a `.venv/` of site-packages
    and a `node_modules/` (both skipped by search_files, so the walk must prune them), and a
    Markdown README per package; returns the file count of the whole tree."""
    rng = random.Random(seed)
    files = _copy(root, rng)
    deps: dict[str, str] = {}
    for n in range(DEP_PACKAGES):
        name = _name(rng)
        deps[f".venv/lib/python3.12/site-packages/{name}{n}/README.md"] = _rst(rng)
        for _ in range(rng.randint(20, 60)):
            deps[f".venv/lib/python3.12/site-packages/{name}{n}/{_name(rng)}.py"] = \
                _python(rng, False)
        for _ in range(rng.randint(10, 30)):
            deps[f"node_modules/{name.replace('_', '-')}{n}/lib/{_name(rng)}.js"] = _js(rng)
        deps[f"node_modules/{name.replace('_', '-')}{n}/README.md"] = _rst(rng)
    for d in sorted({str(Path(p).parent) for p in _python_dirs(root)}):
        deps[f"{d}/README.md"] = _rst(rng)
    for rel, content in deps.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return files + len(deps)


def _python_dirs(root: Path) -> list[Path]:
    return sorted({p.parent.relative_to(root) / "x" for p in root.rglob("*.py")})
