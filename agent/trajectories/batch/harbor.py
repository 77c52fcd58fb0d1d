"""Harbor task directories as batch tasks (`talaria batch DIR`).

    DIR/                       a dataset: one directory per task (or DIR is one task)
      NAME/instruction.md      the prompt
      NAME/task.toml           timeouts, resources, verifier settings, metadata
      NAME/environment/        Dockerfile (built with podman, cached by content: images.py)
      NAME/tests/test.sh       the verifier: writes /logs/verifier/reward.txt (or reward.json)
      NAME/solution/solve.sh   the reference solution (`--agent oracle`)

The task.toml keys read (Harbor's names; `SCHEMA` lists every known one): `[agent]
timeout_sec` (the agent's wall time, default 600), `[verifier] timeout_sec` (default 600) and
`env`, `[solution] env`, `[environment] build_timeout_sec`, `docker_image` (used instead of
the Dockerfile), `cpus`, `memory_mb` (or the older `memory = "2G"`), `allow_internet`
(default true); `[metadata] tags`, `category`, `difficulty` and `[task] keywords` become the
task's tags. Known but not enforced here: `storage_mb`, `user`s, `os = "linux"`. Refused with
the reason: GPUs, Windows, a separate verifier environment, multi-step tasks, MCP servers. An
unknown key is an error naming it (and the key it was probably meant to be); so is a value
of the wrong type: nothing in a task.toml is silently dropped.

The task runs in a container of its image by default; its WORKDIR (from the Dockerfile)
becomes the task's workspace (stage.link_workdir). With `--env local` (or ssh) the Dockerfile
is not built: Harbor's paths are mapped (stage.py), and the workspace starts with what its
COPY and ADD instructions put into the WORKDIR from the build context (`copies_of`); its RUN
steps and files placed outside the WORKDIR are not there (a task that needs them needs its
container, and `--agent oracle` names it).
"""

from __future__ import annotations

import json
import posixpath
import re
import tomllib
from pathlib import Path
from typing import Any

from talaria.agent.trajectories.batch.checks import DEFAULT_CHECK_TIMEOUT_S, closest
from talaria.agent.trajectories.batch.images import DEFAULT_BUILD_TIMEOUT_S
from talaria.agent.trajectories.batch.stage import shell_script
from talaria.agent.trajectories.batch.tasks import Task, TaskFileError

DEFAULT_AGENT_TIMEOUT_S = 600.0
"""Harbor's default `[agent] timeout_sec`."""
NUMBER, TEXT, TABLE, LIST, FLAG, WHOLE = "a number", "a string", "a table", "a list", "true or false", "a whole number"
SCHEMA: dict[str, dict[str, str]] = {
    "": {"version": TEXT, "schema_version": TEXT, "source": TEXT, "task": TABLE,
         "metadata": TABLE, "verifier": TABLE, "agent": TABLE, "environment": TABLE,
         "solution": TABLE, "steps": LIST},
    "task": {"name": TEXT, "description": TEXT, "authors": LIST, "keywords": LIST},
    "verifier": {"timeout_sec": NUMBER, "env": TABLE, "user": TEXT, "environment_mode": TEXT,
                 "environment": TABLE},
    "agent": {"timeout_sec": NUMBER, "user": TEXT},
    "environment": {"build_timeout_sec": NUMBER, "docker_image": TEXT, "os": TEXT,
                    "cpus": NUMBER, "memory_mb": WHOLE, "storage_mb": WHOLE, "gpus": WHOLE,
                    "gpu_types": LIST, "allow_internet": FLAG, "mcp_servers": LIST,
                    "skills_dir": TEXT, "memory": TEXT, "storage": TEXT},
    "solution": {"env": TABLE},
}
_TYPES: dict[str, type | tuple[type, ...]] = {NUMBER: (int, float), TEXT: str, TABLE: dict,
                                            LIST: list, FLAG: bool, WHOLE: int}


def is_harbor(path: Path) -> bool:
    return path.is_dir()


def load_harbor(path: Path) -> list[Task]:
    """The tasks of a Harbor dataset directory (or of one task directory), by name."""
    if (path / "task.toml").exists() or (path / "instruction.md").exists():
        dirs = [path]
    else:
        dirs = sorted(d for d in path.iterdir() if d.is_dir() and not d.name.startswith("."))
    if not dirs:
        raise TaskFileError(f"{path}: no Harbor task directories in it (each holds "
                            "instruction.md, task.toml, environment/Dockerfile, tests/test.sh)")
    return [_task(d.resolve(), index) for index, d in enumerate(dirs)]


