"""The map and the design documents stay inside the repository and name what exists."""

from __future__ import annotations

import re
import tomllib

from tests import ROOT

DOCS = [ROOT / "README.md", ROOT / "AGENTS.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_every_relative_link_resolves_inside_the_repository() -> None:
    for doc in DOCS:
        for target in LINK.findall(doc.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # a web address, or an anchor in the same page
            path = (doc.parent / target.split("#", 1)[0]).resolve()
            assert path.is_relative_to(ROOT), f"{doc.name} links outside the repository: {target}"
            assert path.exists(), f"{doc.name} links to a missing file: {target}"


def test_agents_md_maps_every_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    agents = (ROOT / "AGENTS.md").read_text(encoding="utf-8")
    for package in config["tool"]["setuptools"]["packages"]:
        folder = package.split(".")[-1]
        assert f"`{folder}/`" in agents, f"AGENTS.md does not map {package}"
