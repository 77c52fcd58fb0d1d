"""What the exporters share: the tool catalog a dataset is described with, content helpers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
