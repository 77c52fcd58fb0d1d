"""`execute_code`: run a model-written Python script that calls tools, in a sandboxed kernel.

Each tool call the script makes travels back over the kernel's channel and is dispatched by
`ctx.call_tool` exactly like a direct call: its own card, the same permission checks, the same
Workspace (so in an editor `read_file` and `patch` become `fs/*` requests). Only what the
script prints returns to the model. A session's calls share one kernel: its place in a
`KernelPool` is `ctx.state.kernel` (the pool, `ctx.state.kernels`, may be shared by a front
door's sessions), its settings `ctx.state.exec_settings`; it stops when the session closes.
`prestart(session.tool_state, session.cwd, session.id)` when a session starts has its kernel
ready by the first call; after a script times out or dies, the replacement is started at once.
"""

from __future__ import annotations

import functools
import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from talaria.tools.context import ToolContext
from talaria.tools.errors import KernelError
from talaria.tools.execute_code import stubs
from talaria.tools.execute_code.env import MAX_TOOL_CALLS, STDOUT_LIMIT, TIMEOUT_S, ExecSettings
from talaria.tools.execute_code.pool import KernelPool, SessionKernel, prune_cache
from talaria.tools.registry import REGISTRY, ToolSpec, tool
from talaria.tools.state import ToolState

if TYPE_CHECKING:
    from talaria.tools.execute_code.kernel import Cell, Kernel

EXEC_TOOLS = ("read_file", "write_file", "patch", "search_files", "terminal")
"""Tools every script may call; never execute_code itself. A session adds the web tools it
offers (`ToolState.script_tools`) and the MCP tools config allow-lists (its `sources`)."""
MiB = 1024 * 1024

log = logging.getLogger(__name__)


@functools.cache
def stub_source(names: tuple[str, ...]) -> str:
    return stubs.module_source(_specs(names))


@functools.cache
def _description() -> str:
    return _describe(_specs(EXEC_TOOLS))


def _describe(specs: list[ToolSpec]) -> str:
    return stubs.describe(
        specs, {"timeout": TIMEOUT_S, "tool_calls": MAX_TOOL_CALLS, "stdout": STDOUT_LIMIT})


def script_specs(state: ToolState) -> list[ToolSpec]:
    """The tools this session's scripts may call now: the fixed list, the session's web
    tools, and the MCP tools config allow-lists that are up."""
    specs = _specs(EXEC_TOOLS + state.script_tools)
    for source in state.sources:
        specs += source.script_specs()
    return specs


def session_spec(state: ToolState) -> ToolSpec:
    """execute_code as one session offers it: its description lists that session's script
    tools (which may change while it runs)."""
    spec = REGISTRY.get("execute_code")
    assert spec is not None

    def text() -> str:
        specs = script_specs(state)
        return _description() if len(specs) == len(EXEC_TOOLS) else _describe(specs)

    return replace(spec, description=text)


def _stubs(specs: list[ToolSpec]) -> str:
    names = tuple(s.name for s in specs)
    if all(REGISTRY.get(s.name) is s for s in specs):
        return stub_source(names)
    return stubs.module_source(specs)  # MCP tools: specs of the moment, not registered


def _specs(names: tuple[str, ...]) -> list[ToolSpec]:
    """The specs of the tools scripts may call; `tools.builtin` registers them all."""
    specs = REGISTRY.select(list(names))
    missing = set(names) - {s.name for s in specs}
    if missing:
        raise LookupError(f"execute_code: tools not registered: {', '.join(sorted(missing))}")
    return specs


def _title(args: dict[str, Any]) -> str:
    lines = [ln.strip() for ln in str(args.get("code", "")).splitlines() if ln.strip()]
    first = next((ln for ln in lines if not ln.startswith(("import ", "from "))), "")
    return f"Python ({len(lines)} lines): {first[:60]}" if first else "Python script"


@tool(
    name="execute_code",
    description=_description,
    parameters={
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": "Python script; print() what you need"},
            "reset": {"type": "boolean"},
        },
        "required": ["code"],
    },
    kind="execute",
    command_arg="code",
    exclusive=True,
    title=_title,
)
async def execute_code(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    code = args.get("code")
    if not isinstance(code, str) or not code.strip():
        return {"error": "code must be a non-empty Python script"}
    if ctx.call_tool is None:
        return {"error": "execute_code cannot dispatch tool calls here"}
    # The kernel's side is imported by its first use (here, or `prestart` once a session's
    # opening is answered), not by building a session's tool list.
    from talaria.tools.execute_code.kernel import CANCEL_GRACE_S, Kernel, fingerprint

    settings = ctx.state.exec_settings
    if ctx.sandbox is not None:  # unseen by the user: rejected edits stay read-only
        settings = replace(settings, readonly=ctx.sandbox.readonly,
                           hidden=ctx.sandbox.readable_hidden)
    slot = session_kernel(ctx.state, settings, ctx.session_id)
    if args.get("reset"):
        slot.discard(None)
    env = dict(os.environ)
    specs = script_specs(ctx.state)
    source = _stubs(specs)
    remote = await environment_helper(ctx)
    if remote is not None:  # the kernel runs where the environment's commands run
        from talaria.tools.environments import kernel as remote_kernel

        try:
            kernel, fresh, ended = await slot.acquire(
                remote_kernel.remote_fingerprint(settings, ctx.cwd, remote.mux.where),
                lambda: remote_kernel.start(remote.mux, remote.paths, settings, ctx.cwd,
                                            source))
        except KernelError as exc:  # no session kernel there: this script runs on its own
            from talaria.tools.execute_code.standalone import run_standalone

            return await run_standalone(code, ctx, settings, why=str(exc))
    else:
        kernel, fresh, ended = await slot.acquire(  # KernelError: the runner makes it the result
            fingerprint(settings, ctx.cwd, env),
            lambda: Kernel.start(settings, ctx.cwd, source, env))
    spill = settings.cache() / f"{kernel.tag}-{kernel.cells + 1}.out"
    try:
        cell = await kernel.run(code, settings, ctx.call_tool,
                                frozenset(s.name for s in specs), spill, source)
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):  # the turn was cancelled: the script dies too
            await slot.stop("it was killed when a turn was cancelled", CANCEL_GRACE_S)
        raise
    if cell.status in ("timeout", "interrupted"):
        slot.discard(None)  # already dead; this result says so
        if remote is None:
            prestart(ctx.state, ctx.cwd, ctx.session_id)  # the model will likely try again
    return result(cell, kernel, settings, fresh=fresh, ended=ended)


