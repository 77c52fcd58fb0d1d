"""The control agents of `--agent`: `oracle` runs each task's own solution instead of the model,
`nop` does nothing. Each checks the dataset, not a model: a task whose oracle does not score 1
is broken (its solution or its check), and so is one whose check passes after `nop`.

The oracle runs where the agent would: `solution/solve.sh` (copied in now: `/solution` in a
container, mapped elsewhere, see stage.py) in the task's workspace, or, for a SWE-bench
instance, its gold `patch` applied with `git apply`.
"""

from __future__ import annotations

import shlex
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from talaria.agent.trajectories.batch.stage import STAGE, Place, shell_script

AGENTS = ("talaria", "oracle", "nop")
OUTPUT_TAIL_CHARS = 2000


class ControlProvider:
    """The `provider` of a control agent's session: it has a name and is never called."""

    def __init__(self, agent: str) -> None:
        self.name = f"control:{agent}"

    async def warm(self) -> None:
        return None

    async def stream(self, messages: Any, tools: Any, **kwargs: Any) -> AsyncIterator[Any]:
        from talaria.agent.providers.errors import ReplayError

        raise ReplayError("a control agent makes no model calls", provider=self.name)
        yield  # pragma: no cover - an async generator


async def run_oracle(place: Place, task: dict[str, Any], timeout: float) -> tuple[str, str, str | None]:
    """(status, reason, error) of the task's solution run in `place`."""
    source = task.get("source") or {}
    env = (source.get("solution_env") or {}) if isinstance(source, dict) else {}
    exports = "".join(f"export {k}={shlex.quote(str(v))}; " for k, v in env.items())
    if source.get("format") == "swebench":
        await place.stage({}, {"gold.patch": source["patch"]})
        script = f"git apply --whitespace=nowarn {STAGE}/gold.patch; __s=$?; rm -f {STAGE}/gold.patch; exit $__s"
    elif task.get("solution") and (Path(task["solution"]) / "solve.sh").is_file():
        await place.stage({"solution": Path(task["solution"])})
        solve = shell_script(f"{place.solution_dir}/solve.sh")
        leftover = "" if place.contained else f"; rm -rf {STAGE}/solution"
        script = f"{place.install('solution')}( {exports}{solve} ); __s=$?{leftover}; exit $__s"
    else:
        return "failed", "no_solution", "the task has no solution (solution/solve.sh, or a SWE-bench patch)"
    result = await place.run(script, timeout)
    place.remove_host_copy()
    if result.timed_out:
        return "failed", "timeout", f"the solution ran past {timeout:g}s"
    if result.exit_code != 0:
        return ("failed", "oracle_failed", f"the solution exited {result.exit_code}: "
                f"{result.output[-OUTPUT_TAIL_CHARS:].strip()}")
    return "completed", "end_turn", None