def _task(directory: Path, index: int) -> Task:
    def need(name: str, what: str) -> Path:
        if not (directory / name).exists():
            raise TaskFileError(f"{directory}: no {name} ({what})")
        return directory / name

    instruction = need("instruction.md", "every Harbor task directory has one: the prompt")
    config = _read_toml(need("task.toml", "timeouts, resources and the verifier's settings"))
    need("tests/test.sh", "the verifier: it writes the reward to /logs/verifier/reward.txt")
    where = f"{directory / 'task.toml'}"
    _check_schema(config, where)
    _refuse_unsupported(config, where)
    verifier, agent = config.get("verifier", {}), config.get("agent", {})
    environment, metadata = config.get("environment", {}), config.get("metadata", {})
    prompt = instruction.read_text(encoding="utf-8")
    if not prompt.strip():
        raise TaskFileError(f"{instruction}: empty (write the task's prompt there)")
    context = directory / "environment"
    dockerfile = context / "Dockerfile"
    if not dockerfile.is_file() and not environment.get("docker_image"):
        raise TaskFileError(f"{directory}: no environment/Dockerfile and no [environment] "
                            "docker_image: the task needs an image to run in")
    solution = directory / "solution"
    source = {
        "format": "harbor", "dir": str(directory),
        "build": {"context": str(context), "timeout": float(
            environment.get("build_timeout_sec") or DEFAULT_BUILD_TIMEOUT_S)}
        if dockerfile.is_file() and not environment.get("docker_image") else None,
        "image": environment.get("docker_image"),
        "workdir": workdir_of(dockerfile) if dockerfile.is_file() else None,
        "copies": copies_of(dockerfile) if dockerfile.is_file() else [],
        "resources": _resources(environment, where),
        "solution_env": {k: str(v) for k, v in (config.get("solution", {}).get("env") or {}).items()},
    }
    return Task(
        id=str(config.get("task", {}).get("name") or directory.name), prompt=prompt, index=index,
        check={"command": shell_script("/tests/test.sh"),
               "timeout": float(verifier.get("timeout_sec") or DEFAULT_CHECK_TIMEOUT_S),
               "env": {k: str(v) for k, v in (verifier.get("env") or {}).items()}},
        tests=str(directory / "tests"),
        solution=str(solution) if (solution / "solve.sh").is_file() else None,
        tags=_tags(config, metadata, where),
        timeout=float(agent.get("timeout_sec") or DEFAULT_AGENT_TIMEOUT_S), source=source,
    )


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as exc:
        raise TaskFileError(f"{path}: not valid TOML ({exc})") from None


def _check_schema(config: dict[str, Any], where: str) -> None:
    for section, known in SCHEMA.items():
        table = config if not section else config.get(section, {})
        if not isinstance(table, dict):
            raise TaskFileError(f"{where}: [{section}] must be a table")
        name = f"[{section}]" if section else "the top level"
        for key, value in table.items():
            if key not in known:
                raise TaskFileError(f"{where}: unknown key {key!r} in {name}"
                                    f"{closest(key, list(known))}; known: {', '.join(known)}")
            kind = known[key]
            ok = isinstance(value, _TYPES[kind]) and not (
                kind in (NUMBER, WHOLE) and isinstance(value, bool))
            if not ok or kind in (NUMBER, WHOLE) and value < 0:
                raise TaskFileError(f"{where}: {name} {key} must be {kind}"
                                    f"{' >= 0' if kind in (NUMBER, WHOLE) else ''}, not {value!r}")


def _refuse_unsupported(config: dict[str, Any], where: str) -> None:
    verifier, environment = config.get("verifier", {}), config.get("environment", {})
    refusals = [
        ("steps" in config, "multi-step tasks ([[steps]]) are not supported; split them into tasks"),
        (verifier.get("environment_mode") not in (None, "shared") or "environment" in verifier,
         "a separate verifier environment is not supported: the verifier runs where the task "
         "ran (remove environment_mode / [verifier.environment])"),
        (bool(environment.get("gpus")), "GPUs are not supported by talaria batch (gpus = 0)"),
        (environment.get("os") not in (None, "linux"), "only os = \"linux\" tasks can run"),
        (bool(environment.get("mcp_servers")), "a task's MCP servers are not started by talaria "
         "batch (remove mcp_servers, or add them to config.toml's [mcp_servers])"),
    ]
    for refused, why in refusals:
        if refused:
            raise TaskFileError(f"{where}: {why}")


