"""The verdict on one attempt: the task's check, run where the task ran, after its agent.

    verdict = await verify(place, task)     # place: stage.Place of the task's session

The task's `tests` directory (if any) is copied in only now (see stage.py: `/tests` in a
container, the task's staging directory elsewhere), so the agent never saw it. The check runs
in the workspace with `$TEST_DIR` (the tests), `$VERIFIER_DIR` (where a reward goes),
`$TALARIA_TASK_ID` and `$TALARIA_ATTEMPT` (1, 2, ... with `--attempts`) set, and its `env`. Its reward, by Harbor's convention, is the number in
`$VERIFIER_DIR/reward.txt` (`/logs/verifier/reward.txt` in a container), else the `reward`
of `reward.json`, else the exit status (0: 1.0, anything else: 0.0). A reward is a float in
[0, 1]; `resolved` means a reward of 1. A SWE-bench task is graded by its tests instead
(swebench.py). The verdict:

    {"reward": float, "resolved": bool, "exit_code": int | None,
     "source": "reward.txt" | "reward.json" | "exit_status" | "tests",
     "output_tail": str (the last OUTPUT_TAIL_CHARS of its output), "duration_s": float,
     "error": str | None (the check could not run, timed out, wrote a bad reward),
     "tests"?: {"failed": [...], "passed": int, "missing": [...]}  (SWE-bench)}

A verdict with an error has reward 0: the attempt is not solved.
"""

from __future__ import annotations

import json
import math
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from talaria.agent.trajectories.batch.stage import Place, StageError

MARK = "@@talaria-verifier-4c1e@@"
OUTPUT_TAIL_CHARS = 4000
CHECK_OUTPUT_LIMIT = 256 * 1024
"""Output kept from a check (head and tail); the reward lines come last, in the tail."""
REWARD_FILES = ("reward.txt", "reward.json")

Grade = Callable[[str, int | None], dict[str, Any]]
"""A check's output and exit status -> {"reward", "resolved", "tests"} (SWE-bench)."""


def verdict_error(error: str, started: float, output: str = "", code: int | None = None) -> dict[str, Any]:
    return {"reward": 0.0, "resolved": False, "exit_code": code, "source": None,
            "output_tail": output[-OUTPUT_TAIL_CHARS:], "duration_s": round(time.monotonic() - started, 4),
            "error": error}


async def verify(place: Place, task: dict[str, Any], *, files: dict[str, str] | None = None,
                 grade: Grade | None = None, attempt: int = 1) -> dict[str, Any]:
    """Run the task's check in `place`; never raises for the check's own failures."""
    from talaria.tools.errors import EnvError, WorkspaceError

    check = task["check"]
    started = time.monotonic()
    tests = Path(task["tests"]) if task.get("tests") else None
    # On this machine the reward directory is made and read here, not by commands in the
    # script (each one a process: most of a trivial check's time).
    on_disk = place.shares_files and not place.contained and place.root == str(place.cwd)
    try:
        await place.stage({"tests": tests} if tests else {}, files)
        if on_disk:
            Path(place.verifier_dir).mkdir(parents=True, exist_ok=True)
        about = {"TALARIA_TASK_ID": str(task["id"]), "TALARIA_ATTEMPT": str(attempt)}
        result = await place.run(_script(place, check, tests is not None, about, on_disk),
                                 float(check["timeout"]), CHECK_OUTPUT_LIMIT)
        output, code, rewards = split_output(result.output)
        if on_disk:
            rewards = _read_rewards(Path(place.verifier_dir))
    except (StageError, OSError, EnvError, WorkspaceError) as exc:
        return verdict_error(f"the check could not run: {exc}", started)
    finally:
        place.remove_host_copy()
    if result.timed_out or code is None:
        await _cleanup(place)
        why = (f"the check timed out after {float(check['timeout']):g}s" if result.timed_out
               else "the check ended without reporting its status")
        return verdict_error(why, started, output)
    if grade is not None:
        graded = grade(output, code)
        return {"exit_code": code, "source": "tests", "output_tail": output[-OUTPUT_TAIL_CHARS:],
                "duration_s": round(time.monotonic() - started, 4), "error": None, **graded}
    try:
        reward, source = reward_of(rewards, code)
    except ValueError as exc:
        return verdict_error(str(exc), started, output, code)
    return {"reward": reward, "resolved": reward >= 1.0, "exit_code": code, "source": source,
            "output_tail": output[-OUTPUT_TAIL_CHARS:],
            "duration_s": round(time.monotonic() - started, 4), "error": None}