async def environment_helper(ctx: ToolContext) -> Any:
    """The session's environment helper when commands run elsewhere (container, SSH), else
    None. EnvError (the environment could not start) becomes the call's error."""
    from talaria.tools.environments.base import environment_of

    ws = environment_of(ctx.workspace)
    if ws is None or ws.is_local:
        return None
    helper = await ws.helper()
    if helper is None:  # commands run elsewhere but no helper runs there: never fall back here
        raise KernelError(f"execute_code cannot run in {ws.where}: it needs python3 >= 3.8 "
                          "there (the image has none); use terminal, or an image with python3")
    return helper


def prestart(state: ToolState, cwd: Path, session_id: str) -> bool:
    """Start the session's kernel ahead of its first script, so that the first call costs
    what a warm one does. Call it when a session starts, on the event loop's thread (it
    spawns the process; see `Kernel.spawn`); it returns at once. Returns whether it started
    a kernel; a failure is left for the first call to report."""
    from talaria.tools.execute_code.kernel import Kernel, fingerprint

    settings = state.exec_settings
    slot = session_kernel(state, settings, session_id)
    env = dict(os.environ)
    try:
        return slot.prestart(
            fingerprint(settings, cwd, env),
            lambda: Kernel.spawn(settings, cwd, _stubs(script_specs(state)), env, ahead=True))
    except KernelError as exc:
        log.info("execute_code: could not prestart a kernel: %s", exc)
        return False


def session_kernel(state: ToolState, settings: ExecSettings, session_id: str) -> SessionKernel:
    """The session's kernel slot, made at its first use: in the pool the session was given,
    else in one of its own. It is stopped when the session closes."""
    if state.kernel is None:
        if state.kernels is None:
            state.kernels = KernelPool(settings.max_kernels, settings.idle_s)
        state.kernel = state.kernels.session(session_id)
        state.cleanups["execute_code"] = state.kernel.close
        prune_cache(settings.cache())
    return state.kernel


def result(cell: Cell, kernel: Kernel, settings: ExecSettings, *, fresh: bool,
           ended: str | None) -> dict[str, Any]:
    output, omitted = cell.stdout.result()
    out: dict[str, Any] = {
        "status": cell.status, "output": output, "exit_code": cell.exit_code,
        "tool_calls": cell.tool_calls, "duration_s": round(cell.duration, 3),
        "sandbox": kernel.tier,
    }
    if omitted:
        out.update(stdout_bytes=cell.stdout.total, omitted_bytes=omitted)
        if cell.stdout.spilled:
            out["output_path"] = str(cell.stdout.spilled)
    if cell.status != "success":
        stderr, stderr_omitted = cell.stderr.result()
        out["stderr"] = stderr
        if stderr_omitted:
            out["stderr_omitted_bytes"] = stderr_omitted
        out["error"] = _error(cell, settings)
    if cell.tmp_full:
        out["tmp_full"] = (f"TMPDIR is full: the sandbox's temporary files are limited to "
                           f"{cell.tmp_full / MiB:.0f} MiB and writing more there fails with "
                           "'No space left on device'. Delete what is no longer needed, or "
                           "write large outputs into the project.")
    if fresh:
        out["kernel"] = "new" + (f": the previous one ended because {ended}" if ended else "")
        if kernel.warnings:
            out["warnings"] = list(kernel.warnings)
    return out


SANDBOX_SAYS = "talaria-sandbox: "
"""How the sandbox launcher's own messages on stderr begin (why it stopped a kernel)."""


def _error(cell: Cell, settings: ExecSettings) -> str:
    lost = "variables from earlier calls are gone; the next call starts a fresh interpreter"
    if cell.status == "timeout":
        return f"Timed out after {settings.timeout:g} s and was killed: {lost}."
    if cell.status == "interrupted":
        why = [ln[len(SANDBOX_SAYS):] for ln in cell.stderr.result()[0].splitlines()
               if ln.startswith(SANDBOX_SAYS)]
        because = f" because {why[-1]}" if why else ""
        return f"The interpreter died mid-script (exit {cell.exit_code}){because}: {lost}."
    return f"The script failed (exit {cell.exit_code}): {cell.error or 'see stderr'}"
