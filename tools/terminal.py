"""`terminal`: run a shell command in the workspace (Hermes-compatible, foreground only)."""

from __future__ import annotations

from typing import Any

from talaria.tools.context import ToolContext
from talaria.tools.paths import resolve
from talaria.tools.registry import tool

OUTPUT_LIMIT = 30_000
"""Bytes of output kept: the first 40% and the last 60%, with the omitted count between."""
SANDBOX_NOTE = (
    "This command ran without the user seeing it, in a sandbox: only the project is "
    "writable, paths whose edit the user rejected are read-only, credential stores are hidden."
)
"""Added to a failed sandboxed command's result, so the model can tell a denial from a bug."""
DEFAULT_TIMEOUT = 180
MAX_TIMEOUT = 600


@tool(
    name="terminal",
    description=(
        "Run a shell command (bash) and return its exit code and combined output. No stdin; "
        "background processes are killed when it ends."
    ),
    parameters={
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "timeout": {
                "type": "integer",
                "description": f"Seconds, max {MAX_TIMEOUT}",
                "default": DEFAULT_TIMEOUT,
            },
            "workdir": {"type": "string", "description": "Working directory (default: cwd)"},
        },
        "required": ["command"],
    },
    kind="execute",
    path_args=("workdir",),
    default_path=True,
    command_arg="command",
    exclusive=True,
    title=lambda a: f"Run `{a['command'][:80]}`",
)
async def terminal(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        return {"error": "command must be a non-empty string"}
    workdir = args.get("workdir")
    terminal_id: str | None = None

    async def on_terminal(tid: str) -> None:
        nonlocal terminal_id
        terminal_id = tid
        if ctx.report is not None:
            await ctx.report({"terminal_id": tid})

    try:
        timeout = min(max(1, int(args.get("timeout") or DEFAULT_TIMEOUT)), MAX_TIMEOUT)
        cwd = resolve(str(workdir), ctx.cwd) if workdir else ctx.cwd
        result = await ctx.workspace.run(
            command, cwd=cwd, timeout=timeout, output_limit=OUTPUT_LIMIT, on_terminal=on_terminal,
            sandbox=ctx.sandbox,
        )
    except FileNotFoundError:
        return {"error": f"Working directory not found: {workdir}"}
    except ValueError as exc:  # a malformed argument; workspace errors become results in the runner
        return {"error": str(exc)}
    out: dict[str, Any] = {
        "exit_code": result.exit_code,
        "output": result.output,
        "omitted_bytes": result.omitted_bytes,
        "timed_out": result.timed_out,
    }
    if result.timed_out:
        out["error"] = f"Command timed out after {timeout} s and was killed"
    if ctx.sandbox is not None and result.exit_code != 0:
        out["sandbox"] = SANDBOX_NOTE + ("" if ctx.sandbox.network else " No network.")
    if result.cwd and result.cwd != str(cwd):  # the next command starts there (an SSH host)
        out["cwd"] = result.cwd
    if terminal_id or result.terminal_id:
        out["_terminal_id"] = terminal_id or result.terminal_id
    return out
