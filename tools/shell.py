"""The session's shell: where `terminal` commands start and what they export, kept between calls.

Each command still runs in a fresh `bash` of its own process group (so a timeout, a cancel or
an `exit` ends only that command, and the editor's terminal, the sandbox and every environment
run it the same way), but it starts from the shell state the previous one left: its working
directory and its exported variables. `prologue()` is bash code the workspace has the
command's shell run first (through `$BASH_ENV`): it re-exports what earlier commands changed,
and sets an EXIT trap that saves the shell's state to the file named by `$TALARIA_SHELL_STATE`
(the workspace provides the file and hands its bytes back in `CommandResult.state`). `absorb`
reads them.

    shell = ShellState()
    result = await workspace.run("cd sub && export X=1", cwd=shell.cwd or root, ...,
                                 shell=shell.prologue())
    note = shell.absorb(result.state, roots)     # the next command starts in sub, with X=1

A command that ends without running its trap (killed on timeout, `kill -9 $$`, replaced by
`exec`) saves nothing: the next command starts from the last state that was saved, and `absorb`
says so. Without bash (`sh` in a minimal container) `export -p` carries the variables.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

STATE_VAR = "TALARIA_SHELL_STATE"
"""The variable naming the file a command's EXIT trap writes its state to."""
SH_MARK = "--export-p--"
"""Second field of a state saved by a shell other than bash: `export -p` text follows."""
MAX_STATE_BYTES = 1 << 20
"""A saved state larger than this (a huge exported variable) is not taken."""
VOLATILE = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "BASH_ENV", STATE_VAR, "TALARIA_AGENT",
                      "TALARIA_PROC"})
"""Variables the shell or Talaria set per process: never carried to the next command."""

# `$(compgen -e)` lists the exported names (bash only: the eval keeps other shells from
# parsing it); NUL separates fields, so any value round-trips. Other shells (busybox, dash)
# save POSIX `export -p`, whose quoting `shlex` reads. The start snapshot (first command only)
# is the environment every fresh shell of this session begins with.
_SAVE = (
    "__talaria_save() { [ -n \"$__talaria_state\" ] || return 0; "
    "if [ -n \"${BASH_VERSION-}\" ]; then eval '{ builtin printf \"%s\\0\" \"$PWD\"; "
    "for __talaria_n in $(compgen -e); do builtin printf \"%s=%s\\0\" \"$__talaria_n\" "
    "\"${!__talaria_n}\"; done; } >\"$1\" 2>/dev/null'; "
    "else { printf '%s\\0%s\\0' \"$PWD\" \"$__talaria_sh\"; export -p; } >\"$1\" 2>/dev/null; fi; }"
)


class ShellState:
    """One session's shell in one environment: directory and exported variables."""

    def __init__(self) -> None:
        self.cwd: Path | None = None
        """Where the next command starts (a local path: workspaces map it); None: the project."""
        self.base: dict[str, str] | None = None
        """The variables a fresh shell starts with (from the first command)."""
        self.exports: dict[str, str] = {}
        """Variables earlier commands set or changed, to export again."""
        self.unset: set[str] = set()
        """Variables earlier commands removed, to unset again."""
        self.commands = 0

    def prologue(self, *, save: bool = True) -> str:
        """Bash code run in the command's own shell before it (as `$BASH_ENV`, so the
        command's text and its line numbers stay its own): the state to restore and, with
        `save`, the trap that saves the state the command leaves."""
        lines = [f"__talaria_state=${{{STATE_VAR}-}}; __talaria_sh={SH_MARK}; "
                 f"unset {STATE_VAR} BASH_ENV"]
        if self.exports:
            lines.append("export " + " ".join(f"{k}={_quote(v)}" for k, v in sorted(self.exports.items())))
        if self.unset:
            lines.append("unset -v " + " ".join(sorted(self.unset)))
        if save:
            lines.append(_SAVE)
            if self.base is None:  # first command: what a fresh shell starts with
                lines.append('__talaria_save "$__talaria_state.start"')
            lines.append("trap '__talaria_save \"$__talaria_state\"' EXIT")
        else:
            lines.append("unset __talaria_state")
        return "\n".join(lines) + "\n"

    def script(self, command: str, *, save: bool = True) -> str:
        """The prologue and `command` as one script, for runners that cannot set `$BASH_ENV`
        (an `exec` per command); the command's line numbers are then off."""
        return self.prologue(save=save) + command

    def absorb(self, raw: bytes | None, roots: tuple[Path, ...], *,
               start: bytes | None = None) -> str | None:
        """Take the state a command saved (`raw`; `start`: the first command's start snapshot).
        Returns a note for the result when something is not as the model may expect."""
        self.commands += 1
        if raw is None and start is None and self.base is None:
            return None  # nothing was ever saved here: a runner without shell state (an exec)
        if start is not None and self.base is None:
            parsed = _parse(start)
            if parsed is not None:
                self.base = parsed[1]
        if raw is None or not raw or len(raw) > MAX_STATE_BYTES:
            return ("The shell ended without saving its state (killed, timed out, or replaced "
                    "by exec): the next command starts from the directory and variables the "
                    "last completed command left" + (f" ({self.cwd})." if self.cwd else "."))
        parsed = _parse(raw)
        if parsed is None:
            return None
        cwd_text, env = parsed
        env = {k: v for k, v in env.items() if _encodable(v)}
        cwd = Path(cwd_text)
        note = None
        if not any(_inside(cwd, root) for root in roots):
            note = (f"The shell ended in {cwd}, outside the project: the next command starts "
                    f"in {roots[0]} (pass workdir to run one elsewhere).")
            self.cwd = None
        else:
            self.cwd = None if cwd == roots[0] else cwd
        if env and self.base is not None:  # bash saved the variables
            self.exports = {k: v for k, v in env.items()
                            if k not in VOLATILE and _name(k) and self.base.get(k) != v}
            self.unset = {k for k in self.base if k not in env and k not in VOLATILE and _name(k)}
        return note


