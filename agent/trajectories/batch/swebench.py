"""SWE-bench instances as batch tasks: `talaria batch instances.jsonl --repos DIR`.

    {"instance_id", "repo": "owner/name", "base_commit", "problem_statement", "test_patch",
     "FAIL_TO_PASS": [test ids] (or that list as a JSON string), "PASS_TO_PASS": [...],
     "patch"?: the gold fix (what `--agent oracle` applies), "test_cmd"?: str, "tags"?: [str],
     and SWE-bench's other fields (version, hints_text, created_at, ...), kept out of the prompt}

Each attempt works in a fresh clone of `DIR/owner__name` (or `DIR/owner/name`, `DIR/name`)
checked out at `base_commit`, with no branch or tag left to reach later commits. The agent
gets `problem_statement`. The check then restores the files `test_patch` touches, applies it,
and runs `test_cmd` (default `DEFAULT_TEST_CMD`; `{tests}` stands for the FAIL_TO_PASS and
PASS_TO_PASS ids, shell-quoted); the attempt is resolved only when every one of them passed
(testlog.py reads pytest's and unittest's reports). Every base_commit is looked up when the
file is loaded: a missing one is one line naming the instance and the fetch that brings it.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

from talaria.agent.trajectories.batch.checks import closest, seconds_of, tags_of
from talaria.agent.trajectories.batch.stage import STAGE
from talaria.agent.trajectories.batch.tasks import Task, TaskFileError, json_lines
from talaria.agent.trajectories.batch.testlog import statuses

DEFAULT_TEST_CMD = "python -m pytest -rA -p no:cacheprovider {tests}"
DEFAULT_CHECK_TIMEOUT_S = 1800.0
PATCH_FAILED = 98
"""The check's exit status when the test patch does not apply."""
MAX_NAMES = 100
"""Failing test names kept per verdict."""
REQUIRED = ("instance_id", "repo", "base_commit", "problem_statement", "test_patch",
            "FAIL_TO_PASS", "PASS_TO_PASS")
OPTIONAL = ("patch", "test_cmd", "tags", "timeout", "check_timeout", "version",
            "environment_setup_commit", "hints_text", "created_at", "difficulty", "image_name",
            "repo_language", "problem_statement_original")
GIT_TIMEOUT_S = 300.0


def load_swebench(path: Path, repos: Path | None) -> list[Task]:
    if repos is None:
        raise TaskFileError(f"{path}: SWE-bench instances need --repos DIR (the directory "
                            "holding a clone of each repository, as DIR/owner__name)")
    tasks: list[Task] = []
    wanted: dict[Path, list[tuple[str, str]]] = {}
    seen: set[str] = set()
    for _, where, data in json_lines(path):  # an unreadable file is one line too
        task = _task(data, where, repos, len(tasks))
        if task.id in seen:
            raise TaskFileError(f"{where}: duplicate instance_id {task.id!r}")
        seen.add(task.id)
        source = task.source or {}
        wanted.setdefault(Path(source["repo_dir"]), []).append((source["base_commit"], where))
        tasks.append(task)
    for repo_dir, commits in wanted.items():
        _check_commits(repo_dir, commits)
    return tasks


def _task(data: Any, where: str, repos: Path, index: int) -> Task:
    if not isinstance(data, dict):
        raise TaskFileError(f"{where}: an instance is a JSON object")
    for key in data:
        if key not in REQUIRED and key not in OPTIONAL:
            raise TaskFileError(f"{where}: unknown key {key!r}{closest(key, [*REQUIRED, *OPTIONAL])}")
    for key in REQUIRED:
        if key not in data:
            raise TaskFileError(f"{where}: no {key!r} (a SWE-bench instance has "
                                f"{', '.join(REQUIRED)})")
    for key in ("instance_id", "repo", "base_commit", "problem_statement", "test_patch"):
        if not isinstance(data[key], str) or not data[key].strip():
            raise TaskFileError(f"{where}: {key!r} must be a non-empty string")
    if not re.fullmatch(r"[0-9a-fA-F]{7,40}", data["base_commit"]):
        raise TaskFileError(f"{where}: base_commit {data['base_commit']!r} is not a commit hash")
    tests = {key: _ids(data[key], where, key) for key in ("FAIL_TO_PASS", "PASS_TO_PASS")}
    if not tests["FAIL_TO_PASS"]:
        raise TaskFileError(f"{where}: FAIL_TO_PASS is empty: nothing would show the fix")
    test_cmd = data.get("test_cmd", DEFAULT_TEST_CMD)
    if not isinstance(test_cmd, str) or not test_cmd.strip():
        raise TaskFileError(f"{where}: \"test_cmd\" must be a shell command")
    try:
        tags = tags_of(data.get("tags"), where)
        timeout = seconds_of(data.get("timeout"), where, "timeout")
        check_timeout = seconds_of(data.get("check_timeout"), where, "check_timeout")
    except ValueError as exc:
        raise TaskFileError(str(exc)) from None
    source = {"format": "swebench", "repo": data["repo"], "repo_dir": str(repo_dir(repos, data["repo"], where)),
              "base_commit": data["base_commit"], "test_patch": data["test_patch"],
              "patch": data.get("patch"), "fail_to_pass": tests["FAIL_TO_PASS"],
              "pass_to_pass": tests["PASS_TO_PASS"]}
    command = _check_command(source, test_cmd)
    return Task(id=data["instance_id"], prompt=data["problem_statement"], index=index,
                check={"command": command, "timeout": check_timeout or DEFAULT_CHECK_TIMEOUT_S,
                       "env": {}},
                tags=(f"repo:{data['repo']}", *tags), timeout=timeout, source=source)