def _resources(environment: dict[str, Any], where: str) -> dict[str, Any]:
    """Harbor's resources as the docker environment's settings (tools/environments/spec.py)."""
    resources: dict[str, Any] = {"network": bool(environment.get("allow_internet", True))}
    if "cpus" in environment:
        resources["cpus"] = environment["cpus"]
    if "memory_mb" in environment:
        resources["memory"] = f"{int(environment['memory_mb'])}m"
    elif "memory" in environment:
        if not re.fullmatch(r"\d+(\.\d+)?[KkMmGg]?", environment["memory"].strip()):
            raise TaskFileError(f"{where}: [environment] memory {environment['memory']!r}: "
                                "write memory_mb = 2048")
        resources["memory"] = environment["memory"].strip().lower()
    return resources


def _tags(config: dict[str, Any], metadata: dict[str, Any], where: str) -> tuple[str, ...]:
    tags = [*(metadata.get("tags") or []), *(config.get("task", {}).get("keywords") or [])]
    if not all(isinstance(t, str) for t in tags):
        raise TaskFileError(f"{where}: tags and keywords must be lists of strings")
    for key in ("category", "difficulty"):
        if isinstance(metadata.get(key), str) and metadata[key]:
            tags.append(f"{key}:{metadata[key]}")
    return tuple(dict.fromkeys(t for t in tags if t))


def workdir_of(dockerfile: Path) -> str | None:
    """The image's WORKDIR as its Dockerfile sets it last (absolute, no variables), or None."""
    workdir: str | None = None
    for line in dockerfile.read_text(encoding="utf-8", errors="replace").splitlines():
        match = re.match(r"\s*WORKDIR\s+(\S+)\s*$", line, re.IGNORECASE)
        if match:
            value = match.group(1).strip("\"'")
            if value.startswith("/") and "$" not in value:
                workdir = value
            elif workdir and "$" not in value:
                workdir = f"{workdir.rstrip('/')}/{value}"
    return workdir


def copies_of(dockerfile: Path) -> list[tuple[str, str]]:
    """The Dockerfile's COPY / ADD of build-context files that land in the final WORKDIR, as
    (source relative to the context, destination relative to the WORKDIR, "" for itself; a
    trailing "/" kept: a directory). Skipped: `--from` stages, URLs, variables, and
    destinations outside the WORKDIR."""
    final = workdir_of(dockerfile)
    if not final:
        return []
    copies: list[tuple[str, str]] = []
    workdir = "/"
    for line in _instructions(dockerfile):
        match = re.match(r"(WORKDIR|COPY|ADD)\s+(.*)$", line, re.IGNORECASE)
        if not match:
            continue
        verb, rest = match.group(1).upper(), match.group(2).strip()
        if verb == "WORKDIR":
            value = rest.strip("\"'")
            workdir = value if value.startswith("/") else f"{workdir.rstrip('/')}/{value}"
            continue
        words = _copy_words(rest)
        if words is None or len(words) < 2 or "$" in rest:
            continue
        *sources, dest = words
        target = posixpath.normpath(dest if dest.startswith("/") else f"{workdir}/{dest}")
        base = posixpath.normpath(final)
        if target != base and not target.startswith(base.rstrip("/") + "/"):
            continue
        inside = target[len(base):].lstrip("/")
        if inside and (dest.endswith("/") or len(sources) > 1):
            inside += "/"
        copies.extend((src, inside) for src in sources if "://" not in src)
    return copies


def _instructions(dockerfile: Path) -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    out: list[str] = []
    pending = ""
    for raw in dockerfile.read_text(encoding="utf-8", errors="replace").splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append(pending + line)
        pending = ""
    if pending:
        out.append(pending)
    return out


def _copy_words(rest: str) -> list[str] | None:
    """A COPY/ADD's sources and destination (JSON or shell form); None for `--from`."""
    if rest.startswith("["):
        try:
            words = json.loads(rest)
        except ValueError:
            return None
        return [str(w) for w in words] if isinstance(words, list) else None
    words = rest.split()
    if any(w.startswith("--from") for w in words):
        return None
    return [w for w in words if not w.startswith("--")]
