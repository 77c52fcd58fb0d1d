"""Trajectory exports: ShareGPT (Hermes), OpenAI Chat Completions, ATIF. Secrets redacted.

    export(trajectories, "sharegpt" | "openai" | "atif", catalog) -> text to write

    sharegpt  one JSON line per trajectory, Hermes Agent's batch format   (sharegpt.py)
    openai    one JSON line per trajectory: {"messages", "tools"}         (openai.py)
    atif      one ATIF document (pretty JSON), or one per line for many   (atif.py)

Every format goes through `redact.redact` last, so no exporter can forget it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from talaria.agent.trajectories.export.redact import redact
from talaria.agent.trajectories.load import Trajectory

FORMATS = ("sharegpt", "openai", "atif")


@dataclass(frozen=True, slots=True)
class ToolCatalog:
    """The tools a dataset is described with: definitions for system prompts and schemas,
    toolsets for `toolsets_used`, and every name for stable `tool_stats` keys."""

    definitions: tuple[dict[str, Any], ...] = ()
    toolsets: dict[str, str] = field(default_factory=dict)

    @classmethod
    def builtin(cls) -> ToolCatalog:
        """Every registered built-in tool."""
        from talaria.tools.builtin import load_builtin_tools

        specs = load_builtin_tools().select()
        return cls(tuple(s.definition() for s in specs), {s.name: s.toolset for s in specs})

    @property
    def names(self) -> list[str]:
        return [d["name"] for d in self.definitions]


def export(trajectories: Sequence[Trajectory], fmt: str, catalog: ToolCatalog) -> str:
    """The trajectories in `fmt`, redacted, as the text of one output file."""
    if fmt == "sharegpt":
        from talaria.agent.trajectories.export.sharegpt import to_sharegpt

        records = [to_sharegpt(t, catalog, prompt_index=i) for i, t in enumerate(trajectories)]
    elif fmt == "openai":
        from talaria.agent.trajectories.export.openai import to_openai

        records = [to_openai(t, catalog) for t in trajectories]
    elif fmt == "atif":
        from talaria.agent.trajectories.export.atif import to_atif

        records = [to_atif(t) for t in trajectories]
        if len(records) == 1:
            return json.dumps(redact(records[0]), ensure_ascii=False, indent=2) + "\n"
    else:
        raise ValueError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    return "".join(json.dumps(redact(r), ensure_ascii=False) + "\n" for r in records)


def content_text(content: Any, image: str) -> str:
    """A message's content as text; each image becomes `image` (a placeholder)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else str(content)
    return "\n".join(
        part.get("text", "") if part.get("type") == "text" else image for part in content
    )


def images(content: Any) -> list[dict[str, Any]]:
    """The image parts of a message's content."""
    if not isinstance(content, list):
        return []
    return [part for part in content if part.get("type") == "image"]
