"""One attempt of a task in its open session: the agent (or a control agent) to its end, then
the verdict of the task's check, in the same place (the session's workspace).

    outcome = await run_attempt(host, session, job, cwd, watch)
    outcome.status, outcome.reason, outcome.error, outcome.verdict

The check runs however the agent ended (a timeout, the turn limit, a provider error): the
workspace is what it is, and only the check says whether it solves the task. It does not run
when the session never opened (no place to run it in). `--max-cost` is watched on the
session's usage events (`CostWatch`): past the limit the turn is cancelled and the attempt
ends `cost_limit`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from talaria.agent.trajectories.batch.controls import run_oracle
from talaria.agent.trajectories.batch.stage import Place, StageError, link_workdir
from talaria.agent.trajectories.batch.verifier import verdict_error, verify


@dataclass(slots=True)
class Outcome:
    status: str
    reason: str
    error: str | None
    verdict: dict[str, Any] | None


class CostWatch:
    """The running cost of one session's model calls, against `limit` dollars."""

    def __init__(self, limit: float | None, prices: Any) -> None:
        self.limit = limit
        self.prices = prices
        self.model: str | None = None
        self.spent = 0.0
        self.exceeded = False
        self.cancel: Any = None
        """Set once the session exists: stops its turn."""

    async def on_event(self, event: Any) -> None:
        from talaria.agent.events import UsageUpdated
        from talaria.agent.pricing import cost_usd, price_for

        if self.limit is None or not isinstance(event, UsageUpdated):
            return
        price = price_for(self.model, self.prices)
        self.spent += cost_usd({"input": event.input_tokens, "output": event.output_tokens,
                                "cache_read": event.cache_read_tokens,
                                "cache_write": event.cache_write_tokens}, price) or 0.0
        if self.spent > self.limit and not self.exceeded:
            self.exceeded = True
            if self.cancel is not None:
                self.cancel()


async def run_attempt(host: Any, session: Any, job: dict[str, Any], cwd: Path,
                      watch: CostWatch) -> Outcome:
    from talaria.agent.host import ModelFailure
    from talaria.tools.errors import EnvError, WorkspaceError

    task = job["task"]
    agent = job.get("agent") or "talaria"
    timeout = float(job["timeout"])
    source = task.get("source") or {}
    place = await Place.of(session.workspace, cwd, workdir=source.get("workdir"))
    status, reason, error = "failed", "error", None
    try:
        if (linked := await link_workdir(place)) is not None:
            raise StageError(linked)
        if not place.contained and source.get("copies") and source.get("build"):
            await place.seed(Path(source["build"]["context"]), source["copies"])
        with anyio.fail_after(timeout):
            if agent == "oracle":
                status, reason, error = await run_oracle(place, task, timeout)
            elif agent == "nop":
                status, reason = "completed", "end_turn"
            else:
                watch.cancel = lambda: host.cancel(session.id)
                outcome = await host.prompt(session, place.map(task["prompt"]))
                reason = outcome.stop_reason
                status = "completed" if reason == "end_turn" else "failed"
                if watch.exceeded:
                    status, reason = "failed", "cost_limit"
                    error = f"cost ${watch.spent:.4f} went past --max-cost ${watch.limit:g}"
    except TimeoutError:
        status, reason, error = "failed", "timeout", f"no result after {timeout:g}s"
    except ModelFailure as exc:
        status, reason, error = "failed", "provider_error", exc.message
    except (EnvError, WorkspaceError, StageError) as exc:
        status, reason, error = "failed", "environment_error", str(exc)
    attempt = int(job.get("attempt") or 1)
    verdict = await check(place, task, attempt) if task.get("check") else None
    return Outcome(status, reason, error, verdict)


async def check(place: Place, task: dict[str, Any], attempt: int = 1) -> dict[str, Any]:
    """The task's verdict in `place` (a SWE-bench instance graded by its tests)."""
    source = task.get("source") or {}
    started = time.monotonic()
    try:
        if source.get("format") == "swebench":
            from talaria.agent.trajectories.batch.swebench import grader, verifier_files

            return await verify(place, task, files=verifier_files(task), grade=grader(task),
                                attempt=attempt)
        return await verify(place, task, attempt=attempt)
    except Exception as exc:  # a verifier bug must not lose the attempt's record
        return verdict_error(f"{type(exc).__name__}: {exc}", started)
