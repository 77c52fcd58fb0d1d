"""Which execution environment a session uses: a name, an optional argument, its settings.

    environment = "docker"                  # config.toml, or TALARIA_ENVIRONMENT
    environment = "ssh:me@build-box"        # NAME:ARG, as `--env` takes it
    [environments.docker]                   # the backend's settings (SCHEMAS below)
    image = "python:3.12-slim"
    [environments.gpu]                      # a named environment of some backend
    backend = "ssh"
    host = "gpu-1"

The argument fills the backend's main key (`ARG_KEY`: the image of a container, the host of
SSH; `ssh:HOST:PORT` sets the port too). Every key is checked here, before anything starts: an unknown name or key, or a value
of the wrong type, is one `EnvError` line naming it and the valid ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from talaria.tools.errors import EnvError
from talaria.tools.keys import closest, unknown_key

BACKENDS = ("local", "docker", "ssh", "singularity", "modal", "daytona", "vercel")
"""Built-in backends; `[environments.NAME] backend = ...` names more environments."""

ARG_KEY = {"docker": "image", "ssh": "host", "singularity": "image", "modal": "image",
           "daytona": "image", "vercel": "runtime"}
"""What `NAME:ARG` sets, per backend."""

_LIMITS: dict[str, tuple[type | tuple[type, ...], Any, str]] = {
    "cpus": ((int, float), 2, "CPUs the environment may use"),
    "memory": (str, "2g", "memory limit (k, m, g suffixes)"),
    "pids": (int, 512, "processes at once"),
    "disk": ((str, type(None)), None, "disk limit of the writable layer (engines that support it)"),
    "network": (bool, False, "network access"),
}

SCHEMAS: dict[str, dict[str, tuple[type | tuple[type, ...], Any, str]]] = {
    "local": {},
    "docker": {
        "engine": ((str, type(None)), None, "podman or docker (default: whichever is found)"),
        "image": (str, "python:3.12-slim", "image to run (must be present; never pulled)"),
        **_LIMITS,
        "persistent": (bool, False, "keep the container and a cache volume across sessions"),
        "cache": (str, "/root/.cache", "where the persistent cache volume is mounted"),
    },
    "ssh": {
        "host": ((str, type(None)), None, "host (or ~/.ssh/config alias), user@host also works"),
        "user": ((str, type(None)), None, "login name"),
        "port": ((int, type(None)), None, "port"),
        "identity": ((str, type(None)), None, "private key file"),
        "workdir": ((str, type(None)), None, "remote project copy (default ~/.talaria/work/NAME-HASH)"),
        "sync": (str, "auto", "auto (rsync if both ends have it, else tar), rsync or tar"),
        "options": (list, [], "more `-o` options for ssh"),
        "track_cwd": (bool, True, "`cd` and exports carry over to the next command (false: "
                                  "each command starts afresh in the project)"),
    },
    "singularity": {
        "binary": ((str, type(None)), None, "apptainer or singularity (default: whichever is found)"),
        "image": ((str, type(None)), None, "SIF file or sandbox directory"),
        "overlay": ((str, type(None)), None, "overlay image or directory for persistence"),
        "network": (bool, True, "the host's network (false: --net --network none)"),
    },
    "modal": {
        "image": (str, "python:3.12-slim", "registry image the sandbox starts from"),
        "app": (str, "talaria", "Modal app name"),
        "timeout": (int, 3600, "sandbox lifetime, seconds"),
        "cpus": ((int, float), 2, "CPUs"), "memory": (int, 2048, "MiB"),
        "persistent": (bool, False, "snapshot the filesystem on close, restore it next time"),
    },
    "daytona": {
        "image": ((str, type(None)), None, "image (default: Daytona's)"),
        "persistent": (bool, False, "stop instead of delete on close; reuse next time"),
    },
    "vercel": {
        "runtime": (str, "python3.13", "sandbox runtime"),
        "timeout": (int, 2700, "sandbox lifetime, seconds"),
        "cpus": (int, 2, "vCPUs"),
        "persistent": (bool, False, "snapshot the filesystem on close, restore it next time"),
    },
}


@dataclass(frozen=True, slots=True)
class EnvSpec:
    """A resolved environment: its name as the user wrote it, its backend, its settings."""

    name: str
    backend: str
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """What cards and errors call it: `docker`, `ssh:me@box`."""
        return self.name


def choices(tables: Mapping[str, Any]) -> list[str]:
    """Every environment name a user may pick: the built-ins and the named tables."""
    return list(dict.fromkeys([*BACKENDS, *tables]))


def check_name(text: str, tables: Mapping[str, Any]) -> None:
    """Raise EnvError unless `text` (NAME or NAME:ARG) names a known environment."""
    name = text.partition(":")[0].strip()
    if name not in BACKENDS and name not in tables:
        guess = closest(name, choices(tables))
        meant = f" (did you mean {guess!r}?)" if guess else ""
        raise EnvError(f"unknown environment {name!r}{meant}; choose one of "
                       f"{', '.join(choices(tables))} (or add [environments.NAME] with "
                       "backend = ... to config.toml)")


def resolve(text: str, tables: Mapping[str, Any]) -> EnvSpec:
    """`NAME[:ARG]` with the `[environments.NAME]` settings, checked; EnvError when not."""
    text = (text or "local").strip()
    check_name(text, tables)
    name, _, arg = text.partition(":")
    table = dict(tables.get(name) or {})
    if not isinstance(tables.get(name, {}), Mapping):
        raise EnvError(f"[environments.{name}] must be a table")
    backend = table.pop("backend", name)
    if backend not in BACKENDS:
        raise EnvError(f"[environments.{name}] backend {backend!r} is not one of {', '.join(BACKENDS)}")
    schema = SCHEMAS[backend]
    if arg:
        if backend not in ARG_KEY:
            raise EnvError(f"environment {name!r} takes no argument (got {arg!r})")
        if backend == "ssh" and _port(arg):  # ssh:HOST:PORT, as scp and many tools take it
            arg, table["port"] = arg.rpartition(":")[0], _port(arg)
        table[ARG_KEY[backend]] = arg
    settings: dict[str, Any] = {}
    for key, value in table.items():
        if key not in schema:
            known = ", ".join(sorted(schema)) or "none"
            raise EnvError(f"[environments.{name}] {unknown_key(key, schema)}; keys of {backend}: "
                           f"{known}")
        kinds = schema[key][0]
        if isinstance(value, bool) and kinds in (int, (int, float)) or not isinstance(value, kinds):
            raise EnvError(f"[environments.{name}] {key} must be {_kind(kinds)}, got {value!r}")
        settings[key] = value
    for key, (_, default, _doc) in schema.items():
        settings.setdefault(key, list(default) if isinstance(default, list) else default)
    return EnvSpec(text, backend, settings)


def _port(arg: str) -> int | None:
    """The port of `HOST:PORT` (`user@host:2222`), or None when there is none."""
    host, sep, port = arg.rpartition(":")
    if sep and host and port.isdigit() and 0 < int(port) < 65536 and "]" not in port:
        return int(port)
    return None


def _kind(kinds: type | tuple[type, ...]) -> str:
    names = {int: "an integer", float: "a number", str: "a string", bool: "true or false",
             list: "a list", type(None): "unset"}
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)
