"""`terminal`: run a shell command in the workspace (Hermes-compatible).

Commands of a session share a shell state per environment (`talaria.tools.shell`: `cd` and
`export` carry over); `background=true` starts a long-lived process the `process` tool manages
(`talaria.tools.processes`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from talaria.tools.context import ToolContext
from talaria.tools.errors import WorkspaceError
from talaria.tools.paths import resolve
from talaria.tools.registry import tool
from talaria.tools.shell import ShellState
from talaria.tools.workspace import CommandResult

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
        "Run a bash command; returns exit code and output. cd and exports persist between "
        "calls. No stdin. Servers, watchers: background=true, then the process tool."
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
            "workdir": {"type": "string", "description": "For this command only"},
            "background": {"type": "boolean"},
            "notify_on_complete": {"type": "boolean", "description": "Tell me when it ends"},
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
    shell = shell_of(ctx)
    if args.get("background"):
        return await _background(command, args, ctx, shell)
    terminal_id: str | None = None
    moved: str | None = None

    async def on_terminal(tid: str) -> None:
        nonlocal terminal_id
        terminal_id = tid
        if ctx.report is not None:
            await ctx.report({"terminal_id": tid})

    async def run_in(cwd: Path) -> CommandResult:
        return await ctx.workspace.run(
            command, cwd=cwd, timeout=timeout, output_limit=OUTPUT_LIMIT,
            on_terminal=on_terminal, sandbox=ctx.sandbox, shell=shell.prologue())

    try:
        timeout = min(max(1, int(args.get("timeout") or DEFAULT_TIMEOUT)), MAX_TIMEOUT)
        cwd = resolve(str(workdir), ctx.cwd) if workdir else start_dir(shell, ctx)
        try:
            result = await run_in(cwd)
        except FileNotFoundError:
            if workdir or cwd == ctx.cwd:
                raise
            gone, shell.cwd, cwd = cwd, None, ctx.cwd  # removed where the files live (a host)
            result = await run_in(cwd)
            moved = f"The shell's directory {gone} is gone: this command ran in {cwd}."
    except FileNotFoundError:
        return {"error": f"Working directory not found: {workdir or cwd}"}
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
    before = shell.cwd
    note = shell.absorb(result.state, ctx.workspace.roots, start=result.state_start)
    if workdir:  # one command elsewhere: the shell stays where it was
        shell.cwd, note = before, None if result.state else note
    elif shell.cwd != before:
        out["cwd"] = str(shell.cwd or ctx.cwd)  # where the next command starts
    if note or moved:
        out["shell"] = " ".join(filter(None, (moved, note)))
    if terminal_id or result.terminal_id:
        out["_terminal_id"] = terminal_id or result.terminal_id
    return out


def start_dir(shell: ShellState, ctx: ToolContext) -> Path:
    """Where a command starts: the shell's directory; the project once it is gone (checked
    here when the files are here; elsewhere, running there says so)."""
    env = getattr(ctx.workspace, "env", None)
    if shell.cwd is not None and getattr(env, "shares_files", True) and not shell.cwd.is_dir():
        shell.cwd = None
    return shell.cwd or ctx.cwd


def shell_of(ctx: ToolContext) -> ShellState:
    """The session's shell in the environment the workspace acts in now (a fresh one per
    command where the environment says `track_cwd = false`)."""
    if not getattr(getattr(ctx.workspace, "env", None), "keeps_shell", True):
        return ShellState()
    where = getattr(ctx.workspace, "name", "local")
    return ctx.state.shells.setdefault(str(where), ShellState())


async def _background(command: str, args: dict[str, Any], ctx: ToolContext,
                      shell: ShellState) -> dict[str, Any]:
    table = ctx.state.process_table()
    workdir = args.get("workdir")
    cwd = resolve(str(workdir), ctx.cwd) if workdir else start_dir(shell, ctx)
    try:
        entry = await table.start(ctx.workspace, command, cwd=cwd, sandbox=ctx.sandbox,
                                  notify=bool(args.get("notify_on_complete")),
                                  shell=shell.prologue(save=False))
    except FileNotFoundError:
        return {"error": f"Working directory not found: {workdir or cwd}"}
    except WorkspaceError as exc:
        return {"error": f"Could not start it in the background: {exc}"}
    proc = entry.proc
    out: dict[str, Any] = {
        "session_id": entry.id, "status": "running", "pid": proc.pid,
        "note": "Started in the background. process(action='poll'|'log'|'wait'|'kill', "
                f"session_id='{entry.id}') follows it"
                + ("; you will be told when it ends." if entry.notify else "."),
    }
    if proc.where != "this machine":
        out["where"] = proc.where
    if ctx.sandbox is not None:
        out["sandbox"] = SANDBOX_NOTE + ("" if ctx.sandbox.network else " No network.")
    terminal_id = getattr(proc, "terminal_id", None)
    if terminal_id:
        out["_terminal_id"] = terminal_id
        if ctx.report is not None:
            await ctx.report({"terminal_id": terminal_id})
    return out