def _script(place: Place, check: dict[str, Any], has_tests: bool, about: dict[str, str],
            on_disk: bool = False) -> str:
    env = {**about, **(check.get("env") or {})}
    exports = [f"export {name}={shlex.quote(value)}" for name, value in env.items()]
    exports += [f"export TEST_DIR={shlex.quote(place.tests_dir)}",
                f"export VERIFIER_DIR={shlex.quote(place.verifier_dir)}"]
    verifier_dir = shlex.quote(place.verifier_dir)
    status = f"printf '\\n{MARK} exit %d\\n' \"$__status\""
    if on_disk:
        return "\n".join(["(", *exports, place.map(check["command"]), ")", "__status=$?", status])
    rewards = "".join(f"printf '{MARK} %s\\n' {name}; cat {verifier_dir}/{name} 2>/dev/null; "
                      for name in REWARD_FILES)
    return "\n".join([
        f"{place.install('tests') if has_tests else ''}rm -rf {verifier_dir} && "
        f"mkdir -p {verifier_dir} || exit 97",
        "(", *exports, place.map(check["command"]), ")",
        "__status=$?", status,
        rewards + place.cleanup(),
    ])


def _read_rewards(directory: Path) -> dict[str, str]:
    rewards = {}
    for name in REWARD_FILES:
        try:
            text = (directory / name).read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            continue
        if text:
            rewards[name] = text
    return rewards


def split_output(text: str) -> tuple[str, int | None, dict[str, str]]:
    """(the check's own output, its exit status, {reward file: content}) from the script's."""
    cut = text.rfind(f"\n{MARK} exit ")
    if cut < 0:
        return text, None, {}
    output, tail = text[:cut], text[cut + 1:]
    lines = tail.split("\n")
    try:
        code = int(lines[0].split()[-1])
    except (ValueError, IndexError):
        return output, None, {}
    rewards: dict[str, str] = {}
    current: str | None = None
    for line in lines[1:]:
        if line.startswith(MARK + " "):
            current = line.removeprefix(MARK + " ").strip()
            rewards[current] = ""
        elif current is not None:
            rewards[current] += line + "\n"
    return output, code, {k: v.strip() for k, v in rewards.items() if v.strip()}


def reward_of(rewards: dict[str, str], code: int) -> tuple[float, str]:
    """(reward, where it came from). ValueError for a reward file that says no number."""
    if "reward.txt" in rewards:
        return _in_range(rewards["reward.txt"], "reward.txt"), "reward.txt"
    if "reward.json" in rewards:
        try:
            data = json.loads(rewards["reward.json"])
        except ValueError as exc:
            raise ValueError(f"reward.json is not JSON ({exc})") from None
        if isinstance(data, dict) and "reward" in data:
            return _in_range(data["reward"], "reward.json"), "reward.json"
        numbers = [v for v in data.values() if isinstance(v, int | float)] if isinstance(data, dict) else []
        if len(numbers) == 1:
            return _in_range(numbers[0], "reward.json"), "reward.json"
        raise ValueError("reward.json has no \"reward\" (write {\"reward\": 1.0})")
    return (1.0 if code == 0 else 0.0), "exit_status"


def _in_range(value: Any, name: str) -> float:
    try:
        reward = float(str(value).strip())
    except ValueError:
        raise ValueError(f"{name} says {str(value)[:80]!r}, not a number (write 1 or 0, or a "
                         "float in [0, 1])") from None
    if not math.isfinite(reward) or not 0.0 <= reward <= 1.0:
        raise ValueError(f"{name} says {reward}, outside [0, 1]")
    return reward


async def _cleanup(place: Place) -> None:
    """After a check that was killed: its staging directory (the script's last line never ran)."""
    import contextlib

    from talaria.tools.errors import EnvError, WorkspaceError

    with contextlib.suppress(OSError, EnvError, WorkspaceError):
        await place.run(place.cleanup(), 30.0)