def inband(prologue: str, command: str) -> tuple[str, str]:
    """For runners that start each command by one `exec` (no file comes back, no
    `$BASH_ENV`): a script of the prologue and `command` whose EXIT trap also prints the
    saved state and start snapshot at the end of its output, each after a marker; and the
    marker, for `split_inband`.
    Exports `$TALARIA_SHELL_STATE` itself (a file in the environment's /tmp)."""
    mark = f"\0talaria-state-{os.urandom(8).hex()}\0"
    path = f"/tmp/.talaria-state-{os.urandom(6).hex()}"
    printed = f"printf '\\000talaria-state-{mark[15:-1]}\\000'"
    emit = (f"__talaria_save \"$__talaria_state\"; {printed}; cat \"$__talaria_state\" 2>/dev/null; "
            f"{printed}; cat \"$__talaria_state.start\" 2>/dev/null; "
            "rm -f \"$__talaria_state\" \"$__talaria_state.start\"")
    script = (f"export {STATE_VAR}={path}\n{prologue}"
              f"trap {_quote(emit)} EXIT\n{command}")
    return script, mark


def split_inband(output: bytes, mark: str) -> tuple[bytes, bytes | None, bytes | None]:
    """(the command's own output, its state, its start snapshot) from `inband`'s output."""
    parts = output.split(mark.encode())
    if len(parts) < 3:
        return output, None, None
    return mark.encode().join(parts[:-2]), parts[-2] or None, parts[-1] or None


def map_state(raw: bytes | None, back: Callable[[str], str]) -> bytes | None:
    """A saved state with its directory turned back into the project's local path (`back`:
    an environment's path map)."""
    if not raw:
        return None
    cwd, sep, rest = raw.partition(b"\0")
    return back(cwd.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape") + sep + rest


def state_path(directory: str) -> str:
    """A fresh state file name in `directory` (the start snapshot goes next to it)."""
    return os.path.join(directory, f"shell-{os.urandom(4).hex()}")


def read_state(path: str) -> tuple[bytes | None, bytes | None]:
    """(state, start snapshot) a command saved at `path`; None for what is missing."""
    return _read(path), _read(path + ".start")


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read(MAX_STATE_BYTES + 1)
    except OSError:
        return None


def _parse(raw: bytes) -> tuple[str, dict[str, str]] | None:
    fields = raw.decode("utf-8", "surrogateescape").split("\0")
    if not fields or not fields[0]:
        return None
    if len(fields) > 2 and fields[1] == SH_MARK:
        return fields[0], _export_p("\0".join(fields[2:]))
    env = {}
    for item in fields[1:]:
        name, sep, value = item.partition("=")
        if sep:
            env[name] = value
    return fields[0], env


def _export_p(text: str) -> dict[str, str]:
    """Variables from POSIX `export -p` output (`export NAME='value'` lines)."""
    import shlex

    try:
        words = shlex.split(text, posix=True)
    except ValueError:  # quoting we cannot read: keep nothing rather than something wrong
        return {}
    env = {}
    for word in words:
        name, sep, value = word.partition("=")
        if sep and word != "export":
            env[name] = value
    return env


def _name(name: str) -> bool:
    return name.isidentifier() and name.isascii() and not name.startswith("__talaria")


def _encodable(value: str) -> bool:
    try:
        value.encode()
    except UnicodeEncodeError:  # a lone surrogate: no JSON (editor, helper) could carry it
        return False
    return True


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _quote(value: str) -> str:
    return "'" + value.replace("'", "'\"'\"'") + "'"
