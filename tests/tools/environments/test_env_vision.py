"""vision_analyze on every environment: where the project's files are on this machine (local,
a container with the project mounted) the image is read; where they live elsewhere (an SSH
host) the call says so in one line, rather than reading a stale local copy."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from talaria.agent.tool_runner import invoke
from talaria.tools.builtin import load_builtin_tools
from talaria.tools.context import ToolContext
from talaria.tools.environments.base import EnvWorkspace
from talaria.tools.handoffs import Vision
from talaria.tools.state import ToolState

pytestmark = pytest.mark.anyio


async def test_image_files_where_the_environment_keeps_them(workspace: EnvWorkspace, project: Path) -> None:
    out = io.BytesIO()
    Image.new("RGB", (12, 9), (1, 2, 3)).save(out, "PNG")
    (project / "shot.png").write_bytes(out.getvalue())
    spec = load_builtin_tools().get("vision_analyze")
    assert spec is not None
    ctx = ToolContext(workspace=workspace, state=ToolState(vision=Vision(sees=lambda: True)))
    result = await invoke(spec, {"image_url": "shot.png", "question": "what?"}, ctx)
    if workspace.env.shares_files:
        assert result["attached"] and (result["width"], result["height"]) == (12, 9)
    else:
        assert result["error"].startswith(f"shot.png is in the {workspace.name} environment")
        assert "pass an http(s) URL or a data: URL" in result["error"]
