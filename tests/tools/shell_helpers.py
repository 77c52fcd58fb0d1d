"""Calling `terminal` and `process` the way the loop does, on a real workspace, per sandbox tier."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.env_sshd import free_port  # noqa: F401 -- the tests' helper too
from benchmarks.shell import answers as listening  # noqa: F401
from talaria.agent.tool_runner import invoke
from talaria.tools.builtin import load_builtin_tools
from talaria.tools.context import ToolContext
from talaria.tools.sandbox import tiers
from talaria.tools.sandbox.tiers import SandboxSpec, command_spec
from talaria.tools.state import ToolState
from talaria.tools.workspace import Workspace

TIERS = [None, "rlimits", *[t for t in ("bubblewrap", "landlock")
                             if (t == "bubblewrap" and tiers._bwrap_works())
                             or (t == "landlock" and tiers.landlock_abi() >= 1)]]
"""No sandbox (a command the user allowed), then every sandbox tier this machine has."""


class Tools:
    """One session's tool state and workspace; `sandbox` as the permission policy would set
    it for commands the user has not seen (network on: a server must be reachable)."""

    def __init__(self, ws: Workspace, tier: str | None = None) -> None:
        self.ws = ws
        self.state = ToolState()
        self.sandbox: SandboxSpec | None = None
        if tier is not None:
            self.sandbox = command_spec(ws.roots, network=True, tier=tier)
        self.registry = load_builtin_tools()

    async def __call__(self, name: str, **args: Any) -> dict[str, Any]:
        spec = self.registry.get(name)
        assert spec is not None
        ctx = ToolContext(workspace=self.ws, state=self.state, sandbox=self.sandbox)
        return await invoke(spec, args, ctx)

    def close(self) -> None:
        self.state.close()


SERVER = "python3 -u -m http.server {port} --bind 127.0.0.1"


def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "sub" / "deeper").mkdir(parents=True)
    return root
