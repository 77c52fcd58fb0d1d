"""execute_code without a session kernel: when the kernel cannot start where an environment's
commands run (a container, an SSH host), each script runs there as a standalone `python3`
process through the environment's command runner, and the result says so.

Nothing carries over between such scripts, and `hermes_tools` is a stand-in whose functions
raise: tool calls need the kernel's channel back to the agent. The script travels inside the
command (base64), so nothing is written to the environment's disk first.
"""

from __future__ import annotations

import base64
from typing import Any

from talaria.tools.context import ToolContext
from talaria.tools.execute_code.env import ExecSettings

MAX_SCRIPT_BYTES = 96 * 1024
"""A command line argument holds at most 128 KiB (Linux `MAX_ARG_STRLEN`); base64 grows a
script by a third."""
OUTPUT_LIMIT = 50_000

_BOOTSTRAP = '''\
import base64, sys, types
tools = types.ModuleType("hermes_tools")
def _unavailable(name):
    def call(*args, **kwargs):
        raise RuntimeError("hermes_tools." + name + " is unavailable: this script runs "
                           "standalone (no session kernel could start here)")
    return call
tools.__getattr__ = _unavailable
sys.modules["hermes_tools"] = tools
code = base64.b64decode("{script}").decode("utf-8")
exec(compile(code, "<execute_code>", "exec"), {{"__name__": "__main__"}})
'''


def command(code: str) -> str:
    """The shell command that runs `code` with `python3` and the stand-in `hermes_tools`."""
    script = base64.b64encode(code.encode("utf-8")).decode("ascii")
    boot = base64.b64encode(_BOOTSTRAP.format(script=script).encode("utf-8")).decode("ascii")
    return f"python3 -I -c 'import base64; exec(base64.b64decode(\"{boot}\"))'"


async def run_standalone(code: str, ctx: ToolContext, settings: ExecSettings, *,
                         why: str) -> dict[str, Any]:
    note = (f"standalone: the session kernel could not start ({why}); this script ran as a "
            "python3 process of its own, so no state carries over between scripts and "
            "hermes_tools calls are unavailable (use the tools directly)")
    if len(code.encode("utf-8")) > MAX_SCRIPT_BYTES:
        return {"error": f"the script is over {MAX_SCRIPT_BYTES // 1024} KiB, too large to run "
                         "standalone; split it", "mode": "standalone", "note": note}
    done = await ctx.workspace.run(command(code), cwd=ctx.cwd, timeout=settings.timeout,
                                   output_limit=OUTPUT_LIMIT, sandbox=ctx.sandbox)
    status = "timeout" if done.timed_out else "success" if done.exit_code == 0 else "error"
    out: dict[str, Any] = {"status": status, "output": done.output, "exit_code": done.exit_code,
                           "mode": "standalone", "note": note}
    if done.omitted_bytes:
        out["omitted_bytes"] = done.omitted_bytes
    if status != "success":
        out["error"] = (f"the script timed out after {settings.timeout:g} s" if done.timed_out
                        else f"the script exited with status {done.exit_code}")
    return out