def _ids(value: Any, where: str, key: str) -> list[str]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise TaskFileError(f"{where}: {key} must be a list of test ids") from None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise TaskFileError(f"{where}: {key} must be a list of test ids")
    return value


def repo_dir(repos: Path, repo: str, where: str) -> Path:
    owner, _, name = repo.partition("/")
    for candidate in (repos / f"{owner}__{name}", repos / owner / name, repos / (name or owner)):
        if (candidate / ".git").exists() or (candidate / "HEAD").is_file():
            return candidate.resolve()
    raise TaskFileError(f"{where}: no clone of {repo} in {repos} (git clone "
                        f"https://github.com/{repo} {repos / f'{owner}__{name}'})")


def _check_commits(repo: Path, commits: list[tuple[str, str]]) -> None:
    """Every base_commit is a commit of `repo` (one `git cat-file --batch-check` for all)."""
    query = "".join(f"{commit}^{{commit}}\n" for commit, _ in commits)
    try:
        out = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch-check"], input=query,
                             capture_output=True, text=True, timeout=GIT_TIMEOUT_S).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TaskFileError(f"{repo}: git cannot read it ({exc})") from None
    for (commit, where), answer in zip(commits, out.splitlines(), strict=False):
        if answer.endswith("missing") or " commit " not in f" {answer} ":
            raise TaskFileError(f"{where}: base_commit {commit} is not in {repo} (fetch it: "
                                f"git -C {repo} fetch origin {commit})")


def _patched_files(patch: str) -> list[str]:
    return list(dict.fromkeys(re.findall(r"^diff --git a/(\S+) b/", patch, re.MULTILINE)))


def _check_command(source: dict[str, Any], test_cmd: str) -> str:
    base = shlex.quote(source["base_commit"])
    restore = "".join(f"git checkout -q {base} -- {shlex.quote(f)} 2>/dev/null || rm -f {shlex.quote(f)}\n"
                      for f in _patched_files(source["test_patch"]))
    ids = " ".join(shlex.quote(t) for t in [*source["fail_to_pass"], *source["pass_to_pass"]])
    return (f"{restore}git apply --whitespace=nowarn {STAGE}/test.patch || "
            f"{{ echo 'talaria: the test patch does not apply'; exit {PATCH_FAILED}; }}\n"
            + test_cmd.replace("{tests}", ids))


def checkout(source: dict[str, Any], workspace: Path) -> None:
    """A fresh clone of the instance's repository at base_commit, no refs beyond it."""
    def git(*args: str, cwd: Path | None = None) -> None:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"git {args[0]}: {done.stderr.strip()[-300:]}")

    git("clone", "-q", "--no-checkout", source["repo_dir"], str(workspace))
    git("checkout", "-q", "--detach", source["base_commit"], cwd=workspace)
    refs = subprocess.run(["git", "for-each-ref", "--format=%(refname)"], cwd=workspace,
                          capture_output=True, text=True, timeout=GIT_TIMEOUT_S).stdout.split()
    for ref in refs:  # later commits (the fix among them) must not be one `git log --all` away
        git("update-ref", "-d", ref, cwd=workspace)
    git("remote", "remove", "origin", cwd=workspace)


def verifier_files(task: dict[str, Any]) -> dict[str, str]:
    return {"test.patch": task["source"]["test_patch"]}


def grader(task: dict[str, Any]) -> Any:
    source = task["source"]

    def grade(output: str, code: int | None) -> dict[str, Any]:
        found = statuses(output)
        wanted = [*source["fail_to_pass"], *source["pass_to_pass"]]
        passed = [t for t in wanted if found.get(t) in ("PASSED", "XFAIL")]
        missing = [t for t in wanted if t not in found]
        failed = [t for t in wanted if t in found and t not in passed]
        resolved = len(passed) == len(wanted)
        graded: dict[str, Any] = {
            "reward": 1.0 if resolved else 0.0, "resolved": resolved,
            "tests": {"passed": len(passed), "total": len(wanted), "failed": failed[:MAX_NAMES],
                      "missing": missing[:MAX_NAMES],
                      "fail_to_pass_passed": sum(t in passed for t in source["fail_to_pass"]),
                      "pass_to_pass_passed": sum(t in passed for t in source["pass_to_pass"])}}
        if code == PATCH_FAILED:
            graded["error"] = "the test patch does not apply to the agent's workspace"
        return graded

    return grade
